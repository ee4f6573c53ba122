/* dp/tensor.h - devices, their streams, and tensors.
 *
 * A device owns a stream: a FIFO of commands that the device's worker runs in
 * order. Every op is enqueued and returns at once (MXNet's front end / back
 * end split); only reading a value blocks: dp_tensor_wait (MXNet's
 * wait_to_read), dp_tensor_to_host, dp_device_sync and dp_waitall.
 *
 * Tensors are float32 (or int32 labels, or bfloat16 activations under
 * DP_PRECISION_BF16, dp/ops.h) with PyTorch's logical shapes: a batch of
 * images is (N, C, H, W) whatever physical layout the kernels prefer.
 * dp_tensor_to_host always returns the logical (row-major) order, in the
 * tensor's own dtype (2 bytes an element for bf16). A tensor of 0
 * dimensions is a scalar of one element (PyTorch's shape ()), as
 * dp_sum(x, -1) returns.
 */
#ifndef DP_TENSOR_H
#define DP_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DP_MAX_DIMS 4
#define DP_MAX_DEVICES 64

typedef struct dp_device dp_device_t;
typedef struct dp_tensor dp_tensor_t;

/* DP_BF16: bfloat16, the top half of a float32 (8 bits of precision). */
typedef enum dp_dtype { DP_F32 = 0, DP_I32 = 1, DP_BF16 = 2 } dp_dtype;
/* Bytes per element: 4, 4, 2. */
size_t dp_dtype_size(dp_dtype dtype);

/* ---- devices ------------------------------------------------------------ */

/* Opens a device by name: "cpu:0", "cpu:1", ... (each CPU device is a worker
 * thread with `threads` kernel threads; 0 = all cores), or "cuda:0", ... (a
 * GPU; opening the same GPU twice gives two logical devices on it). */
int dp_device_open(dp_device_t **out, const char *name, int threads);
void dp_device_close(dp_device_t *dev);
const char *dp_device_name(const dp_device_t *dev);
int dp_device_threads(const dp_device_t *dev);
/* What a device can do, for code that must choose a path by it (never by a
 * backend's name). */
typedef enum dp_device_cap {
    /* Its memory is this process's host memory: the CPU and MPI read and
     * write it directly (a CPU device; not a GPU). */
    DP_DEVICE_HOST_MEMORY = 1 << 0,
    /* The same commands on the same shapes and thread count give
     * bit-identical results run after run. */
    DP_DEVICE_DETERMINISTIC = 1 << 1,
    /* It holds bf16 tensors and runs DP_PRECISION_BF16_REFERENCE (bf16
     * operands on its float32 kernels): a CPU device. */
    DP_DEVICE_BF16 = 1 << 2,
    /* Its convolutions and matrix products take bf16 operands natively
     * (a CPU with AVX512-BF16 or AMX, as oneDNN finds it, which honours
     * DNNL_MAX_CPU_ISA): DP_PRECISION_BF16 runs there. */
    DP_DEVICE_BF16_NATIVE = 1 << 3,
} dp_device_cap;
bool dp_device_has(const dp_device_t *dev, dp_device_cap cap);
/* Blocks until every command enqueued on the device so far has run; returns
 * the first error a command hit (sticky: every later wait, and
 * dp_tensor_to_host, return it until dp_device_take_error takes it). */
int dp_device_sync(dp_device_t *dev);
/* dp_device_sync on every open device (those other code of this process
 * opened too: dp_devices_sync waits for a list of one's own). */
int dp_waitall(void);
/* dp_device_sync on devs[0..n) and their communication paths; the first
 * error any returns. */
int dp_devices_sync(dp_device_t *const *devs, int n);
/* The sticky error: returns the first error a command on `dev` (or on its
 * communication path) hit since the device opened or since the last call,
 * 0 if none, and clears it, so that later waits and dp_tensor_to_host on
 * the device work again. Does not wait: the commands enqueued so far that
 * have not run yet may still fail and set it anew (dp_device_sync first to
 * take every failure so far). The commands enqueued after the failing one
 * were not skipped: each ran (on inputs the failing one may have left
 * unwritten), and a command failing later than the first is not reported
 * apart. A device whose command waited on another device's failed command
 * (a copy, an allreduce) holds that error too: take it there as well. A
 * GPU whose kernel faulted keeps CUDA's own sticky error: its later
 * commands fail anew (only a new process recovers that GPU). */
int dp_device_take_error(dp_device_t *dev);
/* dp_device_sync giving up after `seconds` (>= 0; 0 only looks, INFINITY
 * waits as dp_device_sync) with DP_ETIMEDOUT, which is not logged: a caller
 * waits in slices (the Python front end, to see Ctrl-C between them), and
 * nothing is cancelled, so the next call goes on waiting. An error a
 * command hit is returned as dp_device_sync returns it; NaN or a negative
 * time is DP_EINVAL. */
