/* dptrain model: a model's layers with their output shapes, parameters and
 * FLOPs per sample, and the totals (torchinfo.summary's table), for the
 * built-in models and model files alike; with --pipeline or --stages, the
 * split into pipeline stages and the idle time its schedule leaves. */
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
    "  NAME|FILE            lenet, resnet18, a file of nn.Sequential modules or\n"
    "                       an ONNX model (FILE.onnx)\n"
    "  --input CxHxW        the input of one sample [the one an ONNX model\n"
    "                       declares, else 1x28x28]\n"
    "  --pipeline K         split the layers into K stages of equal FLOPs, as\n"
    "                       far as the layers allow (stages start only where\n"
    "                       the table's `start` column says yes) [1: no split]\n"
    "  --stages LIST        the stages by layer, e.g. 0-3,4-7 [balanced]\n"
    "  --micro-batches M    micro-batches per batch, for the idle fraction [1]\n"
    "  --schedule S         1f1b or gpipe, for the activations kept [1f1b]\n"
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

/* stage[i]: the stage of layer i (all 0 without a split). */
static void print_table(const dp_layer_summary *rows, int n, const int *stage, bool split)
{
    char shape[64], a[32], b[32];
    int64_t params = 0, flops = 0;
    printf("%-4s %-22s %-20s %12s %16s", "#", "layer", "output shape", "params", "FLOPs");
    printf(split ? "  start  stage\n" : "\n");
    for (int i = 0; i < n; i++) {
        const dp_layer_summary *r = &rows[i];
        size_t o = (size_t)snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < r->ndim && o < sizeof shape; d++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, d ? ", %" PRId64 : "%" PRId64,
                                  r->shape[d]);
        if (o < sizeof shape)
            snprintf(shape + o, sizeof shape - o, "]");
        printf("%-4d %-22s %-20s %12s %16s", i, r->op, shape, grouped(r->params, a, sizeof a),
               grouped(r->flops, b, sizeof b));
        if (split)
            printf("  %-5s  %d\n", r->can_start ? "yes" : "no", stage[i]);
        else
            printf("\n");
        params += r->params;
        flops += r->flops;
    }
    printf("total parameters: %s\n", grouped(params, a, sizeof a));
    printf("FLOPs per sample: %s (forward)\n", grouped(flops, b, sizeof b));
}

/* Each stage's layers, parameters and share of the FLOPs, and the schedule
 * played out with each stage's time in proportion to its FLOPs (backward
 * twice the forward). */
static int print_stages(const dp_layer_summary *rows, int n, const int *first, int stages,
                        int micro_batches, dp_pipeline_schedule schedule)
{
    double fwd[DP_PIPELINE_MAX_STAGES], bwd[DP_PIPELINE_MAX_STAGES], total = 0;
    char a[32], b[32];
    for (int i = 0; i < n; i++)
        total += (double)rows[i].flops;
    for (int k = 0; k < stages; k++) {
        int64_t params = 0, flops = 0;
        for (int i = first[k]; i < first[k + 1]; i++) {
            params += rows[i].params;
            flops += rows[i].flops;
        }
        fwd[k] = (double)flops;
        bwd[k] = 2.0 * (double)flops;
        printf("stage %d: layers %d-%d, %s parameters, %s FLOPs (%.1f%%)\n", k, first[k],
               first[k + 1] - 1, grouped(params, a, sizeof a), grouped(flops, b, sizeof b),
               total > 0 ? 100.0 * (double)flops / total : 0.0);
    }
    dp_pipeline_timeline tl;
    int rc = dp_pipeline_simulate(schedule, stages, micro_batches, fwd, bwd, &tl, NULL, NULL);
    if (rc < 0)
        return cli_fail(rc);
    printf("%d micro-batch%s, %s: the devices idle %.3f of the time (equal stages: %.3f); "
           "micro-batches alive per stage at most:",
           micro_batches, micro_batches == 1 ? "" : "es", dp_pipeline_schedule_name(schedule),
           tl.bubble_fraction, (double)(stages - 1) / (micro_batches + stages - 1));
    for (int k = 0; k < stages; k++)
        printf(" %d", tl.peak_live[k]);
    printf("\n");
    return 0;
}

