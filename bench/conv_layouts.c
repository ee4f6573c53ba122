/* Times oneDNN's convolution forward, backward-data and backward-weights
 * for one shape in three activation layouts (NHWC, oneDNN's choice, NCHW),
 * weights always in the layout oneDNN chooses. This is how dptrain's CPU
 * layout was picked; run it with OMP_NUM_THREADS set to the kernel threads.
 *
 *   build/bench_conv C H K R   e.g. build/bench_conv 20 13 50 5  (LeNet conv2)
 */
#include <dnnl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        dnnl_status_t st_ = (x);                                                                   \
        if (st_ != dnnl_success) {                                                                 \
            fprintf(stderr, "bench_conv: %s failed: %d\n", #x, (int)st_);                          \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static dnnl_engine_t engine;
static dnnl_stream_t stream;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static dnnl_memory_t memory(const dnnl_memory_desc_t *md)
{
    size_t n = (dnnl_memory_desc_get_size(md) + 63) / 64 * 64;
    void *p = aligned_alloc(64, n);
    memset(p, 0, n);
    dnnl_memory_t m;
    CHECK(dnnl_memory_create(&m, md, engine, p));
    return m;
}

static void time_primitive(const char *what, dnnl_primitive_desc_t pd, int nargs,
                           dnnl_exec_arg_t *args, double gflop)
{
    dnnl_primitive_t prim;
    CHECK(dnnl_primitive_create(&prim, pd));
    for (int i = 0; i < 3; i++)
        CHECK(dnnl_primitive_execute(prim, stream, nargs, args));
    int iters = 20;
    double t0 = now();
    for (int i = 0; i < iters; i++)
        CHECK(dnnl_primitive_execute(prim, stream, nargs, args));
    double dt = (now() - t0) / iters;
    const char *impl;
    CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
    printf("  %-7s %-22s %7.2f ms %6.1f GFLOP/s\n", what, impl, 1e3 * dt, gflop / dt);
    dnnl_primitive_destroy(prim);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_conv C H K R   (batch 256, square H x H input, R x R)\n");
        return 2;
    }
    int64_t N = 256, C = atoi(argv[1]), H = atoi(argv[2]), K = atoi(argv[3]), R = atoi(argv[4]);
    int64_t P = H - R + 1;
    if (C <= 0 || K <= 0 || R <= 0 || P <= 0) {
        fprintf(stderr, "bench_conv: bad shape\n");
        return 2;
    }
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    double gflop = 2.0 * (double)(N * K * P * P * C * R * R) / 1e9;
    const struct {
        const char *name;
        dnnl_format_tag_t tag;
    } layouts[] = {{"NHWC", dnnl_acdb}, {"oneDNN's choice", dnnl_format_tag_any},
                   {"NCHW", dnnl_abcd}};
    for (size_t l = 0; l < sizeof layouts / sizeof *layouts; l++) {
        printf("activations %s, batch %lld, %lldx%lld input, %lld -> %lld channels, %lldx%lld:\n",
               layouts[l].name, (long long)N, (long long)H, (long long)H, (long long)C,
               (long long)K, (long long)R, (long long)R);
        dnnl_memory_desc_t x, w, b, y;
        dnnl_dims_t xd = {N, C, H, H}, wd = {K, C, R, R}, bd = {K}, yd = {N, K, P, P};
        dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, layouts[l].tag);
        dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_a);
        dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, layouts[l].tag);
        dnnl_dims_t s = {1, 1}, pad = {0, 0};
        dnnl_convolution_desc_t fd, dd, wdsc;
        dnnl_primitive_desc_t fpd, dpd, wpd;
        CHECK(dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                 dnnl_convolution_direct, &x, &w, &b, &y, s, pad,
                                                 pad));
        CHECK(dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL));
        CHECK(dnnl_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &x, &w, &y, s,
                                                       pad, pad));
        CHECK(dnnl_primitive_desc_create(&dpd, &dd, NULL, engine, fpd));
        CHECK(dnnl_convolution_backward_weights_desc_init(&wdsc, dnnl_convolution_direct, &x, &w,
                                                          &b, &y, s, pad, pad));
        CHECK(dnnl_primitive_desc_create(&wpd, &wdsc, NULL, engine, fpd));
#define MD(pd, q) dnnl_primitive_desc_query_md(pd, q, 0)
        dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC, memory(MD(fpd, dnnl_query_src_md))},
                                {DNNL_ARG_WEIGHTS, memory(MD(fpd, dnnl_query_weights_md))},
                                {DNNL_ARG_BIAS, memory(&b)},
                                {DNNL_ARG_DST, memory(MD(fpd, dnnl_query_dst_md))}};
        dnnl_exec_arg_t da[] = {{DNNL_ARG_DIFF_DST, memory(MD(dpd, dnnl_query_diff_dst_md))},
                                {DNNL_ARG_WEIGHTS, memory(MD(dpd, dnnl_query_weights_md))},
                                {DNNL_ARG_DIFF_SRC, memory(MD(dpd, dnnl_query_diff_src_md))}};
        dnnl_exec_arg_t wa[] = {{DNNL_ARG_SRC, memory(MD(wpd, dnnl_query_src_md))},
                                {DNNL_ARG_DIFF_DST, memory(MD(wpd, dnnl_query_diff_dst_md))},
                                {DNNL_ARG_DIFF_WEIGHTS, memory(MD(wpd, dnnl_query_diff_weights_md))},
                                {DNNL_ARG_DIFF_BIAS, memory(&b)}};
        time_primitive("fwd", fpd, 4, fa, gflop);
        time_primitive("bwd_d", dpd, 3, da, gflop);
        time_primitive("bwd_w", wpd, 4, wa, gflop);
    }
    return 0;
}