int dp_device_sync_for(dp_device_t *dev, double seconds);

/* Device lists. "N": the first N GPUs, or N CPU devices where there are
 * fewer GPUs (the seed's try_gpu fallback); "cpu:0,cpu:1": those devices;
 * "auto": every local device in the split that trains fastest here. A CPU
 * device gets `threads` kernel threads, or (0) the cores divided among the
 * CPU devices. */
int dp_devices_open(dp_device_t **devs, int *n, const char *spec, int threads);
/* Closes devs[n-1] .. devs[0] and sets them to NULL. */
void dp_devices_close(dp_device_t **devs, int n);
/* "[cpu:0, cpu:1]" */
const char *dp_devices_str(dp_device_t *const *devs, int n, char *buf, size_t size);

/* The device backends (CUDA's GPUs, the CPU), in the order that
 * dp_devices_open's "auto" and "N" prefer them: backends 0 ..
 * dp_backend_count() - 1. */
typedef struct dp_backend_info {
    const char *name;     /* its devices are named <name>:0, <name>:1, ... */
    const char *hardware; /* one of its devices in words: "GPU", "CPU device" */
    bool built;           /* false: this build leaves the backend out */
    bool shares_cores;    /* its devices share the host's CPU cores (any number opens) */
    int devices;          /* how many it has here */
    const char *why_none; /* with devices 0: why ("the CUDA runtime finds no GPU") */
} dp_backend_info;
int dp_backend_count(void);
/* Backend i's entry into *out; DP_EINVAL outside 0 .. count - 1. */
int dp_backend_info_get(int i, dp_backend_info *out);
/* Device `index` of backend i in words into buf[0..size) ("NVIDIA H200,
 * 139.8 GiB", or its hardware word where the backend says no more). */
int dp_backend_describe(int i, int index, char *buf, size_t size);
/* The backend of an open device (an i for dp_backend_info_get), or -1 for
 * one of no backend (the meta device). */
int dp_device_backend(const dp_device_t *dev);

/* GPUs (CUDA builds; "cuda:0" .. "cuda:N-1" open them). The count is 0 in a
 * CPU-only build and where the CUDA runtime finds no GPU. */
int dp_cuda_device_count(void);
/* Whether this build has the CUDA backend. */
bool dp_cuda_built(void);
/* GPU `ordinal`'s name (into name[0..size)) and memory in bytes; returns 0,
 * or DP_ENOTSUP / DP_EINVAL where there is no such GPU. */
int dp_cuda_device_info(int ordinal, char *name, size_t size, size_t *total_bytes);
/* TF32 for cuDNN convolutions: allowed by default, as PyTorch's
 * torch.backends.cudnn.allow_tf32; matrix products (cuBLAS) always run in
 * full float32, as PyTorch's default torch.backends.cuda.matmul.allow_tf32 =
 * False. Takes effect for convolutions enqueued afterwards. */
void dp_set_tf32(bool allow);
bool dp_tf32_allowed(void);

/* An event marks a point in a device's stream. */
typedef struct dp_event {
    dp_device_t *dev;
    uint64_t seq;
} dp_event;
/* Marks "everything enqueued on dev so far". */
dp_event dp_event_record(dp_device_t *dev);
/* Makes later commands of `dev` wait until `ev` has passed (no host wait). */
int dp_stream_wait_event(dp_device_t *dev, dp_event ev);
/* Blocks the caller until `ev` has passed. */
int dp_event_wait(dp_event ev);

/* ---- tensors ------------------------------------------------------------- */

/* A new uninitialised tensor on `dev`. */
int dp_tensor_new(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                  const int64_t *shape);
/* A new tensor holding a copy of `src` (logical row-major order). */
int dp_tensor_from_host(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                        const int64_t *shape, const void *src);
/* Releases the tensor once every command already enqueued that uses it has
 * run. NULL is accepted. Tensors made by ops while a tape is active belong
 * to that tape and must not be freed by hand. */
void dp_tensor_free(dp_tensor_t *t);

/* Blocks until the last command writing `t` has run (MXNet's wait_to_read).
 * A parameter's view (dp_params_get) or its gradient counts the commands
 * that wrote the whole dp_params buffer (an optimizer step, zeroing the
 * gradients) as its writes too. */
int dp_tensor_wait(const dp_tensor_t *t);
/* dp_tensor_wait giving up after `seconds` with DP_ETIMEDOUT, by
 * dp_device_sync_for's rules (not logged, nothing cancelled: call again). */
