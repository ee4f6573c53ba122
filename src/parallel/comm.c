/* torch.chunk, scatter, gather, broadcast and the two allreduce algorithms.
 *
 * Devices here share an address space (CPU devices; CUDA devices with peer
 * access), so a device reads another's buffer directly, ordered by events:
 * the reader waits for the writer's event before reading, and the writer
 * waits for the reader's event before writing that buffer again. */
#include "dp/parallel.h"

#include "dp/dist.h"

#include "autograd/tape.h"
#include "core/internal.h"
#include "parallel/comm.h"

#include <string.h>

void dp__after(dp_device_t *waiter, dp_device_t *dev)
{
    if (waiter != dev)
        dp_stream_wait_event(waiter, dp_event_record(dev));
}

int dp__copy_between(dp_device_t *dst_dev, void *dst, dp_device_t *src_dev, const void *src,
                     size_t bytes)
{
    if (bytes == 0)
        return 0;
    /* A CPU device cannot read a GPU's memory: a copy from a GPU into a CPU
     * device's buffer is the GPU's copy to the host, issued once the CPU
     * device has finished with that buffer. Every other pair (CPU to CPU,
     * into a GPU from anywhere) is the destination's copy_device. */
    bool gpu_to_host = !dp_device_has(src_dev, DP_DEVICE_HOST_MEMORY) &&
                       dp_device_has(dst_dev, DP_DEVICE_HOST_MEMORY);
    if (gpu_to_host) {
        dp__after(src_dev, dst_dev);
        DP_TRY(src_dev->ops->copy_to_host(src_dev, dst, src, bytes));
        dp__after(dst_dev, src_dev);
        return 0;
    }
    dp__after(dst_dev, src_dev);
    DP_TRY(dst_dev->ops->copy_device(dst_dev, dst, src, bytes));
    dp__after(src_dev, dst_dev);
    return 0;
}

int dp_chunk_sizes(int64_t rows, int n, int64_t *sizes)
{
    DP_ASSERT(n > 0 && rows >= 0);
    for (int k = 0; k < n; k++)
        sizes[k] = 0;
    if (rows == 0)
        return n; /* PyTorch: n empty chunks */
    int64_t size = (rows + n - 1) / n;
    int count = 0;
    for (int64_t start = 0; start < rows; start += size)
        sizes[count++] = DP_MIN(size, rows - start);
    return count;
}

static size_t row_bytes(const dp_tensor_t *t)
{
    size_t b = 4;
    for (int i = 1; i < t->ndim; i++)
        b *= (size_t)t->shape[i];
    return b;
}

/* ---- scatter and gather, each the other's backward ------------------------ */

/* Pieces of a scatter are recorded one node each: node k copies the grad of
 * piece k back into rows [offset, offset + n_k) of x's gradient. */
typedef struct piece_node {
    int64_t row_offset;
} piece_node;

static int piece_backward(dp__node *node)
{
    const piece_node *pn = (const piece_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *piece = node->output, *dx;
    /* All pieces of one scatter write disjoint rows of x's gradient. The
     * first piece to arrive allocates it and zeroes it (pieces may not cover
     * every row when a replica got no chunk), later ones add their rows. */
    if (!x->ag)
        return 0;
    if (!x->ag->grad || !x->ag->grad_written) {
        DP_TRY(dp__grad_begin(x, &dx));
        DP_TRY(dp_tensor_fill(dx, 0.0f));
        DP_TRY(dp__grad_end(x, dx));
    }
    size_t rb = row_bytes(x);
    /* Copy into a temporary on x's device, then add into the rows. */
    int64_t shape[DP_MAX_DIMS];
    memcpy(shape, piece->shape, sizeof shape);
    dp_tensor_t *tmp;
    DP_TRY(dp__tape_alloc(&tmp, x->dev, DP_F32, piece->ndim, shape, 0));
    DP_TRY(dp__copy_between(x->dev, tmp->data, piece->dev, piece->ag->grad->data,
                            (size_t)piece->shape[0] * rb));
    dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE,
                          .a = tmp->data,
                          .out = (float *)x->ag->grad->data + pn->row_offset * (int64_t)(rb / 4),
                          .n = dp__numel(piece->ndim, piece->shape)};
    DP_TRY(x->dev->ops->eltwise(x->dev, &a));
    dp__tensor_written(x->ag->grad);
    dp__grad_touch(x);
    x->ag->grad_masked = 0;
    return 0;
}

