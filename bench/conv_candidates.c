/* Times every convolution candidate oneDNN offers on this CPU for one shape:
 * forward, backward-data and backward-weights in f32 direct (NHWC and
 * oneDNN's blocked choice), f32 Winograd, and bf16 direct (NHWC and
 * blocked; bf16 data, f32 weight gradients), each with the implementation
 * oneDNN picked or "unimplemented". Layouts other than NHWC are timed
 * without the reorders a network in NHWC would add around them.
 *
 *   build/bench_conv_candidates N C H K R STRIDE PAD
 *   OMP_NUM_THREADS=2 build/bench_conv_candidates 256 64 28 64 3 1 1
 */
#include <dnnl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    if (dnnl_memory_create(&m, md, engine, p) != dnnl_success)
        exit(1);
    return m;
}

/* Median of 7 runs after 2, in ms; -1 if the primitive cannot be made. */
static double time_pd(dnnl_primitive_desc_t pd, int nargs, dnnl_exec_arg_t *args)
{
    dnnl_primitive_t prim;
    if (dnnl_primitive_create(&prim, pd) != dnnl_success)
        return -1;
    double t[7];
    for (int i = 0; i < 9; i++) {
        double t0 = now();
        dnnl_primitive_execute(prim, stream, nargs, args);
        if (i >= 2)
            t[i - 2] = 1e3 * (now() - t0);
    }
    dnnl_primitive_destroy(prim);
    for (int i = 0; i < 7; i++)
        for (int j = i + 1; j < 7; j++)
            if (t[j] < t[i]) {
                double s = t[i];
                t[i] = t[j];
                t[j] = s;
            }
    return t[3];
}

static const char *impl(dnnl_primitive_desc_t pd)
{
    const char *s = "?";
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s);
    return s;
}

#define MD(pd, q) dnnl_primitive_desc_query_md(pd, q, 0)

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: bench_conv_candidates N C H K R STRIDE PAD\n");
        return 2;
    }
    int64_t N = atoll(argv[1]), C = atoll(argv[2]), H = atoll(argv[3]), K = atoll(argv[4]);
    int64_t R = atoll(argv[5]), st = atoll(argv[6]), pad = atoll(argv[7]);
    int64_t P = (H + 2 * pad - R) / st + 1;
    if (N < 1 || C < 1 || K < 1 || R < 1 || st < 1 || pad < 0 || P < 1) {
        fprintf(stderr, "bench_conv_candidates: bad shape\n");
        return 2;
    }
    dnnl_engine_create(&engine, dnnl_cpu, 0);
    dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    double gflop = 2.0 * (double)(N * K * P * P * C * R * R) / 1e9;
    printf("N %lld, %lld -> %lld channels, %lldx%lld -> %lldx%lld, %lldx%lld stride %lld pad "
           "%lld: %.2f GFLOP a pass\n",
           (long long)N, (long long)C, (long long)K, (long long)H, (long long)H, (long long)P,
           (long long)P, (long long)R, (long long)R, (long long)st, (long long)pad, gflop);
    const struct {
        const char *name;
        dnnl_data_type_t dt;
        dnnl_format_tag_t tag;
        dnnl_alg_kind_t alg;
    } cands[] = {
        {"f32 direct nhwc", dnnl_f32, dnnl_acdb, dnnl_convolution_direct},
        {"f32 direct any", dnnl_f32, dnnl_format_tag_any, dnnl_convolution_direct},
        {"f32 winograd any", dnnl_f32, dnnl_format_tag_any, dnnl_convolution_winograd},
        {"bf16 direct nhwc", dnnl_bf16, dnnl_acdb, dnnl_convolution_direct},
        {"bf16 direct any", dnnl_bf16, dnnl_format_tag_any, dnnl_convolution_direct},
    };
    for (size_t c = 0; c < sizeof cands / sizeof *cands; c++) {
        dnnl_memory_desc_t x, w, b, y, wf;
        dnnl_dims_t xd = {N, C, H, H}, wd = {K, C, R, R}, bd = {K}, yd = {N, K, P, P};
        dnnl_memory_desc_init_by_tag(&x, 4, xd, cands[c].dt, cands[c].tag);
        dnnl_memory_desc_init_by_tag(&w, 4, wd, cands[c].dt, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&wf, 4, wd, dnnl_f32, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_a);
        dnnl_memory_desc_init_by_tag(&y, 4, yd, cands[c].dt, cands[c].tag);
        dnnl_dims_t s = {st, st}, pl = {pad, pad};
        dnnl_dims_t pr = {(P - 1) * st + R - H - pad, (P - 1) * st + R - H - pad};
        dnnl_convolution_desc_t fd, dd, wdsc;
        dnnl_primitive_desc_t fpd = NULL, dpd = NULL, wpd = NULL;
        printf("  %-18s", cands[c].name);
        if (dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, cands[c].alg, &x, &w, &b,
                                               &y, s, pl, pr) != dnnl_success ||
            dnnl_primitive_desc_create(&fpd, &fd, NULL, engine, NULL) != dnnl_success) {
            printf(" unimplemented\n");
            continue;
        }
        double tf = -1, td = -1, tw = -1;
        dnnl_exec_arg_t fa[] = {{DNNL_ARG_SRC, memory(MD(fpd, dnnl_query_src_md))},
                                {DNNL_ARG_WEIGHTS, memory(MD(fpd, dnnl_query_weights_md))},
                                {DNNL_ARG_BIAS, memory(&b)},
                                {DNNL_ARG_DST, memory(MD(fpd, dnnl_query_dst_md))}};
        tf = time_pd(fpd, 4, fa);
        printf(" fwd %7.2f ms %-32s", tf, impl(fpd));
        if (dnnl_convolution_backward_data_desc_init(&dd, cands[c].alg, &x, &w, &y, s, pl, pr) ==
                dnnl_success &&
            dnnl_primitive_desc_create(&dpd, &dd, NULL, engine, fpd) == dnnl_success) {
            dnnl_exec_arg_t da[] = {{DNNL_ARG_DIFF_DST, memory(MD(dpd, dnnl_query_diff_dst_md))},
                                    {DNNL_ARG_WEIGHTS, memory(MD(dpd, dnnl_query_weights_md))},
                                    {DNNL_ARG_DIFF_SRC, memory(MD(dpd, dnnl_query_diff_src_md))}};
            td = time_pd(dpd, 3, da);
            printf(" bwd_d %7.2f ms %-32s", td, impl(dpd));
        } else {
            printf(" bwd_d unimplemented%-24s", "");
        }
        if (dnnl_convolution_backward_weights_desc_init(&wdsc, cands[c].alg, &x, &wf, &b, &y, s, pl,
                                                        pr) == dnnl_success &&
            dnnl_primitive_desc_create(&wpd, &wdsc, NULL, engine, fpd) == dnnl_success) {
            dnnl_exec_arg_t wa[] = {
                {DNNL_ARG_SRC, memory(MD(wpd, dnnl_query_src_md))},
                {DNNL_ARG_DIFF_DST, memory(MD(wpd, dnnl_query_diff_dst_md))},
                {DNNL_ARG_DIFF_WEIGHTS, memory(MD(wpd, dnnl_query_diff_weights_md))},
                {DNNL_ARG_DIFF_BIAS, memory(&b)}};
            tw = time_pd(wpd, 4, wa);
            printf(" bwd_w %7.2f ms %s", tw, impl(wpd));
        } else {
            printf(" bwd_w unimplemented");
        }
        printf("\n");
    }
    return 0;
}
