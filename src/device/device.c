/* Opening devices by name (the backend whose entry the name's prefix
 * names, backends.c), the registry behind dp_waitall, events, and the
 * caching allocator. */
#include "device/device.h"

#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static dp_device_t *registry[DP_MAX_DEVICES];

static int parse_name(const char *name, const dp__device_ops **ops, int *index)
{
    const char *colon = strchr(name, ':');
    size_t kind_len = colon ? (size_t)(colon - name) : strlen(name);
    long idx = 0;
    if (colon) {
        char *end;
        errno = 0;
        idx = strtol(colon + 1, &end, 10);
        if (errno || *end != '\0' || end == colon + 1 || idx < 0 || idx >= DP_MAX_DEVICES) {
            DP_ERROR("bad device name '%s': the index must be 0..%d", name, DP_MAX_DEVICES - 1);
            return DP_EINVAL;
        }
    }
    const dp__backend *b = dp__backend_named(name, kind_len);
    if (!b) {
        char names[128];
        DP_ERROR("unknown device '%s' (expected %s)", name, dp__backend_names(names, sizeof names));
        return DP_EINVAL;
    }
    *ops = dp__backend_ops(b);
    if (!*ops) {
        DP_ERROR("device '%s': %s", name, b->why_none());
        return DP_ENOTSUP;
    }
    *index = (int)idx;
    return 0;
}

static int open_device(dp_device_t **out, const dp__device_ops *ops, int index, int threads)
{
    dp_device_t *dev = dp__calloc(1, sizeof *dev);
    if (!dev)
        return DP_ENOMEM;
    dev->ops = ops;
    dev->index = index;
    dev->threads = threads > 0 ? threads : dp__cpu_count();
    snprintf(dev->name, sizeof dev->name, "%s:%d", ops->kind, index);
    pthread_mutex_init(&dev->cache.mu, NULL);
    dev->caps = ops->caps;
    int rc = ops->open(dev);
    if (rc < 0) {
        pthread_mutex_destroy(&dev->cache.mu);
        dp__free(dev);
        return rc;
    }
    pthread_mutex_lock(&registry_mu);
    int slot = -1;
    for (int i = 0; i < DP_MAX_DEVICES; i++) {
        if (!registry[i]) {
            registry[i] = dev;
            slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&registry_mu);
    if (slot < 0) {
        DP_ERROR("too many open devices (at most %d)", DP_MAX_DEVICES);
        ops->close(dev);
        pthread_mutex_destroy(&dev->cache.mu);
        dp__free(dev);
        return DP_EINVAL;
    }
    *out = dev;
    return 0;
}

int dp_device_open(dp_device_t **out, const char *name, int threads)
{
    const dp__device_ops *ops;
    int index;
    if (threads < 0) {
        DP_ERROR("device '%s': threads must be >= 0, got %d", name, threads);
        return DP_EINVAL;
    }
    DP_TRY(parse_name(name, &ops, &index));
    return open_device(out, ops, index, threads);
}

int dp__device_open_meta(dp_device_t **out)
{
    return open_device(out, &dp__meta_ops, 0, 1);
}

static void cache_drain(dp_device_t *dev)
{
    dp__block_cache *c = &dev->cache;
    for (size_t i = 0; i < c->nsizes; i++) {
        for (size_t j = 0; j < c->lists[i].count; j++)
            dev->ops->free(dev, c->lists[i].blocks[j]);
        dp__free(c->lists[i].blocks);
    }
    c->nsizes = 0;
    c->cached_bytes = 0;
}

/* Waits until every open device's queue, and its communication path's,
 * is empty: then no queued command waits on a stream about to be freed
 * (another device's queue may hold a wait on this one's last command). The
 * registry stays locked, so that no device is closed meanwhile; queued
 * commands never take that lock. */
static void drain_all_queues(void)
{
    pthread_mutex_lock(&registry_mu);
    for (int i = 0; i < DP_MAX_DEVICES; i++) {
        if (!registry[i])
            continue;
        dp_device_t *c = dp__comm_path_if_open(registry[i]);
        if (c)
            dp_device_sync(c);
        dp_device_sync(registry[i]);
    }
    pthread_mutex_unlock(&registry_mu);
}

void dp_device_close(dp_device_t *dev)
{
    if (!dev)
        return;
    drain_all_queues();
    dp__comm_path_close(dev);
    dp_device_sync(dev);
    pthread_mutex_lock(&registry_mu);
    for (int i = 0; i < DP_MAX_DEVICES; i++)
        if (registry[i] == dev)
            registry[i] = NULL;
    pthread_mutex_unlock(&registry_mu);
    dev->ops->close(dev);
    cache_drain(dev);
    pthread_mutex_destroy(&dev->cache.mu);
    dp__free(dev);
}

const char *dp_device_name(const dp_device_t *dev)
{
    return dev->name;
}

bool dp_device_has(const dp_device_t *dev, dp_device_cap cap)
{
    return (dev->caps & (unsigned)cap) == (unsigned)cap;
}

int dp_device_threads(const dp_device_t *dev)
{
    return dev->threads;
}

int dp_device_sync(dp_device_t *dev)
{
    return dp__stream_wait(dev->stream, dp__stream_last(dev->stream));
}

int dp__stream_wait_seconds(dp__stream *s, uint64_t seq, double seconds, const char *what)
{
    if (!(seconds >= 0)) {
        DP_ERROR("%s: a wait of %g seconds (give 0 or more)", what, seconds);
        return DP_EINVAL;
    }
    if (isinf(seconds))
        return dp__stream_wait(s, seq);
    return dp__stream_wait_for(s, seq, seconds);
}

int dp_device_sync_for(dp_device_t *dev, double seconds)
{
    return dp__stream_wait_seconds(dev->stream, dp__stream_last(dev->stream), seconds,
                                   "dp_device_sync_for");
}

int dp_waitall(void)
{
    dp_device_t *devs[DP_MAX_DEVICES];
    int n = 0;
    pthread_mutex_lock(&registry_mu);
    for (int i = 0; i < DP_MAX_DEVICES; i++)
        if (registry[i])
            devs[n++] = registry[i];
    pthread_mutex_unlock(&registry_mu);
    int first = 0;
    for (int i = 0; i < n; i++) {
        int rc = dp_device_sync(devs[i]);
        if (rc < 0 && first == 0)
            first = rc;
    }
    return first;
}

int dp_devices_sync(dp_device_t *const *devs, int n)
{
    int first = 0;
    for (int i = 0; i < n; i++) {
        dp_device_t *c = dp__comm_path_if_open(devs[i]);
        int rc = c ? dp_device_sync(c) : 0;
        int rc_dev = dp_device_sync(devs[i]);
        if (first == 0)
            first = rc < 0 ? rc : rc_dev;
    }
    return first;
}

int dp_device_take_error(dp_device_t *dev)
{
    dp_device_t *c = dp__comm_path_if_open(dev);
    int rc_comm = c ? dp__stream_take_error(c->stream) : 0;
    int rc = dp__stream_take_error(dev->stream);
    return rc < 0 ? rc : rc_comm;
}

dp_event dp_event_record(dp_device_t *dev)
{
    dp_event ev = {dev, dp__stream_last(dev->stream)};
    return ev;
}

int dp_stream_wait_event(dp_device_t *dev, dp_event ev)
{
    if (!ev.dev)
        return 0;
    dp__stream_wait_other(dev->stream, ev.dev->stream, ev.seq);
    return 0;
}

int dp_event_wait(dp_event ev)
{
    if (!ev.dev)
        return 0;
    return dp__stream_wait(ev.dev->stream, ev.seq);
}

/* ---- caching allocator ---------------------------------------------------- */

/* Rounds sizes so that a partial last batch reuses a nearby block class. */
static size_t round_size(size_t bytes)
{
    if (bytes <= 4096)
        return (bytes + 255) & ~(size_t)255;
    return (bytes + 65535) & ~(size_t)65535;
}

void *dp__device_alloc(dp_device_t *dev, size_t bytes)
{
    size_t size = round_size(bytes);
    dp__block_cache *c = &dev->cache;
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nsizes; i++) {
        if (c->lists[i].bytes == size && c->lists[i].count > 0) {
            void *p = c->lists[i].blocks[--c->lists[i].count];
            c->cached_bytes -= size;
            pthread_mutex_unlock(&c->mu);
            return p;
        }
    }
    pthread_mutex_unlock(&c->mu);
    void *p = dev->ops->alloc(dev, size);
    if (!p) {
        /* Give the cached blocks back and try once more. */
        pthread_mutex_lock(&c->mu);
        cache_drain(dev);
        pthread_mutex_unlock(&c->mu);
        p = dev->ops->alloc(dev, size);
        if (!p)
            DP_ERROR("%s: out of memory allocating %zu bytes", dev->name, size);
    }
    return p;
}

