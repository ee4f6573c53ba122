/* dptrain eval: the test accuracy (and loss, top-5 accuracy, confusion
 * matrix) of a checkpoint's weights. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <string.h>

static const char usage_eval[] =
    "usage: dptrain eval --checkpoint FILE [options]\n"
    "\n"
    "Evaluates the weights in FILE (a dptrain checkpoint, or a PyTorch state dict\n"
    "saved as safetensors) on a dataset's test set (Fashion-MNIST by default)\n"
    "and prints 'test acc: A' with four decimals, then the test loss (and the\n"
    "top-5 accuracy with more than 5 classes).\n"
    "\n"
    "options (default in brackets):\n"
    "  --checkpoint FILE    the weights (required)\n"
    "  --model NAME|FILE    lenet, resnet18 or a model file [the model named in FILE]\n"
    "  --devices N|LIST     devices to evaluate on [1]\n"
    "  --threads N          kernel threads per device, 0 = cores divided [0]\n"
    "  --batch-size B       evaluation batch [256]\n"
    "  --dataset NAME       fashion-mnist, mnist, cifar10, folder or npy, as\n"
    "                       dptrain train [fashion-mnist]\n"
    "  --data DIR           directory with the dataset's files [fashion-mnist:\n"
    "                       /usr/share/datasets/fashion-mnist; the others:\n"
    "                       required]\n"
    "  --limit-test N       use the first N test samples, 0 = all [0]\n"
    "  --precision P        fp32, bf16 or bf16-reference, as dptrain train [fp32]\n"
    "  --confusion          also print the confusion matrix (rows: the label,\n"
    "                       columns: the prediction) and each class's accuracy [off]\n"
    "  -h, --help           show this help\n";

int cli_eval_parse(int argc, char **argv, dp_eval_options *out, bool *help, bool *confusion)
{
    dp_eval_options o = {0};
    *help = false;
    *confusion = false;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            *help = true;
            return 0;
        }
        if (strcmp(f, "--confusion") == 0) {
            *confusion = true;
            continue;
        }
        static const char *const with_value[] = {"--checkpoint", "--model",      "--devices",
                                                 "--threads",    "--batch-size", "--data",
                                                 "--limit-test", "--dataset",    "--precision"};
        const char *v;
        if (cli_option_value("eval", with_value, sizeof with_value / sizeof *with_value, argc, argv,
                             &i, &v))
            return 2;
        int64_t n;
        if (strcmp(f, "--checkpoint") == 0) {
            o.checkpoint = v;
        } else if (strcmp(f, "--model") == 0) {
            if (cli_check_model(f, v))
                return 2;
            o.model = v;
        } else if (strcmp(f, "--devices") == 0) {
            o.devices = v;
        } else if (strcmp(f, "--dataset") == 0) {
            if (cli_parse_dataset(f, v, &o.dataset))
                return 2;
        } else if (strcmp(f, "--data") == 0) {
            o.data_dir = v;
        } else if (strcmp(f, "--threads") == 0) {
            if (cli_parse_i64(f, v, 0, 1024, &n))
                return 2;
            o.threads = (int)n;
        } else if (strcmp(f, "--batch-size") == 0) {
            if (cli_parse_i64(f, v, 1, 1 << 20, &n))
                return 2;
            o.batch_size = n;
        } else if (strcmp(f, "--precision") == 0) {
            if (cli_parse_name(f, v, &dp_precision_names, &o.precision))
                return 2;
        } else if (cli_parse_i64(f, v, 0, INT64_MAX, &o.limit_test)) {
            return 2;
        }
    }
    if (!o.checkpoint) {
        fprintf(stderr, "dptrain: error: eval needs --checkpoint FILE\n");
        return 2;
    }
    *out = o;
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

int cmd_eval(int argc, char **argv)
{
    dp_eval_options o;
    bool help, confusion;
    int status = cli_eval_parse(argc, argv, &o, &help, &confusion);
    if (status != 0)
        return status;
    if (help) {
        fputs(usage_eval, stdout);
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
