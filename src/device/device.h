/* The device interface every backend implements, and the tensor struct.
 *
 * A backend is a table of function pointers (dp__device_ops). Kernel entries
 * do not run the kernel: they enqueue it on the device's stream and return,
 * so the front end never waits for a device. Each kernel takes a typed
 * argument struct (src/device/kernels.h).
 *
 * A command has run when its worker returns from it: every backend finishes
 * a command's work on its hardware before that (a CUDA device synchronizes
 * its CUDA stream at the end of each command), so the engine's order of
 * commands and events (dp_event_record, dp_stream_wait_event) is the order
 * on the devices, and a host wait on a stream (dp_device_sync,
 * dp_event_wait, dp_tensor_wait) is a wait for the device. */
#ifndef DP_DEVICE_DEVICE_H
#define DP_DEVICE_DEVICE_H

#include "dp/tensor.h"
#include "device/kernels.h"
#include "device/backend_list.h"
#include "device/op_list.h"
#include "engine/stream.h"

#include <pthread.h>

typedef struct dp__device_ops {
    const char *kind; /* "cpu", "cuda": for names and messages only */
    unsigned caps;    /* dp_device_cap flags every device of the backend has;
                       * open may add those of the hardware (dev->caps) */
    /* Runs nothing (the meta device): a forward traced on it is read back
     * from the tape as the model's layers (dp_model_summary, ONNX export),
     * so an op that fuses layers a kernel of its own runs (conv2d with its
     * average pool) records them apart there. */
    bool traces;

    /* Lifetime: open fills dev->impl and dev->stream. */
    int (*open)(dp_device_t *dev);
    void (*close)(dp_device_t *dev);

    /* Device memory, called from the front end. */
    void *(*alloc)(dp_device_t *dev, size_t bytes);
    void (*free)(dp_device_t *dev, void *p);

    /* Writes host data into a block no queued command uses; returns once
     * `src` may be reused. */
    int (*upload_fresh)(dp_device_t *dev, void *dst, const void *src, size_t bytes);
    /* Enqueued copies (host memory must outlive the command). */
    int (*copy_from_host)(dp_device_t *dev, void *dst, const void *src, size_t bytes);
    int (*copy_to_host)(dp_device_t *dev, void *dst, const void *src, size_t bytes);
    int (*copy_device)(dp_device_t *dev, void *dst, const void *src, size_t bytes);

    /* Kernels, each enqueued on dev's stream (arguments: device/kernels.h):
     * the slots of the op list (device/op_list.h), e.g.
     *   int (*conv2d_forward)(dp_device_t *dev, const dp__conv2d_args *a);
     * A slot that the list does not give a backend is NULL there (cast on
     * CUDA): the op returns DP_ENOTSUP on that device. */
    /* clang-format off */
#define DP__SLOT(slot, args, x) int (*slot)(dp_device_t *dev, const args *a);
#define DP__SLOT_LINE(name, args, kernels, backends, cost) \
    DP__OP_SLOTS_##kernels(DP__SLOT, name, args, ~)
    /* clang-format on */
    DP__OP_LIST(DP__SLOT_LINE)
#undef DP__SLOT_LINE
#undef DP__SLOT

    /* Optional: whether kernels of `reader` may read the memory of `owner`,
     * another device of this backend (the same hardware, or a peer with
     * access enabled: GPUs). NULL: devices with DP_DEVICE_HOST_MEMORY read
     * one another's memory, others none but their own. */
    bool (*can_read)(const dp_device_t *reader, const dp_device_t *owner);

    /* Optional: the CUDA stream (a cudaStream_t) on which the device's
     * worker issues its GPU work, for NCCL, src/comm/'s backend on GPUs,
     * which issues its allreduce there from a command on the worker. NULL:
     * a device NCCL does not sum on. */
    void *(*cuda_stream)(const dp_device_t *dev);

    /* Optional: a communication path beside the device's stream
     * (comm_path.c). `comm` arrives filled as a copy of its device (ops,
     * impl, name "cpu:0.comm", threads 1) and gets its own stream here, whose
     * worker runs the device's kernels on the device's memory while the
     * device's own worker goes on with the backward pass. NULL: collectives
     * run on the device's stream (CUDA, until it issues on a second CUDA
     * stream). */
    int (*open_comm)(dp_device_t *comm);
} dp__device_ops;

/* The caching allocator keeps freed blocks by size: every training step asks
 * for the same sizes, so after the first step nothing reaches the system
 * allocator (glibc maps and unmaps large blocks, page faults each time). */
typedef struct dp__block_cache {
    pthread_mutex_t mu;
    size_t nsizes;
    struct dp__block_list {
        size_t bytes;
        size_t count, cap;
        void **blocks;
    } lists[128];
    size_t cached_bytes;
} dp__block_cache;