int dp_tensor_wait_for(const dp_tensor_t *t, double seconds);

/* A tensor over memory the caller owns, `data` holding its elements in
 * logical row-major order (aligned to the dtype's size), on a device with
 * DP_DEVICE_HOST_MEMORY (else DP_ENOTSUP): no copy is made (DLPack's
 * from_dlpack). `release(ctx)` is called once, on the device's worker, when
 * the tensor has been freed (dp_tensor_free) and every command enqueued
 * before that has run, those of other devices that read it included (they
 * are ordered before its device's later commands); NULL: nothing is called.
 * It runs on the worker thread, so it must not wait for a thread that may
 * be waiting for the device (a Python release must not take the GIL
 * there: Py_AddPendingCall hands the decref to the interpreter). When this
 * call fails, nothing is called and the memory stays the caller's. */
int dp_tensor_wrap_host(dp_tensor_t **out, dp_device_t *dev, dp_dtype dtype, int ndim,
                        const int64_t *shape, void *data, void (*release)(void *ctx), void *ctx);
/* The address of t's elements in logical row-major order, for a tensor on a
 * DP_DEVICE_HOST_MEMORY device whose memory is in that order; NULL otherwise
 * (a 4-D activation a convolution left in N, H, W, C order, a GPU tensor):
 * DLPack's __dlpack__. It does not wait: wait first (dp_tensor_wait) before
 * reading, and before writing wait for every command reading it
 * (dp_device_sync of its device, and of the devices it was copied to). */
void *dp_tensor_host_data(const dp_tensor_t *t);
/* Marks t's memory (and its parameter buffer's, for a view of one) as
 * written outside the library from now on: a DLPack consumer's view. */
void dp_tensor_set_shared(dp_tensor_t *t);
/* Whether t's memory may change without a library call: marked shared (t
 * or the buffer it is a view of), host memory it wraps
 * (dp_tensor_wrap_host), or a view whose owner the library does not track.
 * A front end that defers an op keeps its inputs' values only where this
 * is false. */
bool dp_tensor_is_shared(const dp_tensor_t *t);
/* Whether a and b may hold some of the same bytes (numpy's
 * may_share_memory): on one device, their memory ranges meet. */
bool dp_tensor_may_share_memory(const dp_tensor_t *a, const dp_tensor_t *b);
/* Enqueues dst = src: the same element count and dtype, any two devices,
 * any layouts (the values are copied in logical order; dst keeps its
 * layout). Not recorded for autograd: in-place assignment, `a[:] = b`.
 * Later commands of both devices come after the copy, so src may be freed
 * or written and dst read at once. A different element count is
 * DP_ESHAPE, a different dtype DP_EINVAL. */
int dp_tensor_copy(dp_tensor_t *dst, const dp_tensor_t *src);
/* Waits, then copies the values in logical row-major order. */
int dp_tensor_to_host(const dp_tensor_t *t, void *dst, size_t bytes);
/* Enqueues a copy of host data into `t` (logical order); `src` must stay
 * valid until dp_tensor_wait(t). */
int dp_tensor_copy_from_host(dp_tensor_t *t, const void *src, size_t bytes);
/* Enqueues t = value: an int32 tensor gets the integer value (truncated
 * toward zero; outside int32's range or NaN: DP_EINVAL). */
int dp_tensor_fill(dp_tensor_t *t, float value);
/* t = alpha * t, for a float tensor, enqueued on its device (not recorded). */
int dp_tensor_scale(dp_tensor_t *t, float alpha);
/* Enqueues a copy of t's values into host memory and returns at once (the
 * front end reads a step's loss one step later without a wait of its own).
 * `bytes` must be t's size; `dst` must stay valid until the copy has run:
 * after dp_device_sync(dp_tensor_device(t)), dp_waitall, or dp_event_wait
 * on an event recorded on t's device after this call. t must be in logical
 * order (any tensor but a 4-D activation that a convolution left in its
 * blocked layout; dp_tensor_to_host reads those). */
int dp_tensor_read_async(const dp_tensor_t *t, void *dst, size_t bytes);

int dp_tensor_ndim(const dp_tensor_t *t);
int64_t dp_tensor_dim(const dp_tensor_t *t, int i);
int64_t dp_tensor_numel(const dp_tensor_t *t);
dp_device_t *dp_tensor_device(const dp_tensor_t *t);
dp_dtype dp_tensor_dtype(const dp_tensor_t *t);
/* The gradient accumulated by dp_backward, or NULL. */
dp_tensor_t *dp_tensor_grad(const dp_tensor_t *t);
/* "[256, 1, 28, 28]" into buf. */
const char *dp_tensor_shape_str(const dp_tensor_t *t, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* DP_TENSOR_H */
