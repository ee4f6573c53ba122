/* The CPU device table: lifetime, memory, copies, and the primitive cache. */
#include "core/bf16.h"
#include "device/cpu/cpu.h"

#include <omp.h>
#include <stdatomic.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

/* The CPU count tests make the library see (dp__devices_see_cpus): 0 for
 * the machine's own. */
static atomic_int cpus_seen;

void dp__devices_see_cpus(int n)
{
    atomic_store(&cpus_seen, n);
}

/* The cores this process may run on: all of the machine's, or those that
 * taskset or mpirun's binding (one core per rank) leave it. */
int dp__cpu_count(void)
{
    int seen = atomic_load(&cpus_seen);
    if (seen > 0)
        return seen;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void worker_init(void *ctx)
{
    dp_device_t *dev = ctx;
    /* The worker's own OpenMP team: oneDNN and our loops both use it. Its
     * size is fixed (no OMP_DYNAMIC shrinking it under load): oneDNN splits
     * its reductions by the team size, so a team that varied would change
     * the last bits of the results from run to run. */
    omp_set_dynamic(0);
    omp_set_num_threads(dev->threads);
}

static pthread_once_t dnnl_once = PTHREAD_ONCE_INIT;

/* One reorder of 4 floats, start to finish on the calling thread. oneDNN
 * sets up process-wide state on its first primitive execution: its ITT
 * tracing hooks take a global mutex that they initialise lazily behind a
 * plain flag. Two devices' workers reaching their first execution at once
 * race on that flag (ThreadSanitizer reports it). Done here, once, before
 * any worker exists, every worker finds it set up. Failing is harmless:
 * the devices' own primitives report oneDNN's errors. */
static void run_first_primitive(void)
{
    dnnl_engine_t engine = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    float a[4] = {0}, b[4];
    dnnl_memory_desc_t md;
    dnnl_memory_desc_init_by_tag(&md, 1, (dnnl_dims_t){4}, dnnl_f32, dnnl_a);
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) == dnnl_success &&
        dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success &&
        dnnl_memory_create(&from, &md, engine, a) == dnnl_success &&
        dnnl_memory_create(&to, &md, engine, b) == dnnl_success &&
        dnnl_reorder_primitive_desc_create(&pd, &md, engine, &md, engine, NULL) == dnnl_success &&
        dnnl_primitive_create(&prim, pd) == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        if (dnnl_primitive_execute(prim, stream, 2, args) == dnnl_success)
            dnnl_stream_wait(stream);
    }
    if (prim)
        dnnl_primitive_destroy(prim);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (to)
        dnnl_memory_destroy(to);
    if (from)
        dnnl_memory_destroy(from);
    if (stream)
        dnnl_stream_destroy(stream);
    if (engine)
        dnnl_engine_destroy(engine);
}

static void dnnl_setup(void)
{
    /* Every device keeps its own primitives (dp__cpu_prim_find), so oneDNN's
     * process-wide cache adds nothing, and turning it off means no primitive
     * state is shared between two devices' workers. */
    dnnl_set_primitive_cache_capacity(0);
    run_first_primitive();
}

static int cpu_open(dp_device_t *dev)
{
    pthread_once(&dnnl_once, dnnl_setup);
    dp__cpu *cpu = dp__calloc(1, sizeof *cpu);
    if (!cpu)
        return DP_ENOMEM;
    cpu->threads = dev->threads;
    if (dnnl_engine_create(&cpu->engine, dnnl_cpu, 0) != dnnl_success) {
        DP_ERROR("%s: oneDNN CPU engine cannot be created", dev->name);
        dp__free(cpu);
        return DP_EDEVICE;
    }
    if (dnnl_stream_create(&cpu->stream, cpu->engine, dnnl_stream_default_flags) != dnnl_success) {
        DP_ERROR("%s: oneDNN stream cannot be created", dev->name);
        dnnl_engine_destroy(cpu->engine);
        dp__free(cpu);
        return DP_EDEVICE;
    }
    /* Native bf16 where oneDNN may use AVX512-BF16 (or AMX): what the CPU
     * has, capped by DNNL_MAX_CPU_ISA, with which a newer CPU imitates an
     * older one. */
    if ((dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16) ==
        dnnl_cpu_isa_avx512_core_bf16)
        dev->caps |= DP_DEVICE_BF16_NATIVE;
    dev->impl = cpu;
    int rc = dp__stream_init(&dev->stream, dev->name, worker_init, dev);
    if (rc < 0) {
        dnnl_stream_destroy(cpu->stream);
        dnnl_engine_destroy(cpu->engine);
        dp__free(cpu);
        dev->impl = NULL;
        return rc;
    }
    return 0;
}

