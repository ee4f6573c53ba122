/* The entry point of the cli target: train's, eval's, predict's and
 * demo's parsers on an argument list (fuzz_entry.h says how an input is
 * cut into arguments); what a parse accepts must be in its options'
 * ranges. */
#include "fuzz_entry.h"

#include "../../tools/cli.h"
#include "dp/dp.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { FZ_MAX_ARGS = 64 };

/* What a successful parse promised, checked against the options' ranges. */
static int fz_cli_train(int argc, char **argv)
{
    dp_train_options o;
    bool help;
    int rc = cli_train_parse(argc, argv, &o, &help);
    if (rc != 0 && rc != 2)
        return fz_bad("cli", "cli_train_parse returned %d", rc);
    if (rc != 0 || help)
        return 0;
    const char *plot_path = o.output.plot_path;
    size_t plot = plot_path ? strlen(plot_path) : 0;
    if (!o.net.model || o.data.batch_size < 1 || o.data.batch_size > (1 << 20) ||
        o.run.epochs < 1 || !(o.optim.lr > 0) || !isfinite(o.optim.lr) ||
        !(o.optim.momentum >= 0 && o.optim.momentum < 1) || !(o.optim.weight_decay >= 0) ||
        !isfinite(o.optim.weight_decay) || o.parallel.threads < 0 || o.parallel.threads > 1024 ||
        o.data.limit_train < 0 || o.data.limit_test < 0 ||
        (o.checkpoint.resume_path && o.net.init_path) ||
        (o.output.log_steps && !o.output.metrics_path) ||
        (plot_path && (plot < 5 || (strcmp(plot_path + plot - 4, ".png") != 0 &&
                                    strcmp(plot_path + plot - 4, ".svg") != 0))))
        return fz_bad("cli", "train options accepted out of range");
    return 0;
}

static int fz_cli_eval(int argc, char **argv)
{
    dp_eval_options o;
    bool help, confusion;
    int rc = cli_eval_parse(argc, argv, &o, &help, &confusion);
    if (rc != 0 && rc != 2)
        return fz_bad("cli", "cli_eval_parse returned %d", rc);
    if (rc != 0 || help)
        return 0;
    if (!o.checkpoint || o.threads < 0 || o.threads > 1024 || o.batch_size < 0 || o.limit_test < 0)
        return fz_bad("cli", "eval options accepted out of range");
    return 0;
}

static int fz_cli_predict(int argc, char **argv)
{
    dp_predict_options o;
    int topk;
    const char *logits;
    bool help;
    int rc = cli_predict_parse(argc, argv, &o, &topk, &logits, &help);
    if (rc != 0 && rc != 2)
        return fz_bad("cli", "cli_predict_parse returned %d", rc);
    if (rc != 0 || help)
        return 0;
    if (!o.checkpoint || o.ninputs < 1 || o.threads < 0 || o.threads > 1024 || topk < 0 ||
        topk > 1000 || o.batch_size < 0 || (logits && !logits[0]))
        return fz_bad("cli", "predict options accepted out of range");
    for (int i = 0; i < o.ninputs; i++)
        if (!o.inputs[i] || (o.inputs[i][0] == '-' && o.inputs[i][1] != '\0'))
            return fz_bad("cli", "predict took the flag %s for an image", o.inputs[i]);
    return 0;
}

static int fz_cli_demo(int argc, char **argv)
{
    struct cli_demo_options o;
    bool help;
    int rc = cli_demo_parse(argc, argv, &o, &help);
    if (rc != 0 && rc != 2)
        return fz_bad("cli", "cli_demo_parse returned %d", rc);
    if (rc != 0 || help)
        return 0;
    if (strcmp(o.name, "dataparallel") && strcmp(o.name, "allreduce") && strcmp(o.name, "async") &&
        strcmp(o.name, "scratch"))
        return fz_bad("cli", "demo '%s' accepted", o.name);
    if (o.steps < 1 || o.steps > 234 || o.ops < 1 || o.ops > 100000000 ||
        (strcmp(o.algo, "ring") != 0 && strcmp(o.algo, "naive") != 0))
        return fz_bad("cli", "demo options accepted out of range");
    return 0;
}

int fuzz_cli_input(const uint8_t *data, size_t size)
{
    /* The arguments are cut out of one copy of the input, exactly as long
     * as it (plus the NUL), so ASan sees a parser that reads past one. */
    char *buf = malloc(size + 1);
    if (!buf)
        return -1;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *argv[FZ_MAX_ARGS + 1];
    int argc = 0;
    for (char *p = buf; argc < FZ_MAX_ARGS;) {
        argv[argc++] = p;
        char *nl = memchr(p, '\n', size - (size_t)(p - buf));
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    int result = 0;
    if (strcmp(argv[0], "train") == 0)
        result = fz_cli_train(argc - 1, argv + 1);
    else if (strcmp(argv[0], "eval") == 0)
        result = fz_cli_eval(argc - 1, argv + 1);
    else if (strcmp(argv[0], "demo") == 0)
        result = fz_cli_demo(argc - 1, argv + 1);
    else if (strcmp(argv[0], "predict") == 0)
        result = fz_cli_predict(argc - 1, argv + 1);
    free(buf);
    return result;
}
