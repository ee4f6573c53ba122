/* dptrain model: a model's layers with their output shapes, parameters and
 * FLOPs per sample, and the totals (torchinfo.summary's table), for the
 * built-in models and model files alike. */
#include "cli.h"

#include "dp/dp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: dptrain model NAME|FILE [options]\n"
    "\n"
    "Prints the model's layers (one row per op of a forward), their output\n"
    "shape for one sample, the parameters each uses first, the FLOPs per\n"
    "sample (2 per multiply-add in conv2d and linear, 1 per output element\n"
    "elsewhere), and the totals.\n"
    "\n"
    "  NAME|FILE            lenet, resnet18, or a file of nn.Sequential modules\n"
    "  --input CxHxW        the input of one sample [1x28x28]\n"
    "  -h, --help           show this help\n";

/* "1x28x28" into (C, H, W); 2 with a one-line error when it is not one. */
static int parse_input(const char *flag, const char *s, int64_t *chw)
{
    char extra;
    long long c, h, w;
    if (sscanf(s, "%lldx%lldx%lld%c", &c, &h, &w, &extra) != 3 || c < 1 || h < 1 || w < 1 ||
        c > 4096 || h > 65536 || w > 65536)
        return cli_bad_value(flag, s, "expected CxHxW with positive sizes, e.g. 3x32x32");
    chw[0] = c;
    chw[1] = h;
    chw[2] = w;
    return 0;
}

/* n with thousands separators ("61,706"), into buf. */
static const char *grouped(int64_t n, char *buf, size_t size)
{
    char digits[32];
    snprintf(digits, sizeof digits, "%" PRId64, n);
    size_t len = strlen(digits), o = 0;
    for (size_t i = 0; i < len && o + 2 < size; i++) {
        if (i > 0 && (len - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = '\0';
    return buf;
}

static void print_table(const dp_layer_summary *rows, int n)
{
    char shape[64], a[32], b[32];
    int64_t params = 0, flops = 0;
    printf("%-4s %-22s %-20s %12s %16s\n", "#", "layer", "output shape", "params", "FLOPs");
    for (int i = 0; i < n; i++) {
        const dp_layer_summary *r = &rows[i];
        size_t o = (size_t)snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < r->ndim && o < sizeof shape; d++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, d ? ", %" PRId64 : "%" PRId64,
                                  r->shape[d]);
        if (o < sizeof shape)
            snprintf(shape + o, sizeof shape - o, "]");
        printf("%-4d %-22s %-20s %12s %16s\n", i, r->op, shape, grouped(r->params, a, sizeof a),
               grouped(r->flops, b, sizeof b));
        params += r->params;
        flops += r->flops;
    }
    printf("total parameters: %s\n", grouped(params, a, sizeof a));
    printf("FLOPs per sample: %s (forward)\n", grouped(flops, b, sizeof b));
}

int cmd_model(int argc, char **argv)
{
    const char *model = NULL;
    int64_t chw[3] = {1, 28, 28};
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        if (strcmp(f, "--input") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "dptrain: error: model: --input needs a value\n");
                return 2;
            }
            if (parse_input(f, argv[++i], chw))
                return 2;
        } else if (f[0] == '-') {
            fprintf(stderr,
                    "dptrain: error: model: unknown option '%s' (see dptrain model --help)\n", f);
            return 2;
        } else if (model) {
            fprintf(stderr, "dptrain: error: model: one model at a time, got '%s' and '%s'\n",
                    model, f);
            return 2;
        } else {
            model = f;
        }
    }
    if (!model) {
        fputs(usage, stderr);
        return 2;
    }
    if (cli_check_model("model", model))
        return 2;
    const dp_model_def *def;
    int rc = dp_model_def_load(&def, model, chw);
    dp_layer_summary *rows = NULL;
    int n = 0;
    if (rc == 0)
        rc = dp_model_summary(def, chw, &rows, &n);
    if (rc < 0)
        return cli_fail(rc);
    printf("%s on %" PRId64 "x%" PRId64 "x%" PRId64 " inputs\n", model, chw[0], chw[1], chw[2]);
    print_table(rows, n);
    free(rows);
    return 0;
}
