/* oneDNN primitives as the kernels make and cache them (cpu.h,
 * dp__cpu_primitive): one place for the steps every kernel repeated, from
 * the primitive descriptor to the memory objects, the workspace and the
 * cache entry, and for what a bf16 primitive oneDNN lacks here means; and
 * their execution over a call's tensors. */
#include "device/cpu/cpu.h"

#include <string.h>

static void primitive_destroy(void *p)
{
    dp__cpu_primitive *c = p;
    if (c->prim)
        dnnl_primitive_destroy(c->prim);
    for (int i = 0; i < DP__CPU_PRIM_MEMS; i++)
        if (c->mem[i])
            dnnl_memory_destroy(c->mem[i]);
    if (c->ws)
        dnnl_memory_destroy(c->ws);
    dp__free(c);
}

int dp__cpu_pass_pd(dp__cpu *cpu, const void *fwd_desc, const void *bwd_desc,
                    const_dnnl_primitive_attr_t attr, dnnl_data_type_t type, const char *what,
                    dnnl_primitive_desc_t *pd)
{
    dnnl_primitive_desc_t fwd = NULL;
    *pd = NULL;
    if (dnnl_primitive_desc_create(&fwd, fwd_desc, attr, cpu->engine, NULL) != dnnl_success) {
        if (type != dnnl_f32)
            return DP_ENOTSUP; /* the caller converts */
        DP_ERROR("oneDNN: cannot create a %s primitive", what);
        return DP_EDEVICE;
    }
    if (!bwd_desc) {
        *pd = fwd;
        return 0;
    }
    dnnl_status_t st = dnnl_primitive_desc_create(pd, bwd_desc, NULL, cpu->engine, fwd);
    dnnl_primitive_desc_destroy(fwd);
    if (st != dnnl_success) {
        *pd = NULL;
        if (type != dnnl_f32)
            return DP_ENOTSUP;
        DP_ERROR("oneDNN: cannot create a %s backward primitive: status %d", what, (int)st);
        return DP_EDEVICE;
    }
    return 0;
}

/* A primitive of pd (which it destroys) with memory objects for mds[0..n)
 * and the workspace pd asks for. */
static int create(dp__cpu *cpu, dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *mds, int n,
                  dp__cpu_primitive **out)
{
    DP_ASSERT(n <= DP__CPU_PRIM_MEMS);
    dp__cpu_primitive *c = dp__calloc(1, sizeof *c);
    int rc = c ? 0 : DP_ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++)
        if (dnnl_memory_create(&c->mem[i], &mds[i], cpu->engine, DNNL_MEMORY_NONE) != dnnl_success)
            rc = DP_EDEVICE;
    const dnnl_memory_desc_t *ws = dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
    if (rc == 0 && ws && dnnl_memory_desc_get_size(ws) > 0) {
        c->ws_bytes = dnnl_memory_desc_get_size(ws);
        if (dnnl_memory_create(&c->ws, ws, cpu->engine, DNNL_MEMORY_NONE) != dnnl_success)
            rc = DP_EDEVICE;
    }
    if (rc == 0 && dnnl_primitive_create(&c->prim, pd) != dnnl_success)
        rc = DP_EDEVICE;
    dnnl_primitive_desc_destroy(pd);
    if (rc == DP_EDEVICE)
        DP_ERROR("oneDNN: cannot create a primitive or its memory objects");
    if (rc < 0) {
        if (c)
            primitive_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
}

int dp__cpu_primitive_get(dp__cpu *cpu, const void *key, size_t key_size, dp__cpu_pd_fn make_pd,
                          dp__cpu_primitive **out)
{
    *out = dp__cpu_prim_find(cpu, key, key_size);
    if (*out)
        return 0;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t mds[DP__CPU_PRIM_MEMS];
    int n = 0;
    int rc = make_pd(cpu, key, &pd, mds, &n);
    if (rc == DP_ENOTSUP)
        return 0; /* *out NULL: no kernel for the type here */
    DP_TRY(rc);
    dp__cpu_primitive *c;
    DP_TRY(create(cpu, pd, mds, n, &c));
    DP_TRY(dp__cpu_prim_put(cpu, key, key_size, c, primitive_destroy));
    *out = c;
    return 0;
}

int dp__cpu_primitive_run(dp__cpu *cpu, const dp__cpu_primitive *c, const dp__cpu_arg *args, int n)
{
    dnnl_exec_arg_t exec[DP__CPU_PRIM_MEMS + 1];
    int m = 0;
    DP_ASSERT(n <= (int)DP_COUNTOF(exec));
    for (int i = 0; i < n; i++) {
        dnnl_memory_t mem = args[i].mem == DP__CPU_WORKSPACE ? c->ws : c->mem[args[i].mem];
        if (!mem)
            continue; /* no workspace */
        dnnl_memory_set_data_handle(mem, (void *)args[i].data);
        exec[m++] = (dnnl_exec_arg_t){args[i].name, mem};
    }
    DP_DNNL_CHECK(dnnl_primitive_execute(c->prim, cpu->stream, m, exec));
    return 0;
}

void dp__cpu_channel_key_init(dp__cpu_channel_key *k, const dp__tdesc *x, int backward)
{
    dp__channel_view v = dp__channel_view_of(x);
    memset(k, 0, sizeof *k);
    k->backward = backward;
    k->nhwc = v.nhwc;
    k->N = v.N;
    k->C = v.C;
    k->HW = v.HW;
}

int dp__cpu_channel_md(dnnl_memory_desc_t *md, const dp__cpu_channel_key *k)
{
    dnnl_dims_t dims = {k->N, k->C, k->HW};
    dnnl_dims_t strides = {k->C * k->HW, k->nhwc ? 1 : k->HW, k->nhwc ? k->C : 1};
    DP_DNNL_CHECK(dnnl_memory_desc_init_by_strides(md, 3, dims, dnnl_f32, strides));
    return 0;
}
