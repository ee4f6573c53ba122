/* Convolution as im2col and one oneDNN matrix product per chunk of samples,
 * activations in NHWC, in their type (f32, or bf16 with f32 accumulation).
 * With M = chunk rows (samples x P x Q) and Kc = R S C:
 *
 *   Xc (M, Kc)     row (n, p, q) holds x[n, p*st - pad + r*dil, q*st - pad + s*dil, c]
 *                  at column (r S + s) C + c, 0 outside the image (pad: the
 *                  padding above or left; that below or right only sizes P, Q)
 *   Wk (K, Kc)     Wk[k][(r S + s) C + c] = w[k][c][r][s]: each filter's
 *                  taps reordered within its own row
 *   forward:          y (M, K) = Xc Wk^T + b, then ReLU: y's NHWC rows exactly
 *   backward_data:    dXc (M, Kc) = dy Wk, f32, then each column summed back
 *                     into the pixel it came from (col2im)
 *   backward_weights: dWk (K, Kc) += dy^T Xc over the chunks, f32; db = sum dy
 * (the transposes are strides of the matrix product's operands, not copies)
 *
 * The product runs on AMX or AVX512-BF16 at 2-2.8 TFLOP/s in bf16 on a
 * 2-core Xeon (bench/PROFILE.md), where oneDNN 2.6's direct bf16 kernels
 * for small images and its bf16 weight gradients reach far less; the
 * chooser (conv2d.c) keeps it only where it measures faster. Chunks keep
 * Xc within a few tens of MiB. */
#include "device/cpu/conv2d.h"

#include "core/bf16.h"

#include <omp.h>
#include <string.h>

#define CHUNK_BYTES ((size_t)64 << 20)
/* Columns a chunk of which stays in a core's L2 cache while the product
 * reads it: half a MiB, the smallest L2 of the CPUs measured. */
#define CACHE_BYTES ((size_t)512 << 10)

/* The product of one pass over a chunk of `rows` rows (see the top). */
static int pass_matmul(dp__cpu *cpu, dp__conv_pass pass, const dp__conv2d_args *a, int64_t rows,
                       int64_t kc, int64_t K, const void *src, const void *wei, void *dst)
{
    dp__cpu_matmul mm;
    memset(&mm, 0, sizeof mm);
    dnnl_data_type_t dt = a->x.dtype == DP_BF16 ? dnnl_bf16 : dnnl_f32;
    mm.a_type = mm.b_type = dt;
    mm.c_type = dnnl_f32;
    mm.alpha = 1.0f;
    if (pass == DP__CONV_FORWARD) { /* Xc (rows, kc) Wk^T (kc, K) [+ b, ReLU] */
        mm.m = rows, mm.k = kc, mm.n = K;
        mm.a_strides[0] = kc, mm.a_strides[1] = 1;
        mm.b_strides[0] = 1, mm.b_strides[1] = kc;
        mm.c_type = dt;
        mm.bias = a->b.data != NULL;
        mm.relu = a->fuse_relu;
    } else if (pass == DP__CONV_BACKWARD_DATA) { /* dy (rows, K) Wk (K, kc) */
        mm.m = rows, mm.k = K, mm.n = kc;
        mm.a_strides[0] = K, mm.a_strides[1] = 1;
        mm.b_strides[0] = kc, mm.b_strides[1] = 1;
    } else { /* dy^T (K, rows) Xc (rows, kc), added into dWk */
        mm.m = K, mm.k = rows, mm.n = kc;
        mm.a_strides[0] = 1, mm.a_strides[1] = K;
        mm.b_strides[0] = kc, mm.b_strides[1] = 1;
        mm.beta = 1.0f;
    }
    mm.c_strides[0] = mm.n, mm.c_strides[1] = 1;
    return dp__cpu_matmul_run(cpu, &mm, src, wei, dst, a->b.data);
}

/* The geometry of one convolution. */
typedef struct geom {
    int64_t N, C, H, W, K, R, S, P, Q, kc;
    int sh, sw, ph, pw, dh, dw; /* stride, padding above and left, dilation */
    size_t esize;               /* bytes per activation element */
} geom;

