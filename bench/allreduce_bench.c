/* bench_allreduce: dp_allreduce_sum, naive vs ring, across CPU devices.
 *
 * usage: bench_allreduce [--devices 2,4] [--mb 1,10,100] [--seconds S]
 *
 * For each device count and buffer size (MB = 10^6 bytes), opens that many
 * CPU devices with one kernel thread each, puts one float buffer of the size
 * on each, checks once that both algorithms leave every buffer holding the
 * sum, then times the two alternately (naive, ring, naive, ring, ...) so
 * that drift in machine speed hits both alike, each repetition enqueued and
 * waited for with dp_waitall. Prints the median time and the "algorithm
 * bandwidth" (buffer bytes / seconds, as nccl-tests' algbw).
 *
 * Only the public API is used: this is what a program built on dptrain sees. */
#include "dp/dp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CASES = 16, MIN_REPS = 5, MAX_REPS = 200 };

static const char usage[] =
    "usage: bench_allreduce [--devices 2,4] [--mb 1,10,100] [--seconds S]\n"
    "  --devices LIST   device counts, comma-separated [2,4]\n"
    "  --mb LIST        buffer sizes in MB (10^6 bytes), comma-separated [1,10,100]\n"
    "  --seconds S      timing budget per device count and size, split between\n"
    "                   the two algorithms (at least 5 repetitions each) [1]\n";

/* Parses "2,4" into positive integers; returns the count, or -1. */
static int parse_list(const char *s, long *out, int max, long hi)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || v < 1 || v > hi || n == max || (*end && *end != ','))
            return -1;
        out[n++] = v;
        s = *end ? end + 1 : end;
    }
    return n > 0 ? n : -1;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One allreduce, enqueued and waited for; returns seconds or a negative code. */
static double time_allreduce(dp_tensor_t **bufs, int n, dp_allreduce_algo algo, int *rc)
{
    double t0 = dp_time_seconds();
    *rc = dp_allreduce_sum(bufs, n, algo);
    int wait = dp_waitall();
    if (*rc == 0)
        *rc = wait;
    return dp_time_seconds() - t0;
}

/* Buffer k holds k + 1; after the allreduce every element of every buffer
 * must be 1 + 2 + ... + n. Leaves the buffers zero (the timed runs then add
 * zeros, so values never overflow). */
static int check_sum(dp_tensor_t **bufs, int n, int64_t len, dp_allreduce_algo algo, float *host)
{
    int rc = 0;
    for (int k = 0; rc == 0 && k < n; k++)
        rc = dp_tensor_fill(bufs[k], (float)(k + 1));
    if (rc == 0)
        time_allreduce(bufs, n, algo, &rc);
    float want = (float)(n * (n + 1) / 2);
    for (int k = 0; rc == 0 && k < n; k++) {
        if ((rc = dp_tensor_to_host(bufs[k], host, (size_t)len * sizeof *host)) < 0)
            break;
        for (int64_t i = 0; i < len; i++) {
            if (host[i] != want) {
                fprintf(stderr, "bench_allreduce: %s: buffer %d element %lld is %g, not %g\n",
                        algo == DP_ALLREDUCE_RING ? "ring" : "naive", k, (long long)i,
                        (double)host[i], (double)want);
                return DP_EINVAL;
            }
        }
    }
    for (int k = 0; rc == 0 && k < n; k++)
        rc = dp_tensor_fill(bufs[k], 0.0f);
    return rc == 0 ? dp_waitall() : rc;
}

/* Times one device count and size; prints one row. */
static int bench_case(int ndev, long mb, double seconds)
{
    dp_device_t *devs[DP_MAX_DEVICES];
    dp_tensor_t *bufs[DP_MAX_DEVICES] = {0};
    char spec[16];
    int n, rc;
    snprintf(spec, sizeof spec, "%d", ndev);
    if ((rc = dp_devices_open(devs, &n, spec, 1)) < 0)
        return rc;
    int64_t len = mb * 1000000 / (int64_t)sizeof(float);
    float *host = malloc((size_t)len * sizeof *host);
    if (!host)
        rc = DP_ENOMEM;
    for (int k = 0; rc == 0 && k < n; k++)
        rc = dp_tensor_new(&bufs[k], devs[k], DP_F32, 1, &len);
    /* The check doubles as the warm-up: pages touched, workers awake. */
    if (rc == 0)
        rc = check_sum(bufs, n, len, DP_ALLREDUCE_NAIVE, host);
    if (rc == 0)
        rc = check_sum(bufs, n, len, DP_ALLREDUCE_RING, host);

    double naive[MAX_REPS], ring[MAX_REPS];
    int reps = 0;
    double start = dp_time_seconds();
    while (rc == 0 && reps < MAX_REPS && (reps < MIN_REPS || dp_time_seconds() - start < seconds)) {
        naive[reps] = time_allreduce(bufs, n, DP_ALLREDUCE_NAIVE, &rc);
        if (rc == 0)
            ring[reps] = time_allreduce(bufs, n, DP_ALLREDUCE_RING, &rc);
        reps += rc == 0;
    }
    if (rc == 0) {
        double tn = median(naive, reps), tr = median(ring, reps);
        double bytes = (double)len * sizeof(float);
        printf("%7d %8ld %10.3f %10.2f %10.3f %10.2f %11.2fx %6d\n", n, mb, tn * 1e3,
               bytes / tn * 1e-9, tr * 1e3, bytes / tr * 1e-9, tn / tr, reps);
        fflush(stdout);
    }
    for (int k = 0; k < n; k++)
        dp_tensor_free(bufs[k]);
    free(host);
    dp_devices_close(devs, n);
    return rc;
}

int main(int argc, char **argv)
{
    long ndevs[MAX_CASES] = {2, 4}, mbs[MAX_CASES] = {1, 10, 100};
    int nndev = 2, nmb = 3;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        char *end = NULL;
        if (v && strcmp(f, "--devices") == 0)
            nndev = parse_list(v, ndevs, MAX_CASES, DP_MAX_DEVICES);
        else if (v && strcmp(f, "--mb") == 0)
            nmb = parse_list(v, mbs, MAX_CASES, 4000);
        else if (v && strcmp(f, "--seconds") == 0)
            seconds = strtod(v, &end);
        else {
            fprintf(stderr, "bench_allreduce: unknown option or missing value: %s\n%s", f, usage);
            return 2;
        }
        if (nndev < 0 || nmb < 0 || (end && (*end || !(seconds > 0 && seconds <= 3600)))) {
            fprintf(stderr, "bench_allreduce: bad value for %s: %s\n%s", f, v, usage);
            return 2;
        }
        i++;
    }

    printf("allreduce (dp_allreduce_sum) across CPU devices, 1 kernel thread each;\n"
           "median of the timed repetitions, naive and ring alternated;\n"
           "GB/s = buffer bytes / seconds (algorithm bandwidth), MB = 10^6 bytes\n\n");
    printf("%7s %8s %10s %10s %10s %10s %12s %6s\n", "devices", "MB", "naive ms", "naive GB/s",
           "ring ms", "ring GB/s", "naive/ring", "reps");
    for (int d = 0; d < nndev; d++) {
        for (int s = 0; s < nmb; s++) {
            int rc = bench_case((int)ndevs[d], mbs[s], seconds);
            if (rc < 0) {
                fprintf(stderr, "bench_allreduce: %ld devices, %ld MB: %s%s%s\n", ndevs[d], mbs[s],
                        dp_strerror(rc), dp_last_error()[0] ? ": " : "", dp_last_error());
                return 1;
            }
        }
    }
    return 0;
}
