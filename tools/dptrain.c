/* dptrain - the command line. The only place that prints results to stdout
 * and turns status codes into exit statuses. */
#include "dp/dp.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_main[] =
    "usage: dptrain <command> [options]\n"
    "\n"
    "Trains convolutional networks data-parallel across devices.\n"
    "\n"
    "commands:\n"
    "  train     train a model on Fashion-MNIST (dptrain train --help)\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help\n"
    "  --version      print the version\n";

static const char usage_train[] =
    "usage: dptrain train [options]\n"
    "\n"
    "Trains a model on Fashion-MNIST, evaluates on the test set after every\n"
    "epoch, and ends with the line 'test acc: A, S sec/epoch on [DEVICES]'.\n"
    "\n"
    "options (default in brackets):\n"
    "  --model NAME         model: lenet [lenet]\n"
    "  --devices N|LIST     number of devices or a list like cpu:0 [1]\n"
    "  --threads N          kernel threads per device, 0 = all cores divided\n"
    "                       among the devices [0]\n"
    "  --batch-size B       global batch size [256]\n"
    "  --lr LR              learning rate [0.2]\n"
    "  --momentum M         SGD momentum [0]\n"
    "  --weight-decay WD    SGD weight decay [0]\n"
    "  --epochs E           epochs [10]\n"
    "  --seed S             seed for weights and shuffling [0]\n"
    "  --data DIR           directory with the four Fashion-MNIST IDX files,\n"
    "                       gzipped or not [/usr/share/datasets/fashion-mnist]\n"
    "  --metrics FILE       write one JSON object per epoch to FILE [none]\n"
    "  --log-steps          with --metrics, also one JSON object per step [off]\n"
    "  --plot FILE          draw the curves to FILE.png or FILE.svg [none]\n"
    "  --no-shuffle         take batches in file order [shuffle]\n"
    "  --limit-train N      use the first N training samples, 0 = all [0]\n"
    "  --limit-test N       use the first N test samples, 0 = all [0]\n"
    "  --progress MODE      progress bar on stderr: auto, always, never [auto]\n"
    "  -h, --help           show this help\n";

static void log_to_stderr(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level >= DP_LOG_WARN)
        fprintf(stderr, "dptrain: %s: %s\n", level == DP_LOG_ERROR ? "error" : "warning", msg);
    else if (level == DP_LOG_INFO && getenv("DP_PROFILE"))
        fprintf(stderr, "dptrain: %s\n", msg);
}

static int bad_value(const char *flag, const char *value, const char *want)
{
    fprintf(stderr, "dptrain: error: %s %s: %s\n", flag, value, want);
    return 2;
}

static int parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected an integer from %lld to %lld", (long long)lo,
                 (long long)hi);
        return bad_value(flag, s, want);
    }
    *out = v;
    return 0;
}

static int parse_float(const char *flag, const char *s, double lo, double hi, bool lo_open,
                       float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < lo || (lo_open && v == lo) ||
        v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected a number %s %g and <= %g", lo_open ? ">" : ">=", lo,
                 hi);
        return bad_value(flag, s, want);
    }
    *out = (float)v;
    return 0;
}