static geom geom_of(const dp__conv2d_args *a)
{
    geom g = {.N = a->x.shape[0],
              .C = a->x.shape[1],
              .H = a->x.shape[2],
              .W = a->x.shape[3],
              .K = a->w.shape[0],
              .R = a->w.shape[2],
              .S = a->w.shape[3],
              .sh = a->stride_h,
              .sw = a->stride_w,
              .ph = a->pad_h,
              .pw = a->pad_w,
              .dh = a->dilation_h,
              .dw = a->dilation_w};
    g.P = dp__conv_out(g.H, a->pad_h, a->pad_bottom, g.R, g.dh, g.sh);
    g.Q = dp__conv_out(g.W, a->pad_w, a->pad_right, g.S, g.dw, g.sw);
    g.kc = g.R * g.S * g.C;
    g.esize = dp_dtype_size(a->x.dtype);
    return g;
}

/* Xc for samples [n0, n1) of x (NHWC), elements of g->esize bytes. */
static void im2col(const geom *g, const char *x, char *col, int64_t n0, int64_t n1)
{
    int64_t rows = (n1 - n0) * g->P * g->Q;
    size_t cb = (size_t)g->C * g->esize;
#pragma omp parallel for if (rows > 64)
    for (int64_t row = 0; row < rows; row++) {
        int64_t n = n0 + row / (g->P * g->Q), p = row / g->Q % g->P, q = row % g->Q;
        char *dst = col + (size_t)row * (size_t)g->kc * g->esize;
        int64_t w0 = q * g->sw - g->pw;
        for (int64_t r = 0; r < g->R; r++) {
            int64_t h = p * g->sh - g->ph + r * g->dh;
            if (h < 0 || h >= g->H) {
                memset(dst, 0, cb * (size_t)g->S);
                dst += cb * (size_t)g->S;
            } else if (g->dw == 1) {
                /* The row's taps are adjacent pixels, C channels each, in
                 * NHWC: one copy of those inside x (a 5x5 kernel's row of
                 * 20 channels is 100 values), zeros for the padding. */
                int64_t lo = w0 < 0 ? -w0 : 0, hi = g->W - w0 < g->S ? g->W - w0 : g->S;
                if (hi < lo)
                    hi = lo;
                memset(dst, 0, cb * (size_t)lo);
                memcpy(dst + cb * (size_t)lo, x + (size_t)((n * g->H + h) * g->W + w0 + lo) * cb,
                       cb * (size_t)(hi - lo));
                memset(dst + cb * (size_t)hi, 0, cb * (size_t)(g->S - hi));
                dst += cb * (size_t)g->S;
            } else {
                for (int64_t s = 0; s < g->S; s++, dst += cb) {
                    int64_t w = w0 + s * g->dw;
                    if (w < 0 || w >= g->W)
                        memset(dst, 0, cb);
                    else
                        memcpy(dst, x + (size_t)((n * g->H + h) * g->W + w) * cb, cb);
                }
            }
        }
    }
}

/* dx for samples [n0, n1) (NHWC, f32 or bf16) = the columns of dXc (f32)
 * summed into the pixels they came from, in a fixed order. */
static void col2im(const geom *g, const float *dcol, float *acc, void *dx, dp_dtype dtype,
                   int64_t n0, int64_t n1)
{
    int64_t pix = g->H * g->W * g->C;
#pragma omp parallel for if (n1 - n0 > 1)
    for (int64_t n = n0; n < n1; n++) {
        float *a = acc + (n - n0) * pix;
        memset(a, 0, (size_t)pix * sizeof *a);
        for (int64_t p = 0; p < g->P; p++)
            for (int64_t q = 0; q < g->Q; q++) {
                const float *src = dcol + (((n - n0) * g->P + p) * g->Q + q) * g->kc;
                for (int64_t r = 0; r < g->R; r++) {
                    int64_t h = p * g->sh - g->ph + r * g->dh;
                    for (int64_t s = 0; s < g->S; s++, src += g->C) {
                        int64_t w = q * g->sw - g->pw + s * g->dw;
                        if (h < 0 || h >= g->H || w < 0 || w >= g->W)
                            continue;
                        float *d = a + ((h * g->W) + w) * g->C;
#pragma omp simd
                        for (int64_t c = 0; c < g->C; c++)
                            d[c] += src[c];
                    }
                }
            }
        if (dtype == DP_BF16)
            dp__cpu_bf16_from_f32((dp__bf16 *)dx + n * pix, a, pix);
        else
            memcpy((float *)dx + n * pix, a, (size_t)pix * sizeof *a);
    }
}