struct dp_device {
    const dp__device_ops *ops;
    char name[32];
    int index;     /* cpu:<index>, cuda:<index> (the CUDA device ordinal) */
    int threads;   /* kernel threads */
    unsigned caps; /* dp_device_cap flags: ops->caps and the hardware's */
    dp__stream *stream;
    void *impl;
    dp__block_cache cache;
    /* The communication path (comm_path.c): NULL until first asked for;
     * `comm_of` is set on a path and names its device. */
    dp_device_t *comm, *comm_of;
};

/* dev's communication path (comm_path.c): a device on dev's memory with a
 * stream (and a worker) of its own, opened on first use and closed with
 * dev; dev itself where the backend has none (then collectives run in dev's
 * stream order). Commands on the path are ordered against dev's only by
 * events. src/comm/ sums the gradient buckets there. */
dp_device_t *dp__comm_path(dp_device_t *dev);
/* The device's communication path if it has been opened, else NULL. */
dp_device_t *dp__comm_path_if_open(dp_device_t *dev);
/* Closes dev's communication path, if it has one, after its commands. */
void dp__comm_path_close(dp_device_t *dev);

/* Autograd's per-tensor state (src/autograd/); opaque here. */
struct dp__autograd_state;

struct dp_tensor {
    dp_device_t *dev;
    dp_dtype dtype;
    int ndim;
    int64_t shape[DP_MAX_DIMS]; /* logical, PyTorch's order */
    int nhwc;                   /* 4-D only: physical order is N, H, W, C */
    void *data;
    size_t bytes;
    int owns_data;      /* 0 for views into a parameter buffer */
    uint64_t write_seq; /* stream seq of the last command writing it */
    /* A view's tensor whose memory holds it (a dp_params buffer), written
     * as a whole by commands that do not know its views; or NULL. */
    const struct dp_tensor *base;
    /* dp_tensor_wrap_host's callback, called on the device's worker once
     * the tensor is released and the commands before have run; or NULL. */
    void (*release)(void *ctx);
    void *release_ctx;
    const char *name; /* a parameter's name, or NULL */
    /* Its memory was handed to a writer outside the library (dp_tensor_set_shared). */
    int shared;
    /* Set and read by autograd only, as PyTorch's TensorImpl keeps its
     * autograd_meta_: non-NULL when the tensor requires a gradient or was
     * recorded on a tape. The device layer never looks inside (the type is
     * incomplete here); dp_tensor_free hands it back to autograd. */
    struct dp__autograd_state *ag;
};

/* dp_tensor_free calls fn(t) for a tensor with autograd state before it
 * frees the tensor; autograd sets fn when it attaches a leaf's state. */
typedef void (*dp__tensor_state_release_fn)(dp_tensor_t *t);
void dp__tensor_set_state_release(dp__tensor_state_release_fn fn);

/* The stream seq after which t's value is written: its last write, or
 * its base's (a view into a dp_params buffer, which commands over the
 * whole buffer write without knowing their views), whichever is later. */
uint64_t dp__tensor_ready_seq(const dp_tensor_t *t);

/* Device memory through the block cache. */
void *dp__device_alloc(dp_device_t *dev, size_t bytes);
/* Returns a block to the cache at once: only for memory no queued command
 * uses. */
void dp__device_release(dp_device_t *dev, void *p, size_t bytes);
/* Returns a block to the cache once the stream has run every queued command. */
void dp__device_release_later(dp_device_t *dev, void *p, size_t bytes);

/* One process-wide mutex between a collective's grouped launch across
 * devices and a backend's calls that wait for a whole device. NCCL's
 * grouped launch (src/comm/nccl.c) holds it from ncclGroupStart to
 * ncclGroupEnd, and the CUDA backend around every cudaFree, cudaHostAlloc
 * and cudaFreeHost: such a call on another thread in the middle of the
 * launch would wait for the GPUs whose NCCL kernels are already launched,
 * which spin for the peers whose launch waits behind it, and both hang.
 * PyTorch holds its CUDA free mutex the same way. */
void dp__device_free_lock(void);
void dp__device_free_unlock(void);

/* Waits for command `seq` of s for at most `seconds` (dp_device_sync_for's
 * rules; `what` names the public call in the message of a bad time). */
int dp__stream_wait_seconds(dp__stream *s, uint64_t seq, double seconds, const char *what);

/* Checks a tensor's rank, sizes and bytes (DP_EINVAL, logged). */
int dp__tensor_check_shape(dp_dtype dtype, int ndim, const int64_t *shape);
/* Enqueues t->release(t->release_ctx) on t's device (tensor_host.c), for
 * dp__tensor_release. */
void dp__tensor_release_wrapped(const dp_tensor_t *t);
/* dst = src in logical order, each in its own layout, on any two devices,
 * ordered by events (tensor_copy.c): dp_tensor_copy without its checks,
 * which the caller has made (one dtype, one element count). */
int dp__tensor_copy_logical(dp_tensor_t *dst, const dp_tensor_t *src);

