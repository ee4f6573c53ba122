/* This process's resident memory, for the metrics of each epoch: the peak
 * (VmHWM) and the current size, both from /proc. */
#include "dp/train_util.h"

#include <stdio.h>
#include <unistd.h>

double dp_peak_rss_mb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1.0;
    char line[256];
    double mb = -1.0;
    while (fgets(line, sizeof line, f)) {
        long long kib;
        if (sscanf(line, "VmHWM: %lld kB", &kib) == 1) {
            mb = (double)kib / 1024.0;
            break;
        }
    }
    fclose(f);
    return mb;
}

double dp_rss_mb(void)
{
    /* /proc/self/statm: total program size, then resident pages. */
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1.0;
    long long size, resident;
    int got = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    if (got != 2 || page <= 0)
        return -1.0;
    return (double)resident * (double)page / (1024.0 * 1024.0);
}
