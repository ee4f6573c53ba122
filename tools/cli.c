/* The command line's shared parsing and error helpers (tools/cli.h). */
#include "cli.h"

#include "dp/dp.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_bad_value(const char *flag, const char *value, const char *want)
{
    fprintf(stderr, "dptrain: error: %s %s: %s\n", flag, value, want);
    return 2;
}

int cli_check_plot_path(const char *flag, const char *value)
{
    size_t len = strlen(value);
    if (len < 5 || (strcmp(value + len - 4, ".png") != 0 && strcmp(value + len - 4, ".svg") != 0))
        return cli_bad_value(flag, value, "the file name must end in .png or .svg");
    return 0;
}

int cli_check_model(const char *flag, const char *value)
{
    /* The image models; "tutorial" is the DataParallel demo's. */
    if (strcmp(value, "lenet") == 0 || strcmp(value, "resnet18") == 0 || access(value, R_OK) == 0)
        return 0;
    /* A path (a slash or an extension) that cannot be read says why, which
     * "unknown model" would hide: a typo in a directory, a file not readable. */
    if (strchr(value, '/') || strchr(value, '.')) {
        char why[160];
        snprintf(why, sizeof why, "cannot read the model file: %s", strerror(errno));
        return cli_bad_value(flag, value, why);
    }
    return cli_bad_value(flag, value,
                         "unknown model (known: lenet, resnet18, or a readable file of "
                         "nn.Sequential modules or an ONNX model)");
}

int cli_parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected an integer from %lld to %lld", (long long)lo,
                 (long long)hi);
        return cli_bad_value(flag, s, want);
    }
    *out = v;
    return 0;
}

int cli_parse_float(const char *flag, const char *s, double lo, double hi, bool lo_open, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < lo || (lo_open && v == lo) ||
        v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected a number %s %g and <= %g", lo_open ? ">" : ">=", lo,
                 hi);
        return cli_bad_value(flag, s, want);
    }
    *out = (float)v;
    return 0;
}

int cli_parse_name(const char *flag, const char *s, const dp_name_table *names, int *out)
{
    char choices[256], want[300];
    if (dp_name_parse(names, s, out) == 0)
        return 0;
    snprintf(want, sizeof want, "expected %s", dp_name_choices(names, choices, sizeof choices));
    return cli_bad_value(flag, s, want);
}

int cli_parse_dataset(const char *flag, const char *s, const char **out)
{
    for (const char *const *n = dp_dataset_names(); *n; n++) {
        if (strcmp(s, *n) == 0) {
            *out = *n;
            return 0;
        }
    }
    return cli_bad_value(flag, s,
                         "unknown dataset (known: fashion-mnist, mnist, cifar10, folder, npy)");
}

int cli_option_value(const char *command, const char *const *names, size_t n, int argc, char **argv,
                     int *i, const char **value)
{
    char *f = argv[*i];
    /* GNU's long form, --name=value, as getopt_long reads it: the name is
     * cut off in place (the caller compares argv[*i] with the flag's name
     * next) and the value is the rest, '=' signs and all. */
    char *eq = strncmp(f, "--", 2) == 0 ? strchr(f, '=') : NULL;
    bool known = false;
    for (size_t k = 0; k < n; k++) {
        size_t len = strlen(names[k]);
        known |= eq ? (size_t)(eq - f) == len && strncmp(f, names[k], len) == 0
                    : strcmp(f, names[k]) == 0;
    }
    if (!known) {
        fprintf(stderr, "dptrain: error: unknown option '%s' for %s (see dptrain %s --help)\n", f,
                command, command);
        return 2;
    }
    if (eq) {
        *eq = '\0';
        *value = eq + 1;
        return 0;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "dptrain: error: %s needs a value\n", f);
        return 2;
    }
    *value = argv[++*i];
    return 0;
}

bool cli_verbose;