/* A tensor whose memory the caller provides (a view). */
dp_tensor_t *dp__tensor_view(dp_device_t *dev, dp_dtype dtype, int ndim, const int64_t *shape,
                             void *data);
/* A new tensor in the given layout, owned by the caller. */
int dp__tensor_alloc(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                     const int64_t *shape, int nhwc);
/* A tensor of the same shape, layout and device as `like`. */
int dp__tensor_alloc_like(dp_tensor_t **out, const dp_tensor_t *like);
/* Frees the struct and, if the tensor owns its memory, returns that to the
 * cache once the queued commands have run. Autograd's state is not touched:
 * dp_tensor_free (src/autograd/) releases that first. */
void dp__tensor_release(dp_tensor_t *t);
int64_t dp__numel(int ndim, const int64_t *shape);
/* "float32", "int32", "bfloat16": torch's names, for messages. */
const char *dp__dtype_name(dp_dtype dtype);
/* A tensor's bytes: numel times its dtype's size. */
size_t dp__bytes_of(dp_dtype dtype, int ndim, const int64_t *shape);
/* The tensor described for a kernel. */
dp__tdesc dp__desc(const dp_tensor_t *t);
/* Records that the last command pushed on t's device writes t. */
void dp__tensor_written(dp_tensor_t *t);

/* A backend's entry (device/backend_list.h): what opening its devices by
 * name, `--devices auto` and `N`, and the listings ask of it. */
typedef struct dp__backend {
    const char *name;     /* its devices are <name>:0, <name>:1, ... */
    const char *hardware; /* one of its devices in words, for listings: "GPU" */
    /* Its device table; NULL where this build leaves the backend out, or
     * where `load` gives it. */
    const dp__device_ops *ops;
    /* Optional: the table of a backend built as a module (CUDA's,
     * libdptrain-cuda.so beside the library, with the libraries it needs),
     * loaded when its first device opens; NULL where it cannot be, why_none
     * saying why. Counting its devices loads nothing. */
    const dp__device_ops *(*load)(void);
    /* Optional, with load: a symbol of the module (NULL: none, or not
     * loaded), for the layers that call into it (comm/nccl.c). */
    void *(*symbol)(const char *name);
    /* How many devices it has here (0 where it is not built): GPUs, cores. */
    int (*count)(void);
    /* Why it has none, for listings and errors: "this build has no CUDA
     * backend", "no CUDA driver (libcuda.so.1) on this machine". */
    const char *(*why_none)(void);
    /* Its devices are slices of the host's cores: `--devices N` opens N of
     * them for any N (they share the cores), `auto` one a core. Else each
     * device is a piece of hardware: N opens only where N are present. */
    bool shares_cores;
    /* Optional: device `index` in words ("NVIDIA H200, 139.8 GiB"). */
    int (*describe)(int index, char *buf, size_t size);
    /* Optional, for a backend whose kernels conv_choice.c's table picks:
     * what a measured choice holds for (the processor, the kernel
     * library's version, the instruction set it dispatches on), as
     * "name=value; ..." into buf[0..size); snprintf's count. A choice
     * measured under one key is not reused under another (the
     * convolution kernels' cache file). */
    int (*choice_key)(char *buf, size_t size);
} dp__backend;

/* Each backend's entry, defined in its folder. */
#define DP__BACKEND_ENTRY_DECL(name) extern const dp__backend dp__##name##_backend;
DP__BACKEND_LIST(DP__BACKEND_ENTRY_DECL)
#undef DP__BACKEND_ENTRY_DECL

/* The entry of backend `id` (backends.c). */
const dp__backend *dp__backend_get(dp__backend_id id);
/* Whether this build has backend b (compiled in, or as a module). */
bool dp__backend_built(const dp__backend *b);
/* b's device table: compiled in, or its module loaded now (NULL where it
 * cannot be: b->why_none() says why). */
const dp__device_ops *dp__backend_ops(const dp__backend *b);
/* A symbol of backend id's module, loading it (NULL: none). */
void *dp__backend_symbol(dp__backend_id id, const char *name);
/* The entry whose name is the first `len` characters of `name`, or NULL. */
const dp__backend *dp__backend_named(const char *name, size_t len);
/* "cuda:N or cpu:N" into buf: the device names the backends take, for
 * messages. Returns buf. */
const char *dp__backend_names(char *buf, size_t size);

/* Core count of this machine (or what dp__devices_see_cpus set): what the
 * CPU backend counts, and what CPU devices share. */
int dp__cpu_count(void);
/* Makes dp__cpu_count, and so dp_devices_open's `auto`, see n CPUs (0: the
 * machine's own again): tests play a machine larger than theirs. */
void dp__devices_see_cpus(int n);

/* The meta device (meta_device.c): shapes without memory, kernels that run
 * nothing. Not opened by name (no backend of the list): training on it
 * would read values that were never computed. */
extern const dp__device_ops dp__meta_ops;
int dp__device_open_meta(dp_device_t **out);

#endif
