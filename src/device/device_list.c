/* Opening device lists: "2", "cpu:0,cpu:1", "auto" (dp_devices_open). */
#include "device/device.h"

#include "core/internal.h"

#include <errno.h>
#include <string.h>

void dp_devices_close(dp_device_t **devs, int n)
{
    for (int k = n - 1; k >= 0; k--) {
        dp_device_close(devs[k]);
        devs[k] = NULL;
    }
}

const char *dp_devices_str(dp_device_t *const *devs, int n, char *buf, size_t size)
{
    size_t off = (size_t)snprintf(buf, size, "[");
    for (int k = 0; k < n && off < size; k++)
        off +=
            (size_t)snprintf(buf + off, size - off, "%s%s", k ? ", " : "", dp_device_name(devs[k]));
    if (off < size)
        snprintf(buf + off, size - off, "]");
    return buf;
}

/* Splits "cpu:0,cpu:1" into names; returns the count or a negative code. */
static int split_list(const char *spec, char names[][32], int max)
{
    int n = 0;
    const char *p = spec;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0 || len >= 32) {
            DP_ERROR("`devices` %s: empty or overlong device name", spec);
            return DP_EINVAL;
        }
        if (n == max) {
            DP_ERROR("`devices` %s: more than %d devices", spec, max);
            return DP_EINVAL;
        }
        memcpy(names[n], p, len);
        names[n][len] = '\0';
        n++;
        p += len;
        if (*p == ',')
            p++;
        if (comma && *p == '\0') {
            DP_ERROR("`devices` %s: trailing comma", spec);
            return DP_EINVAL;
        }
    }
    if (n == 0) {
        DP_ERROR("`devices` is empty");
        return DP_EINVAL;
    }
    return n;
}

/* The backend that `--devices N` (n) or `auto` (n == 0) takes: the first
 * in the list's order with devices here, n of them for N; one whose devices
 * share the cores takes any n. Its device count for auto into *count. */
static const dp__backend *preferred(int n, int *count)
{
    for (int i = 0; i < DP__BACKEND_COUNT; i++) {
        const dp__backend *b = dp__backend_get((dp__backend_id)i);
        int have = dp__backend_built(b) ? b->count() : 0;
        if (have > 0 && (have >= n || b->shares_cores)) {
            *count = have;
            return b;
        }
    }
    return NULL;
}

/* "N": a count from 1 to DP_MAX_DEVICES into *n. */
static int parse_count(const char *spec, int *n)
{
    char *end;
    errno = 0;
    long v = strtol(spec, &end, 10);
    if (errno || *end != '\0' || v < 1 || v > DP_MAX_DEVICES) {
        DP_ERROR("`devices` %s: expected a count from 1 to %d, a list like cpu:0,cpu:1, or "
                 "auto",
                 spec, DP_MAX_DEVICES);
        return DP_EINVAL;
    }
    *n = (int)v;
    return 0;
}

int dp_devices_open(dp_device_t **devs, int *n_out, const char *spec, int threads)
{
    char names[DP_MAX_DEVICES][32];
    int n;
    int cores = dp__cpu_count();
    bool is_auto = strcmp(spec, "auto") == 0;
    if (is_auto || (spec[0] >= '0' && spec[0] <= '9')) {
        n = 0;
        if (!is_auto)
            DP_TRY(parse_count(spec, &n));
        int count;
        const dp__backend *b = preferred(n, &count);
        if (!b) {
            DP_ERROR("`devices` %s: no backend has %s device%s here", spec, n ? spec : "any",
                     n == 1 ? "" : "s");
            return DP_EINVAL;
        }
        /* auto: every device of the backend: every GPU, or one
         * single-threaded CPU device per core (bench/scaling.sh measures
         * this split against one device with every core). A machine with
         * more than the library holds gets DP_MAX_DEVICES, the cores shared
         * among them. N: the first N (d2l's try_gpu, falling back to CPU
         * devices where there are fewer GPUs). */
        if (n == 0)
            n = DP_MIN(count, DP_MAX_DEVICES);
        for (int k = 0; k < n; k++)
            snprintf(names[k], sizeof names[k], "%s:%d", b->name, k);
    } else {
        n = split_list(spec, names, DP_MAX_DEVICES);
        if (n < 0)
            return n;
    }
    int per_device = threads > 0 ? threads : DP_MAX(1, cores / n);
    /* A device's team of kernel threads larger than the CPUs that can run
     * it waits on itself at every barrier (1024 threads on 2 CPUs ran 250
     * times slower). Allowed, for measurements, but said. Several devices
     * of one thread on fewer cores are data parallelism played out on a
     * small machine, and are let be. */
    if (per_device > cores)
        DP_WARN("%d kernel threads per device, more than the %d CPUs this process may use: "
                "kernels run far slower when threads outnumber CPUs",
                per_device, cores);
    for (int k = 0; k < n; k++) {
        int rc = dp_device_open(&devs[k], names[k], per_device);
        if (rc < 0) {
            dp_devices_close(devs, k);
            return rc;
        }
        /* Asked of the opened devices, not of the text: "cpu" is cpu:0. */
        for (int j = 0; j < k; j++) {
            if (strcmp(dp_device_name(devs[j]), dp_device_name(devs[k])) == 0) {
                if (strcmp(names[j], names[k]) == 0)
                    DP_ERROR("`devices` %s: %s is named twice", spec, names[k]);
                else
                    DP_ERROR("`devices` %s: %s and %s are the same device, %s", spec, names[j],
                             names[k], dp_device_name(devs[k]));
                dp_devices_close(devs, k + 1);
                return DP_EINVAL;
            }
        }
    }
    *n_out = n;
    return 0;
}
