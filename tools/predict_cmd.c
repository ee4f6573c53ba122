/* dptrain predict: the top classes of images by a checkpoint's model. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What dptrain predict reads: the library's options and its own. */
typedef struct predict_args {
    dp_predict_options predict;
    int topk;           /* 0: not given */
    const char *logits; /* NULL: not given */
} predict_args;

static int file_name(const char *text, void *field, char *why, size_t size)
{
    (void)field;
    if (text[0])
        return 0;
    snprintf(why, size, "expected a file name");
    return DP_EINVAL;
}

static int run_predict(int argc, char **argv);

const cli_command *cli_predict(void)
{
    static dp_option flags[7];
    static const predict_args defaults = {.predict = {.devices = "1", .batch_size = 256},
                                          .topk = 5};
    static cli_command c = {
        .name = "predict",
        .summary = "classify PNG or JPEG images (or a .npy batch) with a checkpoint",
        .usage = "dptrain predict --checkpoint FILE [options] IMAGE...",
        .about = "Classifies PNG or JPEG images (or one .npy batch of (N, H, W) or\n"
                 "(N, C, H, W) uint8 or float32 images) with the model in FILE, read as the\n"
                 "samples it was trained on, and prints a line per image:\n"
                 "'IMAGE: CLASS P, CLASS P, ...', the top classes with their softmax\n"
                 "probabilities, named as the checkpoint names them (a folder's class\n"
                 "directories, the built-in datasets' classes), else by number.",
        .options = flags,
        .defaults = &defaults,
        .run = run_predict};
    if (c.noptions == 0) {
        int n = 0;
        flags[n++] = (dp_option){CLI_FIELD(predict_args, predict.checkpoint, "checkpoint"),
                                 .flag = "--checkpoint", .metavar = "FILE", .type = DP_OPTION_TEXT,
                                 .help = "the weights [required]"};
        flags[n++] = CLI_LIKE(predict_args, predict.model, "model",
                              "lenet, resnet18 or a model file [the built-in model named in FILE]");
        flags[n++] = (dp_option){CLI_FIELD(predict_args, topk, "topk"),
                                 .flag = "--topk",
                                 .metavar = "K",
                                 .type = DP_OPTION_INT,
                                 .imin = 1,
                                 .imax = 1000,
                                 .help = "the K most probable classes [5, at most the classes]"};
        flags[n++] = CLI_LIKE(predict_args, predict.devices, "devices", "devices to run on");
        flags[n++] = CLI_LIKE(predict_args, predict.threads, "threads",
                              "kernel threads per device, 0 = cores divided");
        flags[n++] =
            CLI_LIKE(predict_args, predict.batch_size, "batch_size", "images per forward pass");
        flags[n++] = (dp_option){CLI_FIELD(predict_args, logits, "logits"),
                                 .flag = "--logits",
                                 .metavar = "OUT.npy",
                                 .type = DP_OPTION_TEXT,
                                 .parse = file_name,
                                 .help = "also write the raw outputs (N, outputs) as float32 .npy, "
                                         "rows in the images' order"};
        c.noptions = n;
    }
    return &c;
}

/* The images: every argument from the first that is not a flag. */
static int images(void *ctx, const char *arg)
{
    (void)ctx;
    (void)arg;
    return CLI_REST;
}

int cli_predict_parse(int argc, char **argv, dp_predict_options *out, int *topk,
                      const char **logits, bool *help)
{
    predict_args a = {0};
    int first_input;
    int rc = cli_parse(cli_predict(), argc, argv, &a, NULL, help, images, NULL, &first_input);
    *topk = a.topk;
    *logits = a.logits;
    if (rc || *help)
        return rc;
    for (int i = first_input; i < argc; i++) {
        if (argv[i][0] == '-' && strcmp(argv[i], "-") != 0) {
            if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                *help = true;
                return 0;
            }
            fprintf(stderr,
                    "dptrain: error: predict: %s after the images: give the options first\n",
                    argv[i]);
            return 2;
        }
    }
    if (!a.predict.checkpoint) {
        fprintf(stderr, "dptrain: error: predict needs --checkpoint FILE\n");
        return 2;
    }
    if (first_input == argc) {
        fprintf(stderr, "dptrain: error: predict needs at least one image (PNG, JPEG or one "
                        ".npy batch)\n");
        return 2;
    }
    a.predict.inputs = (const char *const *)(argv + first_input);
    a.predict.ninputs = argc - first_input;
    *out = a.predict;
    return 0;
}

static int run_predict(int argc, char **argv)

{
    dp_predict_options o;
    int topk;
    const char *logits;
    bool help;
    int status = cli_predict_parse(argc, argv, &o, &topk, &logits, &help);
    if (status != 0)
        return status;
    if (help) {
        cli_print_help(cli_predict(), stdout);
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
        /* Names from files and folders print as dp_name_str writes them:
         * a class directory named with a newline cannot split the line. */
        char name[4200];
        printf("%s:", dp_name_str(p.names[i], name, sizeof name));
        for (int j = 0; j < got; j++) {
            float prob = p.probs[i * p.outputs + idx[j]];
            if (idx[j] < p.classes)
                printf("%s %s %.4f", j ? "," : "",
                       dp_name_str(p.class_names[idx[j]], name, sizeof name), prob);
            else
                printf("%s %d %.4f", j ? "," : "", idx[j], prob);
        }
        printf("\n");
    }
    free(idx);
    dp_predictions_close(&p);
    return 0;
}
