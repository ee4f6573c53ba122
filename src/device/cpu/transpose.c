/* The transpose of a row-major f32 matrix (src/ops/transpose.c) on the
 * CPU: oneDNN's reorder from the (rows, cols) matrix to the same matrix
 * stored column-major, which is its transpose row-major. */
#include "device/cpu/cpu.h"

#include <string.h>

typedef struct transpose_key {
    int64_t rows, cols;
} transpose_key;

enum { SRC, DST };

static int transpose_pd(dp__cpu *cpu, const void *key, dnnl_primitive_desc_t *pd,
                        dnnl_memory_desc_t *mds, int *n)
{
    const transpose_key *k = key;
    dnnl_dims_t dims = {k->rows, k->cols};
    DP_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&mds[SRC], 2, dims, dnnl_f32, dnnl_ab));
    DP_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&mds[DST], 2, dims, dnnl_f32, dnnl_ba));
    *n = 2;
    DP_DNNL_CHECK(dnnl_reorder_primitive_desc_create(pd, &mds[SRC], cpu->engine, &mds[DST],
                                                     cpu->engine, NULL));
    return 0;
}

static int run(void *p, void *ctx)
{
    const dp__transpose_args *a = p;
    dp__cpu *cpu = ((dp_device_t *)ctx)->impl;
    transpose_key k;
    memset(&k, 0, sizeof k);
    k.rows = a->rows;
    k.cols = a->cols;
    dp__cpu_primitive *c;
    DP_TRY(dp__cpu_primitive_get(cpu, &k, sizeof k, transpose_pd, &c));
    DP_ASSERT(c);
    const dp__cpu_arg args[] = {{DNNL_ARG_FROM, SRC, a->src}, {DNNL_ARG_TO, DST, a->dst}};
    return dp__cpu_primitive_run(cpu, c, args, 2);
}

int dp__cpu_transpose(dp_device_t *dev, const dp__transpose_args *a)
{
    return dp__cpu_push(dev, run, a, sizeof *a);
}
