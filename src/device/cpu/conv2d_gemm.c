/* Convolution as im2col and one oneDNN matrix product per chunk of samples,
 * activations in NHWC, in their type (f32, or bf16 with f32 accumulation).
 * With M = chunk rows (samples x P x Q) and Kc = R S C:
 *
 *   Xc (M, Kc)     row (n, p, q) holds x[n, p*st - pad + r, q*st - pad + s, c]
 *                  at column (r S + s) C + c, 0 outside the image
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

enum { MM_FORWARD, MM_BACKWARD_DATA, MM_BACKWARD_WEIGHTS };

typedef struct mm_key {
    int kind, bf16, bias, relu;
    int64_t rows, kc, k;
} mm_key;

typedef struct mm_prim {
    dnnl_primitive_t prim;
    dnnl_memory_t src, wei, dst, bias;
} mm_prim;

static void mm_prim_destroy(void *p)
{
    mm_prim *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    dnnl_memory_t mems[] = {c->src, c->wei, c->dst, c->bias};
    for (size_t i = 0; i < DP_COUNTOF(mems); i++)
        if (mems[i])
            dnnl_memory_destroy(mems[i]);
    dp__free(c);
}

static void md2(dnnl_memory_desc_t *md, int64_t rows, int64_t cols, dnnl_data_type_t dt,
                bool transposed)
{
    dnnl_dims_t dims = {rows, cols};
    /* transposed: the matrix is stored as its (cols, rows) transpose */
    dnnl_dims_t strides = {transposed ? 1 : cols, transposed ? rows : 1};
    dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

static int mm_build(dp__cpu *cpu, const mm_key *k, mm_prim **out)
{
    dnnl_data_type_t dt = k->bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_t src, wei, dst, bias;
    dnnl_dims_t bd = {1, k->k};
    dnnl_memory_desc_init_by_tag(&bias, 2, bd, dnnl_f32, dnnl_ab);
    if (k->kind == MM_FORWARD) { /* Xc (rows, kc) Wk^T (kc, k) */
        md2(&src, k->rows, k->kc, dt, false);
        md2(&wei, k->kc, k->k, dt, true);
        md2(&dst, k->rows, k->k, dt, false);
    } else if (k->kind == MM_BACKWARD_DATA) { /* dy (rows, k) Wk (k, kc) */
        md2(&src, k->rows, k->k, dt, false);
        md2(&wei, k->k, k->kc, dt, false);
        md2(&dst, k->rows, k->kc, dnnl_f32, false);
    } else { /* dy^T (k, rows) Xc (rows, kc), added into dWk */
        md2(&src, k->k, k->rows, dt, true);
        md2(&wei, k->rows, k->kc, dt, false);
        md2(&dst, k->k, k->kc, dnnl_f32, false);
    }
    dnnl_matmul_desc_t desc;
    DP_DNNL_CHECK(dnnl_matmul_desc_init(&desc, &src, &wei, k->bias ? &bias : NULL, &dst));
    dnnl_primitive_attr_t attr = NULL;
    if (k->relu || k->kind == MM_BACKWARD_WEIGHTS) {
        dnnl_post_ops_t ops;
        DP_DNNL_CHECK(dnnl_primitive_attr_create(&attr));
        DP_DNNL_CHECK(dnnl_post_ops_create(&ops));
        if (k->relu)
            dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
        else
            dnnl_post_ops_append_sum(ops, 1.0f);
        dnnl_primitive_attr_set_post_ops(attr, ops);
        dnnl_post_ops_destroy(ops);
    }
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = dnnl_primitive_desc_create(&pd, &desc, attr, cpu->engine, NULL);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success)
        return DP_ENOTSUP;
    mm_prim *c = dp__calloc(1, sizeof *c);
    int rc = c ? 0 : DP_ENOMEM;
    if (rc == 0 &&
        (dnnl_memory_create(&c->src, &src, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_memory_create(&c->wei, &wei, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_memory_create(&c->dst, &dst, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_memory_create(&c->bias, &bias, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success ||
         dnnl_primitive_create(&c->prim, pd) != dnnl_success)) {
        DP_ERROR("oneDNN: cannot create matrix product primitive");
        rc = DP_EDEVICE;
    }
    dnnl_primitive_desc_destroy(pd);
    if (rc < 0) {
        if (c)
            mm_prim_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

static int mm_run(dp__cpu *cpu, const mm_key *k, const void *src, const void *wei, void *dst,
                  const float *bias)
{
    mm_prim *c = dp__cpu_prim_find(cpu, k, sizeof *k);
    if (!c) {
        DP_TRY(mm_build(cpu, k, &c));
        DP_TRY(dp__cpu_prim_put(cpu, k, sizeof *k, c, mm_prim_destroy));
    }
    dnnl_memory_set_data_handle(c->src, (void *)src);
    dnnl_memory_set_data_handle(c->wei, (void *)wei);
    dnnl_memory_set_data_handle(c->dst, dst);
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei}, {DNNL_ARG_DST, c->dst}};
    int nargs = 3;
    if (bias) {
        dnnl_memory_set_data_handle(c->bias, (void *)bias);
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, c->bias};
    }
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, nargs, args));
    return 0;
}

