/* The array of backends (device/backend_list.h) and what is asked of it:
 * the entry a device name names, the names for messages, and the public
 * listing (dp_backend_info). */
#include "device/device.h"

#include "core/internal.h"

#include <stdio.h>
#include <string.h>

static const dp__backend *const backends[] = {
#define ENTRY(name) &dp__##name##_backend,
    DP__BACKEND_LIST(ENTRY)
#undef ENTRY
};
_Static_assert(DP_COUNTOF(backends) == DP__BACKEND_COUNT, "an entry for every backend");

const dp__backend *dp__backend_get(dp__backend_id id)
{
    DP_ASSERT((unsigned)id < DP__BACKEND_COUNT);
    return backends[id];
}

/* The tables of the backends loaded as modules, once loaded. */
static const dp__device_ops *_Atomic loaded[DP__BACKEND_COUNT];

bool dp__backend_built(const dp__backend *b)
{
    return b->ops || b->load;
}

const dp__device_ops *dp__backend_ops(const dp__backend *b)
{
    if (b->ops || !b->load)
        return b->ops;
    const dp__device_ops *ops = b->load();
    for (int i = 0; ops && i < DP__BACKEND_COUNT; i++)
        if (backends[i] == b)
            loaded[i] = ops;
    return ops;
}

void *dp__backend_symbol(dp__backend_id id, const char *name)
{
    const dp__backend *b = dp__backend_get(id);
    return b->symbol && dp__backend_ops(b) ? b->symbol(name) : NULL;
}

const dp__backend *dp__backend_named(const char *name, size_t len)
{
    for (int i = 0; i < DP__BACKEND_COUNT; i++)
        if (strlen(backends[i]->name) == len && strncmp(name, backends[i]->name, len) == 0)
            return backends[i];
    return NULL;
}

const char *dp__backend_names(char *buf, size_t size)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < DP__BACKEND_COUNT && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%s:N",
                                i == 0                       ? ""
                                : i == DP__BACKEND_COUNT - 1 ? " or "
                                                             : ", ",
                                backends[i]->name);
    return buf;
}

int dp_backend_count(void)
{
    return DP__BACKEND_COUNT;
}

int dp_backend_info_get(int i, dp_backend_info *out)
{
    if (i < 0 || i >= DP__BACKEND_COUNT) {
        DP_ERROR("backend %d: there are %d (0 to %d)", i, DP__BACKEND_COUNT, DP__BACKEND_COUNT - 1);
        return DP_EINVAL;
    }
    const dp__backend *b = backends[i];
    out->name = b->name;
    out->hardware = b->hardware;
    out->built = dp__backend_built(b);
    out->shares_cores = b->shares_cores;
    out->devices = out->built ? b->count() : 0;
    out->why_none = b->why_none();
    return 0;
}

int dp_backend_describe(int i, int index, char *buf, size_t size)
{
    dp_backend_info info;
    DP_TRY(dp_backend_info_get(i, &info));
    if (index < 0 || index >= info.devices) {
        DP_ERROR("%s:%d: no such device (%d here)", info.name, index, info.devices);
        return DP_EINVAL;
    }
    if (!backends[i]->describe) {
        snprintf(buf, size, "%s", info.hardware);
        return 0;
    }
    return backends[i]->describe(index, buf, size);
}

int dp_device_backend(const dp_device_t *dev)
{
    for (int i = 0; i < DP__BACKEND_COUNT; i++)
        if (backends[i]->ops == dev->ops || loaded[i] == dev->ops)
            return i;
    return -1;
}
