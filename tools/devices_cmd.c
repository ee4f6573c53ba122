/* dptrain devices: what this machine offers, and with --bench how fast each
 * device multiplies matrices and copies memory. This is d2l's "CPU vs GPU
 * hardware" comparison (seed 004), measured through the library instead of
 * quoted from a data sheet: the matmul is dp_linear and the copies are
 * dp_broadcast, run on the devices' own workers exactly as training runs. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What dptrain devices reads. */
typedef struct devices_args {
    const char *devices;
    int threads;
    bool bench;
    float seconds;
} devices_args;

static int run_devices(int argc, char **argv);

const cli_command *cli_devices(void)
{
    static dp_option flags[4];
    static const devices_args defaults = {.devices = "auto", .seconds = 8.0f};
    static cli_command c = {
        .name = "devices",
        .summary = "list the devices, and with --bench measure them",
        .usage = "dptrain devices [options]",
        .about = "Lists the CPU, the GPUs and the devices that --devices would open; with\n"
                 "--bench also measures each device: matmul GFLOP/s (1024 x 1024 x 1024\n"
                 "float32), the same on every device at once, and copy GB/s (64 MiB)\n"
                 "within a device and between the first two.",
        .options = flags,
        .defaults = &defaults,
        .run = run_devices};
    if (c.noptions == 0) {
        int n = 0;
        flags[n++] = CLI_LIKE(devices_args, devices, "devices", NULL);
        flags[n++] = CLI_LIKE(devices_args, threads, "threads", NULL);
        flags[n++] = (dp_option){CLI_FIELD(devices_args, bench, "bench"), .flag = "--bench",
                                 .type = DP_OPTION_BOOL, .on = true, .help = "measure the devices"};
        flags[n++] = (dp_option){CLI_FIELD(devices_args, seconds, "seconds"),
                                 .flag = "--seconds",
                                 .metavar = "S",
                                 .type = DP_OPTION_FLOAT,
                                 .lo = 0,
                                 .lo_open = true,
                                 .hi = 3600,
                                 .help = "time budget of `bench` in seconds, split among its "
                                         "measurements (warm-ups come on top)"};
        c.noptions = n;
    }
    return &c;
}

/* Whether dev is a slice of the host's cores (its backend says so). */
static bool shares_cores(dp_device_t *dev)
{
    int b = dp_device_backend(dev);
    dp_backend_info info;
    return b < 0 || dp_backend_info_get(b, &info) < 0 || info.shares_cores;
}

/* ---- the host's CPU --------------------------------------------------------- */

typedef struct cpu_info {
    char model[128]; /* /proc/cpuinfo "model name", or "unknown" */
    int cores;       /* online logical CPUs */
    bool avx512, avx2;
} cpu_info;

/* True if `word` is one of the space-separated words of `list`. */
static bool has_word(const char *list, const char *word)
{
    size_t len = strlen(word);
    for (const char *p = strstr(list, word); p; p = strstr(p + 1, word)) {
        bool starts = p == list || p[-1] == ' ' || p[-1] == '\t';
        bool ends = p[len] == '\0' || p[len] == ' ' || p[len] == '\n' || p[len] == '\t';
        if (starts && ends)
            return true;
    }
    return false;
}

/* The value after "key<spaces>: " of a cpuinfo line, or NULL. */
static const char *cpuinfo_value(const char *line, const char *key)
{
    size_t len = strlen(key);
    if (strncmp(line, key, len) != 0)
        return NULL;
    const char *p = line + len;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static void cpu_info_read(cpu_info *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->model, sizeof c->model, "unknown");
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->cores = n > 0 ? (int)n : 1;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    /* Flags lines run to a few thousand characters. */
    char line[8192];
    bool have_model = false, have_flags = false;
    while ((!have_model || !have_flags) && fgets(line, sizeof line, f)) {
        const char *v;
        if (!have_model && (v = cpuinfo_value(line, "model name")) && *v && *v != '\n') {
            snprintf(c->model, sizeof c->model, "%.*s", (int)strcspn(v, "\n"), v);
            have_model = true;
        } else if (!have_flags && (v = cpuinfo_value(line, "flags"))) {
            c->avx512 = has_word(v, "avx512f");
            c->avx2 = has_word(v, "avx2");
            have_flags = true;
        }
    }
    fclose(f);
}

/* ---- timing ----------------------------------------------------------------- */

enum {
    MATMUL_DIM = 1024,
    COPY_FLOATS = 16 << 20, /* 64 MiB */
    MIN_REPS = 3,
    MAX_REPS = 500,
};

/* One repetition of a measurement: issue the work and wait for it. */
typedef int (*rep_fn)(void *ctx);

typedef struct timing {
    int reps;
    double median; /* seconds per repetition */
} timing;

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs `rep` once untimed (oneDNN builds its primitive, pages are touched),
 * then times repetitions one by one until `budget` seconds have passed, with
 * at least MIN_REPS and at most MAX_REPS, and keeps their median: the median
 * shrugs off the odd repetition that another process on the machine slowed. */