int cli_fail(int status)
{
    if (dp_last_error()[0] == '\0')
        fprintf(stderr, "dptrain: error: %s\n", dp_strerror(status));
    return 1;
}

/* How the library names the options that `dptrain train`, `eval`, `devices`
 * and `demo` set by these flags (src/parallel/replicate.c, src/train/). */
static const struct cli_option_name {
    const char *phrase, *flag;
} cli_option_names[] = {
    {"the device list", "--devices"},
    {"the allreduce algorithm", "--allreduce"},
    {"sync batch norm", "--sync-bn"},
    {"the batch size", "--batch-size"},
    {"the training limit", "--limit-train"},
    {"the epoch count", "--epochs"},
    {"the model name", "--model"},
    {"the dataset", "--dataset"},
    {"the data directory", "--data"},
    {"the channel count", "--channels"},
    {"deterministic mode", "--deterministic"},
    {"split-invariant sums", "--split-invariant"},
    {"checkpoint path", "--checkpoint"},
    {"skipping non-finite steps", "--skip-nonfinite"},
    {"the checkpoint error policy", "--on-checkpoint-error"},
    {"dp_train_options.model", "--model"},
    {"dp_train_options.dataset", "--dataset"},
    {"dp_train_options.batch_size", "--batch-size"},
    {"dp_train_options.lr", "--lr"},
    {"dp_train_options.momentum", "--momentum"},
    {"dp_train_options.weight_decay", "--weight-decay"},
    {"dp_train_options.epochs", "--epochs"},
    {"dp_train_options.seed", "--seed"},
    {"dp_train_options.shuffle", "--no-shuffle"},
    {"dp_train_options.limit_train", "--limit-train"},
    {"dp_train_options.limit_test", "--limit-test"},
    {"dp_train_options.sync_bn", "--sync-bn"},
    {"dp_train_options.bucket_mb", "--bucket-mb"},
    {"dp_train_options.grad_compress", "--grad-compress"},
    {"dp_train_options.pipeline", "--pipeline"},
    {"dp_train_options.stages", "--stages"},
    {"dp_train_options.micro_batches", "--micro-batches"},
    {"dp_train_options.schedule", "--schedule"},
    {"the bucket size", "--bucket-mb"},
    {"the pipeline stage count", "--pipeline"},
    {"the stage list", "--stages"},
    {"the micro-batch count", "--micro-batches"},
    {"the precision", "--precision"},
    {"the convolution algorithm", "--conv-algo"},
    {"dp_train_options.precision", "--precision"},
    {"dp_train_options.conv_algo", "--conv-algo"},
    {"dp_train_options.split_invariant", "--split-invariant"},
    {"dp_train_options.augment", "--augment or --normalize"},
    {"the augmentation", "--augment"},
    {"the normalisation", "--normalize"},
};

const char *cli_with_flags(const char *msg, char *buf, size_t size)
{
    size_t out = 0;
    bool replaced = false;
    for (const char *p = msg; *p;) {
        /* Whole words only: "the batch sizes" names no option. */
        const struct cli_option_name *hit = NULL;
        bool word_start = p == msg || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        for (size_t k = 0;
             word_start && !hit && k < sizeof cli_option_names / sizeof *cli_option_names; k++) {
            size_t n = strlen(cli_option_names[k].phrase);
            if (strncmp(p, cli_option_names[k].phrase, n) == 0 &&
                !(isalnum((unsigned char)p[n]) || p[n] == '_'))
                hit = &cli_option_names[k];
        }
        const char *piece = hit ? hit->flag : p;
        size_t n = hit ? strlen(hit->flag) : 1;
        if (out + n >= size)
            return msg;
        memcpy(buf + out, piece, n);
        out += n;
        p += hit ? strlen(hit->phrase) : 1;
        replaced |= hit != NULL;
    }
    if (!replaced)
        return msg;
    buf[out] = '\0';
    return buf;
}