/* The weights' reorder between OIHW f32 (the parameters) and Wk, which is
 * OHWI ("acdb": each filter's taps in (r, s, c) order) in the activations'
 * type: oneDNN's reorder, which converts to bf16 on the way. */
typedef struct wk_key {
    int to_matrix, bf16;
    int64_t w[4];
} wk_key;

typedef struct wk_prim {
    dnnl_primitive_t prim;
    dnnl_memory_t from, to;
} wk_prim;

static void wk_prim_destroy(void *p)
{
    wk_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    if (c->from)
        dnnl_memory_destroy(c->from);
    if (c->to)
        dnnl_memory_destroy(c->to);
    dp__free(c);
}

static int reorder_weights(dp__cpu *cpu, const geom *g, bool to_matrix, dp_dtype dtype,
                           const void *from, void *to)
{
    wk_key k;
    memset(&k, 0, sizeof k);
    k.to_matrix = to_matrix;
    k.bf16 = dtype == DP_BF16;
    k.w[0] = g->K, k.w[1] = g->C, k.w[2] = g->R, k.w[3] = g->S;
    wk_prim *c = dp__cpu_prim_find(cpu, &k, sizeof k);
    if (!c) {
        dnnl_memory_desc_t oihw, ohwi;
        dnnl_dims_t dims = {k.w[0], k.w[1], k.w[2], k.w[3]};
        dnnl_memory_desc_init_by_tag(&oihw, 4, dims, dnnl_f32, dnnl_abcd);
        dnnl_memory_desc_init_by_tag(&ohwi, 4, dims, dp__cpu_dnnl_type(dtype), dnnl_acdb);
        const dnnl_memory_desc_t *src = to_matrix ? &oihw : &ohwi, *dst = to_matrix ? &ohwi : &oihw;
        dnnl_primitive_desc_t pd;
        c = dp__calloc(1, sizeof *c);
        if (!c)
            return DP_ENOMEM;
        if (dnnl_reorder_primitive_desc_create(&pd, src, cpu->engine, dst, cpu->engine, NULL) !=
            dnnl_success) {
            dp__free(c);
            DP_ERROR("oneDNN: no reorder of convolution weights to the matrix layout");
            return DP_EDEVICE;
        }
        dnnl_status_t st = dnnl_primitive_create(&c->prim, pd);
        dnnl_primitive_desc_destroy(pd);
        if (st != dnnl_success ||
            dnnl_memory_create(&c->from, src, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
            dnnl_memory_create(&c->to, dst, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success) {
            wk_prim_destroy(c);
            DP_ERROR("oneDNN: cannot create the weights' reorder");
            return DP_EDEVICE;
        }
        DP_TRY(dp__cpu_prim_put(cpu, &k, sizeof k, c, wk_prim_destroy));
    }
    dnnl_memory_set_data_handle(c->from, (void *)from);
    dnnl_memory_set_data_handle(c->to, to);
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, c->from}, {DNNL_ARG_TO, c->to}};
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, 2, args));
    return 0;
}

/* db (K) = the sum of dy's rows (M, K), each thread a fixed block of rows,
 * the blocks' sums added in thread order: the same result for a team size. */
static int bias_grad(dp__cpu *cpu, const void *dy, dp_dtype dtype, int64_t rows, int64_t K,
                     float *db)
{
    int team = cpu->threads > 0 ? cpu->threads : 1;
    float *part = dp__cpu_scratch(cpu, 5, (size_t)(team * K) * sizeof *part);
    if (!part)
        return DP_ENOMEM;
    memset(part, 0, (size_t)(team * K) * sizeof *part);
#pragma omp parallel num_threads(team)
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
        float *acc = part + (int64_t)t * K;
        for (int64_t r = r0; r < r1; r++) {
            if (dtype == DP_BF16) {
                const dp__bf16 *row = (const dp__bf16 *)dy + r * K;
#pragma omp simd
                for (int64_t k = 0; k < K; k++)
                    acc[k] += dp__bf16_to_f32(row[k]);
            } else {
                const float *row = (const float *)dy + r * K;
#pragma omp simd
                for (int64_t k = 0; k < K; k++)
                    acc[k] += row[k];
            }
        }
    }
    for (int64_t k = 0; k < K; k++) {
        float s = 0.0f;
        for (int t = 0; t < team; t++)
            s += part[(int64_t)t * K + k];
        db[k] = s;
    }
    return 0;
}