static int time_reps(rep_fn rep, void *ctx, double budget, timing *out)
{
    double secs[MAX_REPS];
    int rc = rep(ctx);
    if (rc < 0)
        return rc;
    int reps = 0;
    double start = dp_time_seconds();
    while (reps < MAX_REPS && (reps < MIN_REPS || dp_time_seconds() - start < budget)) {
        double t0 = dp_time_seconds();
        if ((rc = rep(ctx)) < 0)
            return rc;
        secs[reps++] = dp_time_seconds() - t0;
    }
    qsort(secs, (size_t)reps, sizeof *secs, compare_double);
    out->reps = reps;
    out->median = reps % 2 ? secs[reps / 2] : 0.5 * (secs[reps / 2 - 1] + secs[reps / 2]);
    return 0;
}

/* x (1024, 1024) times w (1024, 1024) on devices [first, first + count),
 * all issued before any is waited for. Outputs belong to the tape, which
 * each repetition empties. */
typedef struct matmul_bench {
    dp_tape_t *tape;
    dp_device_t **devs;
    dp_tensor_t **x, **w;
    int first, count;
} matmul_bench;

static int matmul_rep(void *ctx)
{
    matmul_bench *m = ctx;
    int rc = 0;
    for (int k = m->first; rc == 0 && k < m->first + m->count; k++) {
        dp_tensor_t *y;
        rc = dp_linear(&y, m->x[k], m->w[k], NULL, DP_WEIGHT_IN_OUT);
    }
    /* One device: wait for it alone; all of them: dp_waitall, as a training
     * step across devices ends. */
    int sync = m->count == 1 ? dp_device_sync(m->devs[m->first]) : dp_waitall();
    dp_tape_reset(m->tape);
    rc = rc < 0 ? rc : sync;
    return rc;
}

/* dst = src with dp_broadcast; the copy runs on dst's device, and src's
 * device is ordered after it (it may not write src before the copy read it). */
typedef struct copy_bench {
    dp_tensor_t *src, *dst;
} copy_bench;

static int copy_rep(void *ctx)
{
    copy_bench *c = ctx;
    int rc = dp_broadcast(&c->dst, 1, c->src);
    int sync_dst = dp_device_sync(dp_tensor_device(c->dst));
    int sync_src = dp_device_sync(dp_tensor_device(c->src));
    return rc < 0 ? rc : sync_dst < 0 ? sync_dst : sync_src;
}

static void print_row(const char *what, int threads, const timing *t, double rate, const char *unit)
{
    char th[16];
    if (threads > 0)
        snprintf(th, sizeof th, "%d", threads);
    else
        snprintf(th, sizeof th, "-");
    printf("  %-24s %7s %6d %10.2f %10.2f %s\n", what, th, t->reps, t->median * 1e3, rate, unit);
    fflush(stdout);
}

/* Kernel threads of a device that shares the host's cores (a CPU device);
 * 0 (printed "-") for one of its own hardware (a GPU). */
static int device_threads(dp_device_t *dev)
{
    return shares_cores(dev) ? dp_device_threads(dev) : 0;
}