void dp__device_release(dp_device_t *dev, void *p, size_t bytes)
{
    if (!p)
        return;
    size_t size = round_size(bytes);
    dp__block_cache *c = &dev->cache;
    pthread_mutex_lock(&c->mu);
    struct dp__block_list *list = NULL;
    for (size_t i = 0; i < c->nsizes; i++)
        if (c->lists[i].bytes == size)
            list = &c->lists[i];
    if (!list && c->nsizes < DP_COUNTOF(c->lists)) {
        list = &c->lists[c->nsizes++];
        memset(list, 0, sizeof *list);
        list->bytes = size;
    }
    if (list && list->count == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 8;
        void **blocks = realloc(list->blocks, cap * sizeof *blocks);
        if (blocks) {
            list->blocks = blocks;
            list->cap = cap;
        }
    }
    if (list && list->count < list->cap) {
        list->blocks[list->count++] = p;
        c->cached_bytes += size;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    pthread_mutex_unlock(&c->mu);
    dev->ops->free(dev, p);
}

typedef struct release_args {
    dp_device_t *dev;
    void *p;
    size_t bytes;
} release_args;

static int run_release(void *p, void *ctx)
{
    release_args *a = p;
    (void)ctx;
    dp__device_release(a->dev, a->p, a->bytes);
    return 0;
}

void dp__device_release_later(dp_device_t *dev, void *p, size_t bytes)
{
    if (!p)
        return;
    release_args a = {dev, p, bytes};
    dp__stream_push(dev->stream, run_release, &a, sizeof a);
}

/* ---- the free mutex (device.h) ------------------------------------------------ */

static pthread_mutex_t free_mu = PTHREAD_MUTEX_INITIALIZER;

void dp__device_free_lock(void)
{
    pthread_mutex_lock(&free_mu);
}

void dp__device_free_unlock(void)
{
    pthread_mutex_unlock(&free_mu);
}