/* The communication path's worker: one OpenMP thread (dev->threads is 1),
 * so that summing a bucket takes no core from the device's kernels. */
static int cpu_open_comm(dp_device_t *comm)
{
    return dp__stream_init(&comm->stream, comm->name, worker_init, comm);
}

/* oneDNN keeps a primitive's scratchpad in the storage of the thread that
 * created it, counted by the primitives that use it, and frees it when the
 * last of them is destroyed on that thread: the primitives are destroyed by
 * the worker that made them, before it exits, or the scratchpad is lost
 * with the thread (37 MB for ResNet-18's weight gradients on 16x16 images). */
static int destroy_prims(void *args, void *ctx)
{
    (void)args;
    dp_device_t *dev = ctx;
    dp__cpu *cpu = dev->impl;
    for (size_t i = 0; i < cpu->nprims; i++)
        cpu->prims[i].destroy(cpu->prims[i].value);
    cpu->nprims = 0;
    return 0;
}

static void cpu_close(dp_device_t *dev)
{
    dp__cpu *cpu = dev->impl;
    int unused = 0;
    dp__stream_push(dev->stream, destroy_prims, &unused, sizeof unused);
    dp__stream_log_profile(dev->stream);
    dp__stream_close(dev->stream);
    /* Any left if the worker could not run the command. */
    for (size_t i = 0; i < cpu->nprims; i++)
        cpu->prims[i].destroy(cpu->prims[i].value);
    dp__free(cpu->prims);
    for (int i = 0; i < DP__CPU_SCRATCH_SLOTS; i++)
        dp__free(cpu->scratch[i].p);
    dnnl_stream_destroy(cpu->stream);
    dnnl_engine_destroy(cpu->engine);
    dp__free(cpu);
}

void dp__cpu_destroy_nothing(void *value)
{
    (void)value;
}

void *dp__cpu_prim_find(dp__cpu *cpu, const void *key, size_t key_size)
{
    for (size_t i = 0; i < cpu->nprims; i++)
        if (cpu->prims[i].key_size == key_size && memcmp(cpu->prims[i].key, key, key_size) == 0)
            return cpu->prims[i].value;
    return NULL;
}

int dp__cpu_prim_put(dp__cpu *cpu, const void *key, size_t key_size, void *value,
                     void (*destroy)(void *value))
{
    DP_ASSERT(key_size <= sizeof cpu->prims[0].key);
    if (cpu->nprims == cpu->cap_prims) {
        size_t cap = cpu->cap_prims ? 2 * cpu->cap_prims : 32;
        dp__cpu_prim *p = realloc(cpu->prims, cap * sizeof *p);
        if (!p) {
            destroy(value);
            return DP_ENOMEM;
        }
        cpu->prims = p;
        cpu->cap_prims = cap;
    }
    dp__cpu_prim *e = &cpu->prims[cpu->nprims++];
    memset(e->key, 0, sizeof e->key);
    memcpy(e->key, key, key_size);
    e->key_size = key_size;
    e->value = value;
    e->destroy = destroy;
    return 0;
}

void dp__cpu_md(dnnl_memory_desc_t *md, const dp__tdesc *t)
{
    dnnl_dims_t dims;
    for (int i = 0; i < t->ndim; i++)
        dims[i] = t->shape[i];
    static const dnnl_format_tag_t rowmajor[] = {dnnl_a, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd};
    dnnl_format_tag_t tag = t->ndim == 4 && t->nhwc ? dnnl_acdb : rowmajor[t->ndim];
    int nd = t->ndim ? t->ndim : 1;
    if (!t->ndim)
        dims[0] = 1;
    dnnl_memory_desc_init_by_tag(md, nd, dims, dp__cpu_dnnl_type(t->dtype), tag);
}

