/* The public dp_cuda_* and TF32 entry points, and CUDA's entry of the
 * backend list (device/backend_list.h): the one file of this folder in the
 * library itself, in every configuration (cmake/cuda.cmake). The backend
 * is a module (cuda_module.h): GPUs are counted through the driver
 * (libcuda.so.1, cuInit and cuDeviceGetCount, dlopen'ed on first count),
 * and libdptrain-cuda.so, beside the library, is loaded when the first GPU
 * opens. Where the build has no CUDA, the driver is missing, or the module
 * is, the entry says which (why_none). */
#include "dp/dp.h"

#include "core/internal.h"
#include "device/cuda/cuda_module.h"
#include "device/device.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* PyTorch's default: torch.backends.cudnn.allow_tf32 = True. */
static atomic_int tf32_allowed = 1;

void dp_set_tf32(bool allow)
{
    atomic_store(&tf32_allowed, allow ? 1 : 0);
}

bool dp_tf32_allowed(void)
{
    return atomic_load(&tf32_allowed) != 0;
}

bool dp_cuda_built(void)
{
#ifdef DP_CUDA_MODULE
    return true;
#else
    return false;
#endif
}

#ifdef DP_CUDA_MODULE

/* ---- the driver: how many GPUs, without the runtime --------------------- */

static pthread_once_t driver_once = PTHREAD_ONCE_INIT;
static int driver_gpus;
static char driver_why[192];

static void count_with_driver(void)
{
    /* CUresult cuInit(unsigned int), cuDeviceGetCount(int *): 0 is success. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(driver_why, sizeof driver_why,
                 "no CUDA driver on this machine (libcuda.so.1 is not installed)");
        return;
    }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    int rc = init && count ? init(0) : -1;
    if (rc == 0)
        rc = count(&driver_gpus);
    if (rc != 0) {
        driver_gpus = 0;
        snprintf(driver_why, sizeof driver_why, "the CUDA driver finds no GPU (error %d)", rc);
    } else if (driver_gpus == 0) {
        snprintf(driver_why, sizeof driver_why, "the CUDA driver finds no GPU");
    }
    /* The runtime the module brings loads the same library: it stays. */
}

int dp_cuda_device_count(void)
{
    pthread_once(&driver_once, count_with_driver);
    return driver_gpus;
}

/* ---- the module ----------------------------------------------------------- */

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static void *module_handle;
static const dp__cuda_module *module;
static char module_why[4600];

/* The module beside the library that holds this function: build/ in the
 * build tree, PREFIX/lib once installed. */
static void load_module(void)
{
    Dl_info self;
    const char *lib = dladdr((void *)dp_cuda_built, &self) && self.dli_fname ? self.dli_fname : "";
    if (!strstr(lib, "libdptrain.so")) {
        snprintf(module_why, sizeof module_why,
                 "this program links libdptrain statically; the CUDA backend is a module of "
                 "the shared library (" DP__CUDA_MODULE_FILE "): link libdptrain.so");
        return;
    }
    char path[4096];
    const char *slash = strrchr(lib, '/');
    int dir = slash ? (int)(slash - lib) : 0;
    snprintf(path, sizeof path, "%.*s%s" DP__CUDA_MODULE_FILE, dir, lib, slash ? "/" : "");
    module_handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!module_handle) {
        const char *e = dlerror();
        snprintf(module_why, sizeof module_why, "the CUDA backend's module cannot be loaded: %s",
                 e ? e : path);
        return;
    }
    const dp__cuda_module *m = dlsym(module_handle, "dp__cuda_module_entry");
    if (!m || strcmp(m->version, DP_VERSION_STRING) != 0 ||
        m->table_size != sizeof(dp__device_ops)) {
        snprintf(module_why, sizeof module_why,
                 "%s is not this library's CUDA module (version %s, its device table %zu bytes; "
                 "this library: %s, %zu)",
                 path, m ? m->version : "unknown", m ? m->table_size : (size_t)0, DP_VERSION_STRING,
                 sizeof(dp__device_ops));
        return;
    }
    module = m;
}

static const dp__cuda_module *get_module(void)
{
    pthread_once(&module_once, load_module);
    return module;
}

static const dp__device_ops *load(void)
{
    const dp__cuda_module *m = get_module();
    return m ? m->ops : NULL;
}

static void *symbol(const char *name)
{
    return get_module() ? dlsym(module_handle, name) : NULL;
}

int dp_cuda_device_info(int ordinal, char *name, size_t size, size_t *total_bytes)
{
    if (ordinal < 0 || ordinal >= dp_cuda_device_count()) {
        DP_ERROR("cuda:%d: no such GPU (%d here)", ordinal, dp_cuda_device_count());
        return DP_EINVAL;
    }
    const dp__cuda_module *m = get_module();
    if (!m) {
        DP_ERROR("cuda:%d: %s", ordinal, module_why);
        return DP_ENOTSUP;
    }
    return m->info(ordinal, name, size, total_bytes);
}

/* Why there is no GPU to open: the driver's answer, else the module's. */
static const char *why_none(void)
{
    if (dp_cuda_device_count() == 0)
        return driver_why;
    return get_module() ? "no GPU is free" : module_why;
}

/* GPU `index` for listings: its name and memory. */
static int describe(int index, char *buf, size_t size)
{
    char name[256];
    size_t bytes = 0;
    DP_TRY(dp_cuda_device_info(index, name, sizeof name, &bytes));
    snprintf(buf, size, "%s, %.1f GiB", name, (double)bytes / (1 << 30));
    return 0;
}

const dp__backend dp__cuda_backend = {
    .name = "cuda",
    .hardware = "GPU",
    .load = load,
    .symbol = symbol,
    .count = dp_cuda_device_count,
    .why_none = why_none,
    .describe = describe,
};

#else

int dp_cuda_device_count(void)
{
    return 0;
}

int dp_cuda_device_info(int ordinal, char *name, size_t size, size_t *total_bytes)
{
    (void)name;
    (void)size;
    (void)total_bytes;
    DP_ERROR("cuda:%d: this build has no CUDA backend", ordinal);
    return DP_ENOTSUP;
}

static const char *why_none(void)
{
    return "this build has no CUDA backend";
}

/* CUDA's line of the backend list in a CPU-only build: no table, no
 * devices. */
const dp__backend dp__cuda_backend = {
    .name = "cuda",
    .hardware = "GPU",
    .count = dp_cuda_device_count,
    .why_none = why_none,
};

#endif