/* The geometry of one convolution. */
typedef struct geom {
    int64_t N, C, H, W, K, R, S, P, Q, kc;
    int sh, sw, ph, pw;
    size_t esize; /* bytes per activation element */
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
              .pw = a->pad_w};
    g.P = (g.H + 2 * g.ph - g.R) / g.sh + 1;
    g.Q = (g.W + 2 * g.pw - g.S) / g.sw + 1;
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
        for (int64_t r = 0; r < g->R; r++) {
            int64_t h = p * g->sh - g->ph + r;
            for (int64_t s = 0; s < g->S; s++, dst += cb) {
                int64_t w = q * g->sw - g->pw + s;
                if (h < 0 || h >= g->H || w < 0 || w >= g->W)
                    memset(dst, 0, cb);
                else
                    memcpy(dst, x + (size_t)((n * g->H + h) * g->W + w) * cb, cb);
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
                    int64_t h = p * g->sh - g->ph + r;
                    for (int64_t s = 0; s < g->S; s++, src += g->C) {
                        int64_t w = q * g->sw - g->pw + s;
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
    if (!a->x.nhwc && a->x.shape[1] != 1)
        return DP_ENOTSUP;
    geom g = geom_of(a);
    dp_dtype dt = a->x.dtype;
    int64_t per_sample = g.P * g.Q;
    size_t sample_bytes =
        (size_t)(per_sample * g.kc) * (pass == DP__CONV_BACKWARD_DATA ? 4 : g.esize);
    /* Chunks of equal size (the matrix product runs best on one shape). */
    int64_t most = (int64_t)(CHUNK_BYTES / (sample_bytes ? sample_bytes : 1));
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
        mm_key k = {.bf16 = dt == DP_BF16, .rows = (n1 - n0) * per_sample, .kc = g.kc, .k = g.K};
        size_t out_row = (size_t)(n0 * per_sample * g.K);
        if (pass == DP__CONV_FORWARD) {
            k.kind = MM_FORWARD;
            k.bias = a->b.data != NULL;
            k.relu = a->fuse_relu;
            im2col(&g, a->x.data, col, n0, n1);
            DP_TRY(mm_run(cpu, &k, col, wm, (char *)a->y.data + out_row * g.esize, a->b.data));
        } else if (pass == DP__CONV_BACKWARD_DATA) {
            k.kind = MM_BACKWARD_DATA;
            DP_TRY(mm_run(cpu, &k, (const char *)a->dy.data + out_row * g.esize, wm, col, NULL));
            col2im(&g, col, acc, a->dx.data, dt, n0, n1);
        } else {
            k.kind = MM_BACKWARD_WEIGHTS;
            im2col(&g, a->x.data, col, n0, n1);
            DP_TRY(mm_run(cpu, &k, (const char *)a->dy.data + out_row * g.esize, col, wm, NULL));
        }
    }
    if (pass == DP__CONV_BACKWARD_WEIGHTS) {
        DP_TRY(reorder_weights(cpu, &g, false, DP_F32, wm, a->dw.data));
        if (a->db.data)
            DP_TRY(bias_grad(cpu, a->dy.data, dt, g.N * per_sample, g.K, a->db.data));
    }
    return 0;
}
