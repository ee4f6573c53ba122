/* A device's communication path: a second stream, with its own worker, on
 * the same device and memory, opened on first use and closed with the
 * device. src/comm/ sums gradient buckets there while the device's own
 * worker goes on with the backward pass (PyTorch's DDP runs its allreduces
 * on a communication stream the same way); events order the two. */
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
