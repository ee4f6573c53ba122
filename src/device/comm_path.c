/* A device's communication path: a second stream, with its own worker, on
 * the same device and memory. Gradient buckets are summed there while the
 * device's own worker goes on with the backward pass (PyTorch's DDP runs its
 * allreduces on a communication stream the same way); events order the two
 * (collective.h). */
#include "device/collective.h"

#include "core/internal.h"
#include "device/device.h"
#include "engine/stream.h"

#include <string.h>

static pthread_mutex_t comm_mu = PTHREAD_MUTEX_INITIALIZER;

dp_device_t *dp__comm_path(dp_device_t *dev)
{
    if (dev->comm_of)
        return dev; /* already a path */
    if (!dev->ops->open_comm)
        return dev;
    pthread_mutex_lock(&comm_mu);
    if (!dev->comm) {
        dp_device_t *c = dp__calloc(1, sizeof *c);
        if (c) {
            c->ops = dev->ops;
            c->index = dev->index;
            c->threads = 1;
            c->caps = dev->caps;
            c->impl = dev->impl;
            c->comm_of = dev;
            /* "cpu:0.comm" (device names are short: kind:index). */
            size_t len = strnlen(dev->name, sizeof c->name - 6);
            memcpy(c->name, dev->name, len);
            memcpy(c->name + len, ".comm", 6);
            pthread_mutex_init(&c->cache.mu, NULL);
            if (dev->ops->open_comm(c) < 0) {
                pthread_mutex_destroy(&c->cache.mu);
                dp__free(c);
                c = NULL;
            }
        }
        dev->comm = c;
    }
    dp_device_t *c = dev->comm;
    pthread_mutex_unlock(&comm_mu);
    /* Without a path (out of memory or threads) collectives stay on the
     * device's stream: correct, without overlap. */
    return c ? c : dev;
}

dp_device_t *dp__comm_path_if_open(dp_device_t *dev)
{
    pthread_mutex_lock(&comm_mu);
    dp_device_t *c = dev->comm;
    pthread_mutex_unlock(&comm_mu);
    return c;
}

void dp__comm_path_close(dp_device_t *dev)
{
    pthread_mutex_lock(&comm_mu);
    dp_device_t *c = dev->comm;
    dev->comm = NULL;
    pthread_mutex_unlock(&comm_mu);
    if (!c)
        return;
    dp_device_sync(c);
    dp__stream_close(c->stream);
    pthread_mutex_destroy(&c->cache.mu);
    dp__free(c);
}

int dp__range_view(dp_tensor_t **out, dp_tensor_t *base, int64_t off, int64_t n, dp_device_t *on)
{
    if (base->dtype != DP_F32 || off < 0 || n < 1 || off + n > dp__numel(base->ndim, base->shape)) {
        DP_ERROR("range view: [%lld, %lld) is not inside a float tensor of %lld elements",
                 (long long)off, (long long)(off + n),
                 (long long)dp__numel(base->ndim, base->shape));
        return DP_EINVAL;
    }
    if (on != base->dev && on->comm_of != base->dev) {
        DP_ERROR("range view: %s is not %s or its communication path", on->name, base->dev->name);
        return DP_EINVAL;
    }
    dp_tensor_t *v = dp__tensor_view(on, DP_F32, 1, &n, (float *)base->data + off);
    if (!v)
        return DP_ENOMEM;
    *out = v;
    return 0;
}

dp_event dp__written_event(dp_tensor_t *const *ts, int n)
{
    dp_event ev = {NULL, 0};
    for (int i = 0; i < n; i++) {
        if (!ts[i])
            continue;
        if (!ev.dev)
            ev.dev = ts[i]->dev;
        DP_ASSERT(ts[i]->dev == ev.dev);
        if (ts[i]->write_seq > ev.seq)
            ev.seq = ts[i]->write_seq;
    }
    return ev;
}

typedef struct host_call_args {
    void (*fn)(void *arg);
    void *arg;
} host_call_args;

static int run_host_call(void *p, void *ctx)
{
    (void)ctx;
    host_call_args *a = p;
    a->fn(a->arg);
    return 0;
}

void dp__enqueue_host_call(dp_device_t *dev, void (*fn)(void *arg), void *arg, const char *name)
{
    host_call_args a = {fn, arg};
    dp__stream_push_named(dev->stream, run_host_call, name, &a, sizeof a);
}