/* The split: --stages as given, else --pipeline K balanced by FLOPs. */
static int plan_stages(const dp_layer_summary *rows, int n, int64_t pipeline, const char *list,
                       int *first, int *stages)
{
    bool *can_start = calloc((size_t)n, sizeof *can_start);
    double *cost = calloc((size_t)n, sizeof *cost);
    int rc = can_start && cost ? 0 : DP_ENOMEM;
    for (int i = 0; rc == 0 && i < n; i++) {
        can_start[i] = rows[i].can_start;
        cost[i] = (double)rows[i].flops;
    }
    if (rc == 0 && list)
        rc = dp_pipeline_parse_stages(list, can_start, n, first, stages);
    else if (rc == 0) {
        rc = dp_pipeline_balance(cost, can_start, n, (int)pipeline, first);
        *stages = (int)pipeline;
    }
    if (rc == 0 && list && pipeline > 1 && *stages != pipeline) {
        fprintf(stderr,
                "dptrain: error: --pipeline %" PRId64 " and --stages %s (%d stages) disagree\n",
                pipeline, list, *stages);
        rc = DP_EINVAL;
    }
    free(can_start);
    free(cost);
    return rc;
}

int cmd_model(int argc, char **argv)
{
    const char *model = NULL, *stage_list = NULL;
    int64_t chw[3] = {1, 28, 28}, pipeline = 1, micro_batches = 1;
    int schedule = DP_PIPELINE_1F1B;
    bool input_given = false;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        }
        static const char *const valued[] = {"--input", "--pipeline", "--stages", "--micro-batches",
                                             "--schedule"};
        const char *v;
        if (f[0] == '-') {
            if (cli_option_value("model", valued, sizeof valued / sizeof *valued, argc, argv, &i,
                                 &v))
                return 2;
            int bad = 0;
            if (strcmp(f, "--input") == 0) {
                bad = parse_input(f, v, chw);
                input_given = true;
            } else if (strcmp(f, "--pipeline") == 0)
                bad = cli_parse_i64(f, v, 1, DP_PIPELINE_MAX_STAGES, &pipeline);
            else if (strcmp(f, "--stages") == 0)
                stage_list = v;
            else if (strcmp(f, "--micro-batches") == 0)
                bad = cli_parse_i64(f, v, 1, 4096, &micro_batches);
            else
                bad = cli_parse_name(f, v, &dp_pipeline_schedule_names, &schedule);
            if (bad)
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
    if ((micro_batches > 1 || schedule != DP_PIPELINE_1F1B) && pipeline == 1 && !stage_list) {
        fprintf(stderr, "dptrain: error: model: --micro-batches and --schedule need --pipeline K "
                        "or --stages LIST\n");
        return 2;
    }
    const dp_model_def *def;
    /* An ONNX model without --input: the samples its graph declares. */
    int rc = dp_model_def_load(&def, model, input_given ? chw : NULL);
    if (rc == 0 && !input_given)
        dp_model_def_input_chw(def, chw);
    dp_layer_summary *rows = NULL;
    int n = 0;
    if (rc == 0)
        rc = dp_model_summary(def, chw, &rows, &n);
    if (rc < 0)
        return cli_fail(rc);
    bool split = pipeline > 1 || stage_list;
    int first[DP_PIPELINE_MAX_STAGES + 1] = {0, n}, stages = 1;
    int *stage = calloc((size_t)n, sizeof *stage);
    if (!stage)
        rc = DP_ENOMEM;
    if (rc == 0 && split)
        rc = plan_stages(rows, n, pipeline, stage_list, first, &stages);
    if (rc < 0) {
        free(rows);
        free(stage);
        return rc == DP_ENOMEM ? cli_fail(rc) : 2;
    }
    for (int k = 0; k < stages; k++)
        for (int i = first[k]; i < first[k + 1]; i++)
            stage[i] = k;
    printf("%s on %" PRId64 "x%" PRId64 "x%" PRId64 " inputs\n", model, chw[0], chw[1], chw[2]);
    print_table(rows, n, stage, split);
    if (split)
        rc = print_stages(rows, n, first, stages, (int)micro_batches, schedule);
    free(rows);
    free(stage);
    return rc;
}