static int cmd_train(int argc, char **argv)
{
    dp_train_options o;
    dp_train_options_default(&o);
    const char *progress = "auto";
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            fputs(usage_train, stdout);
            return 0;
        }
        if (strcmp(f, "--log-steps") == 0) {
            o.log_steps = true;
            continue;
        }
        if (strcmp(f, "--no-shuffle") == 0) {
            o.shuffle = false;
            continue;
        }
        static const char *const with_value[] = {
            "--model",  "--devices", "--threads", "--batch-size",  "--lr",
            "--epochs", "--seed",    "--data",    "--metrics",     "--plot",
            "--momentum", "--weight-decay", "--limit-train", "--limit-test", "--progress"};
        bool known = false;
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            known |= strcmp(f, with_value[k]) == 0;
        if (!known) {
            fprintf(stderr, "dptrain: error: unknown option '%s' for train (see dptrain train --help)\n",
                    f);
            return 2;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "dptrain: error: %s needs a value\n", f);
            return 2;
        }
        const char *v = argv[++i];
        int64_t n;
        int rc = 0;
        if (strcmp(f, "--model") == 0) {
            bool found = false;
            for (const char *const *m = dp_model_names(); *m; m++)
                found |= strcmp(*m, v) == 0;
            if (!found)
                return bad_value(f, v, "unknown model (known: lenet)");
            o.model = v;
        } else if (strcmp(f, "--devices") == 0) {
            o.devices = v;
        } else if (strcmp(f, "--threads") == 0) {
            if (!(rc = parse_i64(f, v, 0, 1024, &n)))
                o.threads = (int)n;
        } else if (strcmp(f, "--batch-size") == 0) {
            if (!(rc = parse_i64(f, v, 1, 1 << 20, &n)))
                o.batch_size = n;
        } else if (strcmp(f, "--lr") == 0) {
            rc = parse_float(f, v, 0, 1e6, true, &o.lr);
        } else if (strcmp(f, "--momentum") == 0) {
            rc = parse_float(f, v, 0, 0.999999, false, &o.momentum);
        } else if (strcmp(f, "--weight-decay") == 0) {
            rc = parse_float(f, v, 0, 1e3, false, &o.weight_decay);
        } else if (strcmp(f, "--epochs") == 0) {
            if (!(rc = parse_i64(f, v, 1, 100000, &n)))
                o.epochs = (int)n;
        } else if (strcmp(f, "--seed") == 0) {
            if (!(rc = parse_i64(f, v, 0, INT64_MAX, &n)))
                o.seed = (uint64_t)n;
        } else if (strcmp(f, "--data") == 0) {
            o.data_dir = v;
        } else if (strcmp(f, "--metrics") == 0) {
            o.metrics_path = v;
        } else if (strcmp(f, "--plot") == 0) {
            size_t len = strlen(v);
            if (len < 5 || (strcmp(v + len - 4, ".png") != 0 && strcmp(v + len - 4, ".svg") != 0))
                return bad_value(f, v, "the file name must end in .png or .svg");
            o.plot_path = v;
        } else if (strcmp(f, "--limit-train") == 0) {
            if (!(rc = parse_i64(f, v, 0, INT64_MAX, &n)))
                o.limit_train = n;
        } else if (strcmp(f, "--limit-test") == 0) {
            if (!(rc = parse_i64(f, v, 0, INT64_MAX, &n)))
                o.limit_test = n;
        } else if (strcmp(f, "--progress") == 0) {
            if (strcmp(v, "auto") && strcmp(v, "always") && strcmp(v, "never"))
                return bad_value(f, v, "expected auto, always or never");
            progress = v;
        }
        if (rc)
            return rc;
    }
    if (o.log_steps && !o.metrics_path) {
        fprintf(stderr, "dptrain: error: --log-steps needs --metrics FILE\n");
        return 2;
    }
    o.progress = strcmp(progress, "always") == 0 || (strcmp(progress, "auto") == 0 && isatty(2));
    dp_train_result r;
    int rc = dp_train(&o, &r);
    if (rc < 0) {
        if (dp_last_error()[0] == '\0')
            fprintf(stderr, "dptrain: error: %s\n", dp_strerror(rc));
        return 1;
    }
    printf("test acc: %.2f, %.1f sec/epoch on %s\n", r.test_acc, r.sec_per_epoch, r.devices);
    return 0;
}

int main(int argc, char **argv)
{
    dp_log_set(log_to_stderr, NULL);
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(usage_main, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("dptrain %s\n", DP_VERSION_STRING);
        return 0;
    }
    if (strcmp(argv[1], "train") == 0)
        return cmd_train(argc - 2, argv + 2);
    fprintf(stderr, "dptrain: error: unknown command '%s' (see dptrain --help)\n", argv[1]);
    return 2;
}
