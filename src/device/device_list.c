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
        for (int j = 0; j < n; j++) {
            if (strcmp(names[j], names[n]) == 0) {
                DP_ERROR("`devices` %s: %s is named twice", spec, names[n]);
                return DP_EINVAL;
            }
        }
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

/* The CPU count `auto` sees: 0 for the machine's own (dp__cpu_count). */
static int cpus_seen;

void dp__devices_see_cpus(int n)
{
    cpus_seen = n;
}

int dp_devices_open(dp_device_t **devs, int *n_out, const char *spec, int threads)
{
    char names[DP_MAX_DEVICES][32];
    int n;
    int cores = cpus_seen > 0 ? cpus_seen : dp__cpu_count();
    int gpus = DP_MIN(dp_cuda_device_count(), DP_MAX_DEVICES);
    if (strcmp(spec, "auto") == 0 && gpus > 0) {
        /* Every GPU. */
        n = gpus;
        for (int k = 0; k < n; k++)
            snprintf(names[k], sizeof names[k], "cuda:%d", k);
    } else if (strcmp(spec, "auto") == 0) {
        /* One single-threaded device per core: bench/scaling.sh measures
         * this split against one device with every core. A machine with
         * more cores than the library holds devices gets DP_MAX_DEVICES,
         * the cores shared among them. */
        n = DP_MIN(cores, DP_MAX_DEVICES);
        for (int k = 0; k < n; k++)
            snprintf(names[k], sizeof names[k], "cpu:%d", k);
    } else if (spec[0] >= '0' && spec[0] <= '9') {
        char *end;
        errno = 0;
        long v = strtol(spec, &end, 10);
        if (errno || *end != '\0' || v < 1 || v > DP_MAX_DEVICES) {
            DP_ERROR("`devices` %s: expected a count from 1 to %d, a list like cpu:0,cpu:1, or "
                     "auto",
                     spec, DP_MAX_DEVICES);
            return DP_EINVAL;
        }
        n = (int)v;
        /* The first N GPUs, or CPU devices where there are fewer (d2l's
         * try_gpu fallback; always CPU devices in a CPU-only build). */
        for (int k = 0; k < n; k++)
            snprintf(names[k], sizeof names[k], "%s:%d", n <= gpus ? "cuda" : "cpu", k);
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
    }
    *n_out = n;
    return 0;
}
