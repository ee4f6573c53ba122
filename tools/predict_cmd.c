/* dptrain predict: the top classes of images by a checkpoint's model. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_predict[] =
    "usage: dptrain predict --checkpoint FILE [options] IMAGE...\n"
    "\n"
    "Classifies PNG or JPEG images (or one .npy batch of (N, H, W) or\n"
    "(N, C, H, W) uint8 or float32 images) with the model in FILE, read as the\n"
    "samples it was trained on, and prints a line per image:\n"
    "'IMAGE: CLASS P, CLASS P, ...', the top classes with their softmax\n"
    "probabilities, named as the checkpoint names them (a folder's class\n"
    "directories, the built-in datasets' classes), else by number.\n"
    "\n"
    "options (default in brackets):\n"
    "  --checkpoint FILE    the weights (required)\n"
    "  --model NAME|FILE    lenet, resnet18 or a model file [the model named in FILE]\n"
    "  --topk K             the K most probable classes [5, at most the classes]\n"
    "  --devices N|LIST     devices to run on [1]\n"
    "  --threads N          kernel threads per device, 0 = cores divided [0]\n"
    "  --batch-size B       images per forward pass [256]\n"
    "  --logits OUT.npy     also write the raw outputs (N, outputs) as float32\n"
    "                       .npy, rows in the images' order [none]\n"
    "  -h, --help           show this help\n";

int cli_predict_parse(int argc, char **argv, dp_predict_options *out, int *topk,
                      const char **logits, bool *help)
{
    dp_predict_options o = {0};
    *help = false;
    *topk = 0;
    *logits = NULL;
    int first_input = -1;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            *help = true;
            return 0;
        }
        if (f[0] != '-' || strcmp(f, "-") == 0) {
            /* The images: every argument from the first that is not a flag. */
            if (first_input < 0)
                first_input = i;
            continue;
        }
        if (first_input >= 0) {
            fprintf(stderr,
                    "dptrain: error: predict: %s after the images: give the options "
                    "first\n",
                    f);
            return 2;
        }
        static const char *const with_value[] = {"--checkpoint", "--model", "--devices",
                                                 "--threads",    "--topk",  "--batch-size",
                                                 "--logits"};
        const char *v;
        if (cli_option_value("predict", with_value, sizeof with_value / sizeof *with_value, argc,
                             argv, &i, &v))
            return 2;
        int64_t n;
        if (strcmp(f, "--checkpoint") == 0) {
            o.checkpoint = v;
        } else if (strcmp(f, "--model") == 0) {
            if (cli_check_model(f, v))
                return 2;
            o.model = v;
        } else if (strcmp(f, "--logits") == 0) {
            if (!v[0]) {
                fprintf(stderr, "dptrain: error: --logits needs a file name\n");
                return 2;
            }
            *logits = v;
        } else if (strcmp(f, "--devices") == 0) {
            o.devices = v;
        } else if (strcmp(f, "--threads") == 0) {
            if (cli_parse_i64(f, v, 0, 1024, &n))
                return 2;
            o.threads = (int)n;
        } else if (strcmp(f, "--topk") == 0) {
            if (cli_parse_i64(f, v, 1, 1000, &n))
                return 2;
            *topk = (int)n;
        } else if (cli_parse_i64(f, v, 1, 1 << 20, &o.batch_size)) {
            return 2;
        }
    }
    if (!o.checkpoint) {
        fprintf(stderr, "dptrain: error: predict needs --checkpoint FILE\n");
        return 2;
    }
    if (first_input < 0) {
        fprintf(stderr, "dptrain: error: predict needs at least one image (PNG, JPEG or one "
                        ".npy batch)\n");
        return 2;
    }
    o.inputs = (const char *const *)(argv + first_input);
    o.ninputs = argc - first_input;
    *out = o;
    return 0;
}

int cmd_predict(int argc, char **argv)
{
    dp_predict_options o;
    int topk;
    const char *logits;
    bool help;
    int status = cli_predict_parse(argc, argv, &o, &topk, &logits, &help);
    if (status != 0)
        return status;
    if (help) {
        fputs(usage_predict, stdout);
        return 0;
    }
    /* The output file is checked before the model runs. */
    if (logits && dp_dist_rank() == 0 && dp_check_output_file(logits, "logits file") < 0)
        return cli_fail(DP_EIO);
    dp_predictions p;
    int rc = dp_predict(&o, &p);
    if (rc == 0 && logits && dp_dist_rank() == 0) {
        dp_npy a = {.dtype = DP_NPY_F32,
                    .ndim = 2,
                    .shape = {p.n, p.outputs},
                    .data = p.logits,
                    .size = (size_t)p.n * (size_t)p.outputs * sizeof *p.logits};
        rc = dp_npy_write(logits, &a);
    }
    if (rc < 0) {
        dp_predictions_close(&p);
        return cli_fail(rc);
    }
    /* Five, as a top-5 accuracy reads, but no more than there are classes
     * (a folder of 2 classes trained on LeNet's 10 outputs shows 2). */
    int k = topk ? topk : 5;
    if (!topk && p.classes > 0 && k > p.classes)
        k = p.classes;
    int *idx = malloc((size_t)(k > 0 ? k : 1) * sizeof *idx);
    if (!idx) {
        dp_predictions_close(&p);
        fprintf(stderr, "dptrain: error: out of memory\n");
        return 1;
    }
    for (int64_t i = 0; dp_dist_rank() == 0 && i < p.n; i++) {
        int got = dp_predictions_topk(&p, i, k, idx);
        printf("%s:", p.names[i]);
        for (int j = 0; j < got; j++) {
            float prob = p.probs[i * p.outputs + idx[j]];
            if (idx[j] < p.classes)
                printf("%s %s %.4f", j ? "," : "", p.class_names[idx[j]], prob);
            else
                printf("%s %d %.4f", j ? "," : "", idx[j], prob);
        }
        printf("\n");
    }
    free(idx);
    dp_predictions_close(&p);
    return 0;
}
