/* dptrain data: the training (or test) samples as the loader hands them to
 * the step, dumped as .npy (the tests read them) and drawn as a grid of
 * pictures with their class names (users look at their augmentation). */
#include "cli.h"

#include "dp/dp.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What dptrain data reads: the run's data options (train's own flags, so
 * the samples are the run's) and what to show of them. */
typedef struct data_args {
    dp_train_options o;
    int64_t epoch, count;
    const char *dump, *grid;
    bool test, bench;
} data_args;

/* The grid (data_grid.c): the samples as pictures, their class names
 * under them, into a PNG. */
int cli_data_grid(const dp_data_samples *s, const char *path);

static int run_data(int argc, char **argv);

/* train's options of the data (and the seed their draws come from). */
static bool is_data_option(const dp_option *opt)
{
    return opt->flag && (strcmp(opt->group, "data") == 0 || strcmp(opt->name, "seed") == 0);
}

const cli_command *cli_data(void)
{
    static dp_option flags[64];
    static data_args defaults;
    static cli_command c = {
        .name = "data",
        .summary = "the training samples as the model sees them (.npy, .png)",
        .usage = "dptrain data --dataset NAME --data DIR [--train-transform LIST] --dump "
                 "OUT.npy|--grid OUT.png|--bench [options]",
        .about = "Takes the first N samples of epoch E of the training set (--test: the test\n"
                 "set) in the order the loader hands them to a run's step, with the run's\n"
                 "shuffle, transforms, augmentation and normalisation, drawn from --seed as\n"
                 "dptrain train draws them. --dump writes them as float32 N x C x H x W\n"
                 "(np.load reads it) and their labels as int64 beside it, OUT.labels.npy\n"
                 "(OUT.npy's name with .npy replaced); --grid draws them as pictures in rows\n"
                 "of 8, each under its class name (normalisation undone where it is\n"
                 "given, so the colours are the image's). --bench decodes and transforms\n"
                 "the --count samples on the loader's --workers as a run would, writes\n"
                 "nothing, and prints images/s (wall clock, from opening the data) and\n"
                 "CPU ms per image (user + system time of all threads); alone, it keeps\n"
                 "no sample (each batch dropped when the next is taken), so any count\n"
                 "runs in the loader's memory.",
        .options = flags,
        .defaults = &defaults,
        .run = run_data};
    if (c.noptions == 0) {
        int n = 0, count;
        const dp_option *all = dp_train_option_list(&count);
        for (int i = 0; i < count; i++) {
            if (!is_data_option(&all[i]))
                continue;
            flags[n] = all[i];
            flags[n++].offset += offsetof(data_args, o);
        }
        flags[n++] = (dp_option){CLI_FIELD(data_args, epoch, "epoch"),
                                 .flag = "--epoch",
                                 .metavar = "E",
                                 .type = DP_OPTION_I64,
                                 .imin = 0,
                                 .imax = 999,
                                 .lo = 0,
                                 .hi = 999,
                                 .help = "the epoch whose draws are shown, from 0"};
        flags[n++] = (dp_option){CLI_FIELD(data_args, count, "count"),
                                 .flag = "--count",
                                 .metavar = "N",
                                 .type = DP_OPTION_I64,
                                 .imin = 1,
                                 /* ImageNet's 1.28 million and more for --bench;
                                  * --dump and --grid hold theirs (count x C x H x W
                                  * floats), refused with one line where they do
                                  * not fit. */
                                 .imax = INT32_MAX,
                                 .lo = 1,
                                 .hi = INT32_MAX,
                                 .help = "how many samples, from the epoch's first (at most "
                                         "the set's)"};
        flags[n++] = (dp_option){CLI_FIELD(data_args, test, "test"), .flag = "--test",
                                 .type = DP_OPTION_BOOL, .on = true,
                                 .help = "the test set, with the test transforms [the training "
                                         "set]"};
        flags[n++] = (dp_option){CLI_FIELD(data_args, dump, "dump"), .flag = "--dump",
                                 .metavar = "OUT.npy", .type = DP_OPTION_TEXT,
                                 .help = "write the samples (float32 N x C x H x W) and "
                                         "OUT.labels.npy (int64 N) [none]"};
        flags[n++] = (dp_option){CLI_FIELD(data_args, grid, "grid"), .flag = "--grid",
                                 .metavar = "OUT.png", .type = DP_OPTION_TEXT,
                                 .help = "draw the samples with their class names [none]"};
        flags[n++] = (dp_option){CLI_FIELD(data_args, bench, "bench"), .flag = "--bench",
                                 .type = DP_OPTION_BOOL, .on = true,
                                 .help = "time the loader over the --count samples: images/s "
                                         "and CPU ms/image, nothing written"};
        c.noptions = n;
        dp_train_options_default(&defaults.o);
        defaults.count = 16;
    }
    return &c;
}