/* Allocates the operands, then runs and prints every measurement. */
static int bench_devices(dp_device_t **devs, int n, double seconds)
{
    dp_tensor_t *x[DP_MAX_DEVICES] = {0}, *w[DP_MAX_DEVICES] = {0};
    dp_tensor_t *src[DP_MAX_DEVICES] = {0}, *dst[DP_MAX_DEVICES] = {0};
    dp_tape_t *tape = NULL;
    int rc = dp_tape_init(&tape, false);
    const int64_t mat_shape[2] = {MATMUL_DIM, MATMUL_DIM}, copy_shape[1] = {COPY_FLOATS};
    for (int k = 0; rc == 0 && k < n; k++) {
        if ((rc = dp_tensor_new(&x[k], devs[k], DP_F32, 2, mat_shape)) < 0 ||
            (rc = dp_tensor_new(&w[k], devs[k], DP_F32, 2, mat_shape)) < 0 ||
            (rc = dp_tensor_new(&src[k], devs[k], DP_F32, 1, copy_shape)) < 0 ||
            (rc = dp_tensor_new(&dst[k], devs[k], DP_F32, 1, copy_shape)) < 0)
            break;
        /* Plain numbers (no NaN or denormal slow paths), every page touched. */
        if ((rc = dp_tensor_fill(x[k], 0.5f)) < 0 || (rc = dp_tensor_fill(w[k], 0.25f)) < 0 ||
            (rc = dp_tensor_fill(src[k], 1.0f)) < 0 || (rc = dp_tensor_fill(dst[k], 0.0f)) < 0)
            break;
    }
    if (rc == 0)
        rc = dp_waitall();
    if (rc < 0)
        goto done;

    /* Each device alone, all at once, a copy within each device, and both
     * ways between the first two: the budget is split evenly among them. */
    int measurements = n + (n > 1) + n + 2 * (n > 1);
    double budget = seconds / measurements;
    double flops = 2.0 * MATMUL_DIM * MATMUL_DIM * MATMUL_DIM;
    double bytes = (double)COPY_FLOATS * sizeof(float);
    timing t;
    char what[64];

    printf("\n%-26s %7s %6s %10s %10s\n", "", "threads", "reps", "ms each", "rate");
    printf("matmul %dx%d by %dx%d float32 (dp_linear, %.2f GFLOP each)\n", MATMUL_DIM, MATMUL_DIM,
           MATMUL_DIM, MATMUL_DIM, flops * 1e-9);
    dp_tape_begin(tape);
    matmul_bench mb = {.tape = tape, .devs = devs, .x = x, .w = w, .count = 1};
    int total_threads = 0;
    for (int k = 0; rc == 0 && k < n; k++) {
        mb.first = k;
        if ((rc = time_reps(matmul_rep, &mb, budget, &t)) == 0)
            print_row(dp_device_name(devs[k]), device_threads(devs[k]), &t, flops / t.median * 1e-9,
                      "GFLOP/s");
        total_threads += device_threads(devs[k]);
    }
    if (rc == 0 && n > 1) {
        mb.first = 0;
        mb.count = n;
        if ((rc = time_reps(matmul_rep, &mb, budget, &t)) == 0) {
            snprintf(what, sizeof what, "all %d at once", n);
            print_row(what, total_threads, &t, n * flops / t.median * 1e-9, "GFLOP/s");
        }
    }
    dp_tape_end(tape);
    if (rc < 0)
        goto done;

    printf("copy %d MiB (dp_broadcast)\n", (int)(bytes / (1 << 20)));
    for (int k = 0; rc == 0 && k < n + 2 * (n > 1); k++) {
        /* k < n: within device k; then 0 -> 1 and 1 -> 0. */
        int from = k < n ? k : k - n, to = k < n ? k : 1 - (k - n);
        copy_bench cb = {.src = src[from], .dst = dst[to]};
        if ((rc = time_reps(copy_rep, &cb, budget, &t)) == 0) {
            snprintf(what, sizeof what, "%s -> %s", dp_device_name(devs[from]),
                     dp_device_name(devs[to]));
            print_row(what, 0, &t, bytes / t.median * 1e-9, "GB/s");
        }
    }
    if (rc == 0 && n == 1)
        printf("  (copies between devices need --devices 2 or more)\n");

done:
    dp_waitall();
    for (int k = 0; k < n; k++) {
        dp_tensor_free(x[k]);
        dp_tensor_free(w[k]);
        dp_tensor_free(src[k]);
        dp_tensor_free(dst[k]);
    }
    dp_tape_close(tape);
    return rc;
}

static int run_devices(int argc, char **argv)
{
    const cli_command *c = cli_devices();
    devices_args a = *(const devices_args *)c->defaults;
    bool help, given[4] = {false};
    int status = cli_parse(c, argc, argv, &a, given, &help, NULL, NULL, NULL);
    if (status || help) {
        if (help)
            cli_print_help(c, stdout);
        return status;
    }
    const char *spec = a.devices;
    int threads = a.threads;
    float seconds = a.seconds;
    bool bench = a.bench;
    if (given[cli_option_index(c, "--seconds")] && !bench) {
        fprintf(stderr, "dptrain: error: --seconds needs --bench\n");
        return 2;
    }

    dp_device_t *devs[DP_MAX_DEVICES];
    int n;
    int rc = dp_devices_open(devs, &n, spec, threads);
    if (rc < 0)
        return cli_fail(rc);

    cpu_info cpu;
    cpu_info_read(&cpu);
    const char *vector = "";
    if (cpu.avx512)
        vector = ", AVX-512";
    else if (cpu.avx2)
        vector = ", AVX2";
    printf("CPU: %s, %d core%s%s\n", cpu.model, cpu.cores, cpu.cores == 1 ? "" : "s", vector);
    /* Each backend whose devices are hardware of their own (the CPU line
     * above tells the cores that the others share). */
    for (int b = 0; b < dp_backend_count(); b++) {
        dp_backend_info info;
        if (dp_backend_info_get(b, &info) < 0 || info.shares_cores)
            continue;
        if (info.devices == 0) {
            printf("%ss: none (%s)\n", info.hardware, info.why_none);
            continue;
        }
        printf("%ss: %d\n", info.hardware, info.devices);
        for (int d = 0; d < info.devices; d++) {
            char what[320];
            if (dp_backend_describe(b, d, what, sizeof what) == 0)
                printf("  %s:%d %s\n", info.name, d, what);
        }
    }
    for (int k = 0; k < n; k++) {
        const char *dname = dp_device_name(devs[k]);
        int t = dp_device_threads(devs[k]);
        dp_backend_info info;
        if (!shares_cores(devs[k]) && dp_backend_info_get(dp_device_backend(devs[k]), &info) == 0)
            printf("%-6s %s\n", dname, info.hardware);
        else
            printf("%-6s %d kernel thread%s\n", dname, t, t == 1 ? "" : "s");
    }
    fflush(stdout);

    if (bench)
        rc = bench_devices(devs, n, seconds);
    dp_devices_close(devs, n);
    return rc < 0 ? cli_fail(rc) : 0;
}
