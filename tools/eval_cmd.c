/* dptrain eval: the test accuracy (and loss, top-5 accuracy, confusion
 * matrix) of a checkpoint's weights. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <string.h>

/* What dptrain eval reads: the library's evaluation options and its own. */
typedef struct eval_args {
    dp_eval_options eval;
    bool confusion;
} eval_args;

static int run_eval(int argc, char **argv);

const cli_command *cli_eval(void)
{
    static dp_option flags[10];
    static const eval_args defaults = {
        .eval = {.devices = "1", .batch_size = 256, .dataset = "fashion-mnist"}};
    static cli_command c = {
        .name = "eval",
        .summary = "test accuracy of a checkpoint's weights",
        .usage = "dptrain eval --checkpoint FILE [options]",
        .about = "Evaluates the weights in FILE (a dptrain checkpoint, or a PyTorch state dict\n"
                 "saved as safetensors) on a dataset's test set (Fashion-MNIST by default)\n"
                 "and prints 'test acc: A' with four decimals, then the test loss (and the\n"
                 "top-5 accuracy with more than 5 classes).",
        .options = flags,
        .defaults = &defaults,
        .run = run_eval};
    if (c.noptions == 0) {
        int n = 0;
        flags[n++] = (dp_option){CLI_FIELD(eval_args, eval.checkpoint, "checkpoint"),
                                 .flag = "--checkpoint", .metavar = "FILE", .type = DP_OPTION_TEXT,
                                 .help = "the weights [required]"};
        flags[n++] = CLI_LIKE(eval_args, eval.model, "model",
                              "lenet, resnet18 or a model file [the built-in model named in FILE]");
        flags[n++] = CLI_LIKE(eval_args, eval.devices, "devices", "devices to evaluate on");
        flags[n++] = CLI_LIKE(eval_args, eval.threads, "threads",
                              "kernel threads per device, 0 = cores divided");
        flags[n++] = CLI_LIKE(eval_args, eval.batch_size, "batch_size", "evaluation batch");
        flags[n++] = CLI_LIKE(eval_args, eval.dataset, "dataset",
                              "fashion-mnist, mnist, cifar10, folder or npy, as dptrain train");
        flags[n++] = CLI_LIKE(eval_args, eval.data_dir, "data_dir", NULL);
        flags[n++] = CLI_LIKE(eval_args, eval.limit_test, "limit_test", NULL);
        flags[n++] = CLI_LIKE(eval_args, eval.precision, "precision",
                              "fp32, bf16 or bf16-reference, as dptrain train");
        flags[n++] = (dp_option){CLI_FIELD(eval_args, confusion, "confusion"),
                                 .flag = "--confusion", .type = DP_OPTION_BOOL, .on = true,
                                 .help = "also print the confusion matrix (rows: the label, "
                                         "columns: the prediction) and each class's accuracy"};
        c.noptions = n;
    }
    return &c;
}

int cli_eval_parse(int argc, char **argv, dp_eval_options *out, bool *help, bool *confusion)
{
    eval_args a = {0};
    int rc = cli_parse(cli_eval(), argc, argv, &a, NULL, help, NULL, NULL, NULL);
    *confusion = a.confusion;
    if (rc || *help)
        return rc;
    if (!a.eval.checkpoint) {
        fprintf(stderr, "dptrain: error: eval needs --checkpoint FILE\n");
        return 2;
    }
    *out = a.eval;
    return 0;
}
/* The confusion matrix, a row per label and a column per prediction, then
 * each class's accuracy (its diagonal over its row). */
static void print_confusion(const dp_eval_result *r)
{
    int k = r->classes;
    printf("confusion matrix (rows: label, columns: predicted)\n      ");
    for (int j = 0; j < k; j++)
        printf(" %6d", j);
    printf("  class acc\n");
    for (int i = 0; i < k; i++) {
        int64_t row = 0;
        printf("%6d", i);
        for (int j = 0; j < k; j++) {
            printf(" %6lld", (long long)r->confusion[i * k + j]);
            row += r->confusion[i * k + j];
        }
        printf("  %.4f\n", row ? (double)r->confusion[i * k + i] / (double)row : 0.0);
    }
}

static int run_eval(int argc, char **argv)
{
    dp_eval_options o;
    bool help, confusion;
    int status = cli_eval_parse(argc, argv, &o, &help, &confusion);
    if (status != 0)
        return status;
    if (help) {
        cli_print_help(cli_eval(), stdout);
        return 0;
    }
    dp_eval_result r;
    int rc = dp_evaluate_detailed(&o, &r);
    if (rc < 0) {
        dp_eval_result_free(&r);
        return cli_fail(rc);
    }
    if (dp_dist_rank() == 0) {
        printf("test acc: %.4f\n", r.test_acc);
        printf("test loss: %.4f\n", r.test_loss);
        if (r.classes > 5)
            printf("test top-5 acc: %.4f\n", r.test_top5);
        if (confusion)
            print_confusion(&r);
    }
    dp_eval_result_free(&r);
    return 0;
}