/* Refuses a path that cannot be written (its directory missing or not
 * writable, or a directory itself) before anything is decoded. */
static int check_output(const char *flag, const char *path, const char *ext)
{
    size_t len = strlen(path), el = strlen(ext);
    if (len <= el || strcmp(path + len - el, ext) != 0)
        return cli_bad_value(flag, path,
                             ext[1] == 'n' && ext[2] == 'p' ? "a file name ending in .npy"
                                                            : "a file name ending in .png");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_bad_value(flag, path, "a file, not a directory");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_bad_value(flag, path, "a file in a directory that exists");
    if (access(dir, W_OK) != 0) {
        char why[PATH_MAX + 64];
        snprintf(why, sizeof why, "a file in a writable directory (%s: %s)", dir, strerror(errno));
        return cli_bad_value(flag, path, why);
    }
    return 0;
}

/* OUT.npy's labels: OUT.labels.npy. */
static void labels_path(const char *dump, char *out, size_t size)
{
    snprintf(out, size, "%.*s.labels.npy", (int)(strlen(dump) - 4), dump);
}

static int write_dump(const dp_data_samples *s, const char *path)
{
    dp_npy x = {.dtype = DP_NPY_F32,
                .ndim = 4,
                .shape = {s->n, s->chw[0], s->chw[1], s->chw[2]},
                .data = s->x,
                .size = (size_t)(s->n * s->chw[0] * s->chw[1] * s->chw[2]) * sizeof(float)};
    int64_t *labels = malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *labels);
    if (!labels)
        return DP_ENOMEM;
    for (int64_t i = 0; i < s->n; i++)
        labels[i] = s->labels[i];
    dp_npy y = {.dtype = DP_NPY_I64,
                .ndim = 1,
                .shape = {s->n},
                .data = labels,
                .size = (size_t)s->n * sizeof *labels};
    char lpath[PATH_MAX + 16];
    labels_path(path, lpath, sizeof lpath);
    int rc = dp_npy_write(path, &x);
    if (rc == 0)
        rc = dp_npy_write(lpath, &y);
    free(labels);
    if (rc == 0)
        printf("wrote %s: %lld samples of %lldx%lldx%lld (float32), and their labels to %s\n", path,
               (long long)s->n, (long long)s->chw[0], (long long)s->chw[1], (long long)s->chw[2],
               lpath);
    return rc;
}

/* Wall clock and this process's CPU time (all threads, user + system). */
static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           1e-6 * (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

static int run_data(int argc, char **argv)
{
    data_args a;
    memcpy(&a, cli_data()->defaults, sizeof a);
    bool help;
    int status = cli_parse(cli_data(), argc, argv, &a, NULL, &help, NULL, NULL, NULL);
    if (status || help) {
        if (help)
            cli_print_help(cli_data(), stdout);
        return status;
    }
    if (!a.dump && !a.grid && !a.bench) {
        fprintf(stderr, "dptrain: error: data needs --dump OUT.npy, --grid OUT.png or --bench\n");
        return 2;
    }
    if (a.dump && (status = check_output("--dump", a.dump, ".npy")) != 0)
        return status;
    if (a.grid && (status = check_output("--grid", a.grid, ".png")) != 0)
        return status;
    dp_data_samples s;
    double wall0 = now_s(), cpu0 = cpu_s();
    /* --bench alone keeps no sample: any count in the loader's memory. */
    bool keep = a.dump || a.grid;
    int rc = keep ? dp_train_data_samples(&a.o, a.test, a.epoch, a.count, &s)
                  : dp_train_data_stream(&a.o, a.test, a.epoch, a.count, &s);
    double wall = now_s() - wall0, cpu = cpu_s() - cpu0;
    if (rc < 0)
        return cli_fail(rc);
    if (a.bench && s.n > 0)
        printf("bench: %lld samples of %lldx%lldx%lld in %.3f s: %.1f images/s, %.3f ms CPU per "
               "image (%.2f s CPU)\n",
               (long long)s.n, (long long)s.chw[0], (long long)s.chw[1], (long long)s.chw[2], wall,
               (double)s.n / wall, 1e3 * cpu / (double)s.n, cpu);
    if (s.skipped)
        fprintf(stderr, "dptrain: warning: %lld bad images skipped\n", (long long)s.skipped);
    if (a.dump)
        rc = write_dump(&s, a.dump);
    if (rc == 0 && a.grid) {
        rc = cli_data_grid(&s, a.grid);
        if (rc == 0)
            printf("wrote %s: %lld samples with their class names\n", a.grid, (long long)s.n);
    }
    dp_data_samples_free(&s);
    return rc < 0 ? cli_fail(rc) : 0;
}
