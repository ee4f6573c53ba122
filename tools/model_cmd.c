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

/* What dptrain model reads besides the model: the samples' shape and a
 * split into pipeline stages. */
typedef struct model_args {
    int64_t chw[3];
    int64_t pipeline, micro_batches;
    const char *stages;
    int schedule;
    const char *model;
} model_args;

/* "1x28x28" into (C, H, W). */
static int parse_input(const char *text, void *field, char *why, size_t size)
{
    char extra;
    long long c, h, w;
    if (sscanf(text, "%lldx%lldx%lld%c", &c, &h, &w, &extra) != 3 || c < 1 || h < 1 || w < 1 ||
        c > DP_MAX_INPUT_CHANNELS || h > DP_MAX_INPUT_SIDE || w > DP_MAX_INPUT_SIDE) {
        snprintf(why, size, "expected CxHxW with positive sizes, e.g. 3x32x32");
        return DP_EINVAL;
    }
    int64_t *chw = field;
    chw[0] = c;
    chw[1] = h;
    chw[2] = w;
    return 0;
}

static const char *format_input(const void *field, char *buf, size_t size)
{
    const int64_t *chw = field;
    snprintf(buf, size, "%" PRId64 "x%" PRId64 "x%" PRId64, chw[0], chw[1], chw[2]);
    return buf;
}

static int run_model(int argc, char **argv);

const cli_command *cli_model(void)
{
    static dp_option flags[5];
    static const cli_arg args[] = {
        {"NAME|FILE", "lenet, resnet18, a file of nn.Sequential modules or an ONNX model "
                      "(FILE.onnx)"}};
    static const model_args defaults = {.chw = {1, 28, 28}, .pipeline = 1, .micro_batches = 1};
    static cli_command c = {
        .name = "model",
        .summary = "a model's layers, parameters and FLOPs (dptrain model lenet)",
        .usage = "dptrain model NAME|FILE [options]",
        .about = "Prints the model's layers (one row per op of a forward), their output\n"
                 "shape for one sample, the parameters each uses first, the FLOPs per\n"
                 "sample (2 per multiply-add in conv2d and linear, 1 per output element\n"
                 "elsewhere), and the totals.",
        .args = args,
        .nargs = 1,
        .options = flags,
        .defaults = &defaults,
        .run = run_model};
    if (c.noptions == 0) {
        int n = 0;
        flags[n++] = (dp_option){CLI_FIELD(model_args, chw, "input"),
                                 .flag = "--input",
                                 .metavar = "CxHxW",
                                 .type = DP_OPTION_VALUE,
                                 .parse = parse_input,
                                 .format = format_input,
                                 .help = "the input of one sample [the one an ONNX model "
                                         "declares, else 1x28x28]"};
        flags[n++] = (dp_option){CLI_FIELD(model_args, pipeline, "pipeline"),
                                 .flag = "--pipeline",
                                 .metavar = "K",
                                 .type = DP_OPTION_I64,
                                 .imin = 1,
                                 .imax = DP_PIPELINE_MAX_STAGES,
                                 .help = "split the layers into K stages of equal FLOPs, as far "
                                         "as the layers allow (stages start only where the "
                                         "table's `start` column says yes) [1: no split]"};
        flags[n++] = (dp_option){CLI_FIELD(model_args, stages, "stages"), .flag = "--stages",
                                 .metavar = "LIST", .type = DP_OPTION_TEXT,
                                 .help = "the stages by layer, e.g. 0-3,4-7 [balanced]"};
        flags[n++] = (dp_option){CLI_FIELD(model_args, micro_batches, "micro_batches"),
                                 .flag = "--micro-batches",
                                 .metavar = "M",
                                 .type = DP_OPTION_I64,
                                 .imin = 1,
                                 .imax = 4096,
                                 .help = "micro-batches per batch, for the idle fraction"};
        flags[n++] = CLI_LIKE(model_args, schedule, "pipeline_schedule",
                              "1f1b or gpipe, for the activations kept");
        c.noptions = n;
    }
    return &c;
}

/* The model: the one argument that is not a flag. */
static int model_name(void *ctx, const char *arg)
{
    model_args *a = ctx;
    if (a->model) {
        fprintf(stderr, "dptrain: error: model: one model at a time, got '%s' and '%s'\n", a->model,
                arg);
        return 2;
    }
    a->model = arg;
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

static int run_model(int argc, char **argv)
{
    const cli_command *c = cli_model();
    model_args a = *(const model_args *)c->defaults;
    bool help, given[5] = {false};
    int status = cli_parse(c, argc, argv, &a, given, &help, model_name, &a, NULL);
    if (status || help) {
        if (help)
            cli_print_help(c, stdout);
        return status;
    }
    const char *model = a.model, *stage_list = a.stages;
    int64_t *chw = a.chw, pipeline = a.pipeline, micro_batches = a.micro_batches;
    dp_pipeline_schedule schedule = (dp_pipeline_schedule)a.schedule;
    bool input_given = given[cli_option_index(c, "--input")];
    if (!model) {
        cli_print_help(c, stderr);
        return 2;
    }
    /* A model `dptrain train --model` would take. */
    const dp_option *check = dp_train_option_find("model");
    char why[256];
    if (check->parse(model, NULL, why, sizeof why) < 0)
        return cli_bad_value("model", model, why);
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