int dp_scatter(dp_tensor_t **chunks, int *nchunks, dp_tensor_t *x, dp_device_t *const *devs, int n)
{
    char xs[64];
    if (!x || n < 1 || n > DP_MAX_DEVICES || x->ndim < 1) {
        DP_ERROR("scatter: need a tensor with a batch dimension and 1..%d devices", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    if (x->nhwc) {
        DP_ERROR("scatter: %s must be in logical layout", dp_tensor_shape_str(x, xs, sizeof xs));
        return DP_EINVAL;
    }
    int64_t sizes[DP_MAX_DEVICES];
    int count = dp_chunk_sizes(x->shape[0], n, sizes);
    size_t rb = row_bytes(x);
    int64_t offset = 0;
    for (int k = 0; k < count; k++) {
        int64_t shape[DP_MAX_DIMS];
        memcpy(shape, x->shape, sizeof shape);
        shape[0] = sizes[k];
        dp_tensor_t *piece;
        DP_TRY(dp__tape_alloc(&piece, devs[k], x->dtype, x->ndim, shape, 0));
        DP_TRY(dp__copy_between(devs[k], piece->data, x->dev, (char *)x->data + offset * rb,
                                (size_t)sizes[k] * rb));
        dp__tensor_written(piece);
        if (dp__tape_needs_grad(&x, 1)) {
            piece_node pn = {offset};
            DP_TRY(dp__tape_record("scatter", piece_backward, &x, 1, piece, &pn, sizeof pn));
        }
        chunks[k] = piece;
        offset += sizes[k];
    }
    *nchunks = count;
    return 0;
}

/* Gather: one node per input; node k copies rows of the output's gradient
 * back to input k's device. */
static int gather_piece_backward(dp__node *node)
{
    const piece_node *pn = (const piece_node *)node->params;
    dp_tensor_t *x = node->inputs[0], *out = node->output, *dx;
    DP_TRY(dp__grad_begin(x, &dx));
    if (!dx)
        return 0;
    size_t rb = row_bytes(x);
    DP_TRY(dp__copy_between(x->dev, dx->data, out->dev,
                            (char *)out->ag->grad->data + pn->row_offset * rb,
                            (size_t)x->shape[0] * rb));
    return dp__grad_end(x, dx);
}

int dp_gather(dp_tensor_t **out, dp_tensor_t *const *xs, int n, dp_device_t *dst)
{
    if (n < 1 || n > DP_MAX_DEVICES) {
        DP_ERROR("gather: need 1..%d tensors", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    int64_t shape[DP_MAX_DIMS];
    memcpy(shape, xs[0]->shape, sizeof shape);
    shape[0] = 0;
    for (int k = 0; k < n; k++) {
        int same = xs[k]->ndim == xs[0]->ndim && xs[k]->dtype == xs[0]->dtype && !xs[k]->nhwc;
        for (int i = 1; same && i < xs[0]->ndim; i++)
            same = xs[k]->shape[i] == xs[0]->shape[i];
        if (!same) {
            DP_ERROR("gather: piece %d differs in shape, type or layout from piece 0", k);
            return DP_ESHAPE;
        }
        shape[0] += xs[k]->shape[0];
    }
    dp_tensor_t *y;
    DP_TRY(dp__tape_alloc(&y, dst, xs[0]->dtype, xs[0]->ndim, shape, 0));
    size_t rb = row_bytes(xs[0]);
    int64_t offset = 0;
    for (int k = 0; k < n; k++) {
        DP_TRY(dp__copy_between(dst, (char *)y->data + offset * rb, xs[k]->dev, xs[k]->data,
                                (size_t)xs[k]->shape[0] * rb));
        offset += xs[k]->shape[0];
    }
    dp__tensor_written(y);
    offset = 0;
    for (int k = 0; k < n; k++) {
        if (dp__tape_needs_grad(&xs[k], 1)) {
            piece_node pn = {offset};
            DP_TRY(dp__tape_record("gather", gather_piece_backward, &xs[k], 1, y, &pn, sizeof pn));
        }
        offset += xs[k]->shape[0];
    }
    *out = y;
    return 0;
}

int dp_broadcast(dp_tensor_t *const *dsts, int n, const dp_tensor_t *src)
{
    for (int k = 0; k < n; k++) {
        if (dp__numel(dsts[k]->ndim, dsts[k]->shape) != dp__numel(src->ndim, src->shape)) {
            DP_ERROR("broadcast: destination %d has another size than the source", k);
            return DP_ESHAPE;
        }
        if (dsts[k] == src)
            continue;
        DP_TRY(dp__copy_between(dsts[k]->dev, dsts[k]->data, src->dev, src->data, src->bytes));
        dp__tensor_written(dsts[k]);
    }
    return 0;
}

/* ---- allreduce ------------------------------------------------------------- */

static int accumulate_on(dp_device_t *dev, float *dst, const float *src, int64_t n)
{
    if (n == 0)
        return 0;
    dp__eltwise_args a = {.op = DP__ELT_ACCUMULATE, .a = src, .out = dst, .n = n};
    return dev->ops->eltwise(dev, &a);
}

static int copy_on(dp_device_t *dev, float *dst, const float *src, int64_t n)
{
    if (n == 0)
        return 0;
    return dev->ops->copy_device(dev, dst, src, (size_t)n * sizeof(float));
}

/* The first half of the seed's allreduce: data[0] += data[i] for every i. */
int dp__reduce_to_first(dp_tensor_t *const *bufs, int n, int64_t len)
{
    dp_device_t *d0 = bufs[0]->dev;
    /* Device 0's kernel reads every other buffer: across two GPUs without
     * peer access that is an illegal address, so refuse before issuing. */
    for (int i = 1; i < n; i++)
        DP_TRY(dp__check_kernel_read("allreduce", d0, bufs[i]->dev));
    for (int i = 1; i < n; i++) {
        dp__after(d0, bufs[i]->dev);
        DP_TRY(accumulate_on(d0, bufs[0]->data, bufs[i]->data, len));
    }
    return 0;
}

/* The second half: data[0] copied back into each device's own buffer (in
 * place: the d2l version that rebinds data[i] leaves the other devices
 * without the sum). */
int dp__broadcast_from_first(dp_tensor_t *const *bufs, int n, int64_t len)
{
    dp_device_t *d0 = bufs[0]->dev;
    for (int i = 1; i < n; i++) {
        dp__after(bufs[i]->dev, d0);
        DP_TRY(copy_on(bufs[i]->dev, bufs[i]->data, bufs[0]->data, len));
    }
    /* Device 0 writes its buffer again only after every copy has read it. */
    for (int i = 1; i < n; i++)
        dp__after(d0, bufs[i]->dev);
    return 0;
}

/* The seed's allreduce: sum into device 0, then copy back. */
int dp__allreduce_naive(dp_tensor_t *const *bufs, int n, int64_t len)
{
    DP_TRY(dp__reduce_to_first(bufs, n, len));
    return dp__broadcast_from_first(bufs, n, len);
}

/* Ring allreduce over n chunks. Reduce-scatter: in step s, device k+1 adds
 * device k's chunk (k - s) mod n into its own; after n-1 steps device k holds
 * the full sum of chunk (k + 1) mod n. All-gather: in step s, device k+1
 * copies chunk (k + 1 - s) mod n from device k. Each device sends 2(n-1)/n of
 * the buffer. Before each step every device waits for its two neighbours'
 * previous step: the left one wrote what it reads, the right one read what
 * it is about to write. */
static int allreduce_ring(dp_tensor_t *const *bufs, int n, int64_t len)
{
    /* Device k+1's kernels read device k's buffer: refused up front where
     * they cannot (two GPUs without peer access), as in reduce_to_first. */
    for (int k = 0; k < n; k++)
        DP_TRY(dp__check_kernel_read("allreduce ring", bufs[(k + 1) % n]->dev, bufs[k]->dev));
    int64_t start[DP_MAX_DEVICES + 1];
    for (int c = 0; c <= n; c++)
        start[c] = len * c / n;
    dp_event prev[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++)
        prev[k] = dp_event_record(bufs[k]->dev);
    for (int phase = 0; phase < 2; phase++) {
        for (int s = 0; s < n - 1; s++) {
            for (int k = 0; k < n; k++) {
                int r = (k + 1) % n; /* receiver */
                dp_device_t *dev = bufs[r]->dev;
                dp_stream_wait_event(dev, prev[k]);
                dp_stream_wait_event(dev, prev[(r + 1) % n]);
                int c = phase == 0 ? ((k - s) % n + n) % n : ((k + 1 - s) % n + n) % n;
                float *dst = (float *)bufs[r]->data + start[c];
                const float *src = (const float *)bufs[k]->data + start[c];
                int64_t cl = start[c + 1] - start[c];
                DP_TRY(phase == 0 ? accumulate_on(dev, dst, src, cl) : copy_on(dev, dst, src, cl));
            }
            for (int k = 0; k < n; k++)
                prev[k] = dp_event_record(bufs[k]->dev);
        }
    }
    /* The neighbours read this buffer in the last step: wait for them before
     * it is written again. */
    for (int k = 0; k < n; k++) {
        dp_stream_wait_event(bufs[k]->dev, prev[(k + 1) % n]);
        dp_stream_wait_event(bufs[k]->dev, prev[(k + n - 1) % n]);
    }
    return 0;
}

int dp_allreduce_sum(dp_tensor_t *const *bufs, int n, dp_allreduce_algo algo)
{
    if (n < 1 || n > DP_MAX_DEVICES) {
        DP_ERROR("allreduce: need 1..%d buffers", DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    int64_t len = dp__numel(bufs[0]->ndim, bufs[0]->shape);
    for (int k = 0; k < n; k++) {
        if (bufs[k]->dtype != DP_F32 || dp__numel(bufs[k]->ndim, bufs[k]->shape) != len) {
            DP_ERROR("allreduce: buffer %d is not a float buffer of %lld elements", k,
                     (long long)len);
            return DP_ESHAPE;
        }
        for (int j = 0; j < k; j++) {
            if (bufs[j]->dev == bufs[k]->dev) {
                DP_ERROR("allreduce: buffers %d and %d are on the same device %s", j, k,
                         bufs[k]->dev->name);
                return DP_EINVAL;
            }
        }
    }
    dp_device_t *devs[DP_MAX_DEVICES];
    for (int k = 0; k < n; k++)
        devs[k] = bufs[k]->dev;
    algo = dp__allreduce_for(algo, devs, n);
    int rc;
    switch (algo) {
    case DP_ALLREDUCE_MPI:
        rc = dp__allreduce_mpi(bufs, n, len);
        break;
    case DP_ALLREDUCE_NCCL:
        rc = dp__allreduce_nccl(bufs, n, len);
        break;
    case DP_ALLREDUCE_NAIVE:
        rc = n > 1 ? dp__allreduce_naive(bufs, n, len) : 0;
        break;
    case DP_ALLREDUCE_RING:
        rc = n > 1 ? allreduce_ring(bufs, n, len) : 0;
        break;
    default:
        DP_ERROR("allreduce: unknown algorithm %d", (int)algo);
        return DP_EINVAL;
    }
    if (rc == 0)
        for (int k = 0; k < n; k++)
            dp__tensor_written(bufs[k]);
    return rc;
}

static const char *const algo_names[] = {"ring", "naive", "mpi", "nccl"};

int dp_allreduce_algo_parse(const char *name)
{
    if (strcmp(name, "auto") == 0)
        return DP_ALLREDUCE_AUTO;
    for (int i = 0; i < (int)(sizeof algo_names / sizeof algo_names[0]); i++)
        if (strcmp(name, algo_names[i]) == 0)
            return i;
    return -2;
}

const char *dp_allreduce_algo_name(dp_allreduce_algo algo)
{
    if (algo == DP_ALLREDUCE_AUTO)
        return "auto";
    return algo >= 0 && (int)algo < (int)(sizeof algo_names / sizeof algo_names[0])
               ? algo_names[algo]
               : "?";
}

dp_allreduce_algo dp_allreduce_resolve(dp_allreduce_algo algo)
{
    if (algo != DP_ALLREDUCE_AUTO)
        return algo;
    return dp_dist_size() > 1 ? DP_ALLREDUCE_MPI : DP_ALLREDUCE_RING;
}

/* On GPUs the ring's kernels read the neighbour GPU's memory, which needs
 * peer access; NCCL does not, and is faster there, so it is the default
 * wherever it applies. */
dp_allreduce_algo dp__allreduce_for(dp_allreduce_algo algo, dp_device_t *const *devs, int n)
{
    if (algo != DP_ALLREDUCE_AUTO || dp_dist_size() > 1)
        return dp_allreduce_resolve(algo);
    return dp__nccl_suits(devs, n) ? DP_ALLREDUCE_NCCL : DP_ALLREDUCE_RING;
}