int dp__cpu_conv_gemm(dp_device_t *dev, dp__conv_pass pass, const dp__conv2d_args *a)
{
    dp__cpu *cpu = dev->impl;
    /* One product over all channels: groups would need one per group, and
     * the chooser never offers this path for them (conv2d.c's serves). */
    DP_ASSERT(a->groups == 1);
    if (!a->x.nhwc && a->x.shape[1] != 1)
        return DP_ENOTSUP;
    geom g = geom_of(a);
    dp_dtype dt = a->x.dtype;
    int64_t per_sample = g.P * g.Q;
    size_t sample_bytes =
        (size_t)(per_sample * g.kc) * (pass == DP__CONV_BACKWARD_DATA ? 4 : g.esize);
    /* Chunks of equal size (the matrix product runs best on one shape), of
     * columns that fit CACHE_BYTES: two devices sharing a CPU, each
     * streaming all 10 MB of LeNet's second layer's columns through the
     * caches, ran its weight pass 1.4x slower than one alone, and slower
     * than oneDNN's direct kernel, which the chooser, timing one device,
     * did not see (bench/PROFILE_LENET.md). But at least kc and 4 K rows, so that
     * the product's other operand, and the weight gradient (K kc floats)
     * it adds into once a chunk, count for little beside the columns; and
     * within CHUNK_BYTES. */
    size_t per = sample_bytes ? sample_bytes : 1;
    int64_t rows_least = g.kc > 4 * g.K ? g.kc : 4 * g.K;
    int64_t most = (int64_t)(CACHE_BYTES / per);
    if (most * per_sample < rows_least)
        most = (rows_least + per_sample - 1) / (per_sample ? per_sample : 1);
    if (most > (int64_t)(CHUNK_BYTES / per))
        most = (int64_t)(CHUNK_BYTES / per);
    most = most < 1 ? 1 : most > g.N ? g.N : most;
    int64_t nchunks = (g.N + most - 1) / most;
    int64_t chunk = nchunks ? (g.N + nchunks - 1) / nchunks : 1;
    size_t wm_bytes = (size_t)(g.kc * g.K) * (pass == DP__CONV_BACKWARD_WEIGHTS ? 4 : g.esize);
    void *wm = dp__cpu_scratch(cpu, 3, wm_bytes);
    void *col = dp__cpu_scratch(cpu, 4, (size_t)chunk * sample_bytes);
    float *acc = pass == DP__CONV_BACKWARD_DATA
                     ? dp__cpu_scratch(cpu, 5, (size_t)(chunk * g.H * g.W * g.C) * sizeof(float))
                     : NULL;
    if (!wm || !col || (pass == DP__CONV_BACKWARD_DATA && !acc))
        return DP_ENOMEM;
    if (pass == DP__CONV_BACKWARD_WEIGHTS)
        memset(wm, 0, wm_bytes);
    else
        DP_TRY(reorder_weights(cpu, &g, true, dt, a->w.data, wm));
    for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
        int64_t n1 = n0 + chunk < g.N ? n0 + chunk : g.N;
        int64_t rows = (n1 - n0) * per_sample;
        size_t out_row = (size_t)(n0 * per_sample * g.K);
        const char *dy = (const char *)a->dy.data + out_row * g.esize;
        if (pass == DP__CONV_FORWARD) {
            im2col(&g, a->x.data, col, n0, n1);
            DP_TRY(pass_matmul(cpu, pass, a, rows, g.kc, g.K, col, wm,
                               (char *)a->y.data + out_row * g.esize));
        } else if (pass == DP__CONV_BACKWARD_DATA) {
            DP_TRY(pass_matmul(cpu, pass, a, rows, g.kc, g.K, dy, wm, col));
            col2im(&g, col, acc, a->dx.data, dt, n0, n1);
        } else {
            im2col(&g, a->x.data, col, n0, n1);
            DP_TRY(pass_matmul(cpu, pass, a, rows, g.kc, g.K, dy, col, wm));
        }
    }
    if (pass == DP__CONV_BACKWARD_WEIGHTS) {
        DP_TRY(reorder_weights(cpu, &g, false, DP_F32, wm, a->dw.data));
        if (a->db.data)
            DP_TRY(bias_grad(cpu, a->dy.data, dt, g.N * per_sample, g.K, a->db.data));
    }
    return 0;
}