dnnl_data_type_t dp__cpu_dnnl_type(dp_dtype dtype)
{
    return dtype == DP_BF16 ? dnnl_bf16 : dtype == DP_I32 ? dnnl_s32 : dnnl_f32;
}

void *dp__cpu_scratch(dp__cpu *cpu, int slot, size_t bytes)
{
    DP_ASSERT(slot >= 0 && slot < DP__CPU_SCRATCH_SLOTS);
    if (cpu->scratch[slot].bytes < bytes) {
        dp__free(cpu->scratch[slot].p);
        cpu->scratch[slot].p = dp__malloc(bytes);
        cpu->scratch[slot].bytes = cpu->scratch[slot].p ? bytes : 0;
    }
    return cpu->scratch[slot].p;
}

static void *cpu_alloc(dp_device_t *dev, size_t bytes)
{
    (void)dev;
    return dp__malloc(bytes);
}

static void cpu_free(dp_device_t *dev, void *p)
{
    (void)dev;
    dp__free(p);
}

static int cpu_upload_fresh(dp_device_t *dev, void *dst, const void *src, size_t bytes)
{
    (void)dev;
    memcpy(dst, src, bytes);
    return 0;
}

typedef struct copy_args {
    void *dst;
    const void *src;
    size_t bytes;
} copy_args;

static int run_copy(void *p, void *ctx)
{
    copy_args *a = p;
    (void)ctx;
    memcpy(a->dst, a->src, a->bytes);
    return 0;
}

static int cpu_copy(dp_device_t *dev, void *dst, const void *src, size_t bytes)
{
    copy_args a = {dst, src, bytes};
    return dp__cpu_push(dev, run_copy, &a, sizeof a);
}

static int run_fill(void *p, void *ctx)
{
    dp__fill_args *a = p;
    (void)ctx;
    int64_t n = a->n;
    float v = a->value;
    if (a->dtype == DP_BF16) {
        dp__bf16 *d = a->data, h = dp__bf16_from_f32(v);
#pragma omp parallel for simd if (n > 65536)
        for (int64_t i = 0; i < n; i++)
            d[i] = h;
        return 0;
    }
    float *d = a->data;
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; i++)
        d[i] = v;
    return 0;
}

int dp__cpu_fill(dp_device_t *dev, const dp__fill_args *a)
{
    return dp__cpu_push(dev, run_fill, a, sizeof *a);
}

const dp__device_ops dp__cpu_ops = {
    .kind = "cpu",
    .caps = DP_DEVICE_HOST_MEMORY | DP_DEVICE_DETERMINISTIC | DP_DEVICE_BF16,
    .open = cpu_open,
    .open_comm = cpu_open_comm,
    .close = cpu_close,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload_fresh = cpu_upload_fresh,
    .copy_from_host = cpu_copy,
    .copy_to_host = cpu_copy,
    .copy_device = cpu_copy,
/* Every slot of the op list that a line gives the CPU: dp__cpu_<slot>. */
/* clang-format off */
#define KERNEL(slot, args, given) .slot = DP__OP_ENTRY(given, dp__cpu_##slot),
#define LINE(name, args, kernels, backends, cost) \
    DP__OP_BACKEND_SLOTS(cpu, KERNEL, name, args, kernels, backends)
    DP__OP_LIST(LINE)
#undef LINE
#undef KERNEL
    /* clang-format on */
};

static const char *why_none(void)
{
    return "no CPU core is available to this process";
}

/* The CPU's line of the backend list: devices that share the host's cores,
 * as many as asked for; `auto` opens one a core. */
const dp__backend dp__cpu_backend = {
    .name = "cpu",
    .hardware = "CPU device",
    .ops = &dp__cpu_ops,
    .count = dp__cpu_count,
    .why_none = why_none,
    .shares_cores = true,
    .choice_key = dp__cpu_choice_key,
};
