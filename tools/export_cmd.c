/* dptrain export: a checkpoint's model and weights as an ONNX file. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What dptrain export reads. */
typedef struct export_args {
    const char *checkpoint, *onnx, *model;
} export_args;

static int run_export(int argc, char **argv);

const cli_command *cli_export(void)
{
    static dp_option flags[3];
    static const export_args defaults = {0};
    static cli_command c = {
        .name = "export",
        .summary = "a checkpoint's model as an ONNX file",
        .usage = "dptrain export --checkpoint FILE --onnx OUT.onnx [options]",
        .about = "Writes the model in FILE with its weights as an ONNX model that ONNX\n"
                 "Runtime runs (batch norm in inference mode, any batch size): an ONNX\n"
                 "model's own graph with the trained initializers, or the graph of lenet,\n"
                 "resnet18 or an nn.Sequential file.",
        .options = flags,
        .defaults = &defaults,
        .run = run_export};
    if (c.noptions == 0) {
        int n = 0;
        flags[n++] = (dp_option){CLI_FIELD(export_args, checkpoint, "checkpoint"),
                                 .flag = "--checkpoint", .metavar = "FILE", .type = DP_OPTION_TEXT,
                                 .help = "the weights [required]"};
        flags[n++] = (dp_option){CLI_FIELD(export_args, onnx, "onnx"), .flag = "--onnx",
                                 .metavar = "OUT.onnx", .type = DP_OPTION_TEXT,
                                 .help = "the file to write [required]"};
        flags[n++] = CLI_LIKE(export_args, model, "model",
                              "lenet, resnet18, a model file or an ONNX model [the built-in "
                              "model named in FILE]");
        c.noptions = n;
    }
    return &c;
}

/* The samples' shape a checkpoint records ("1,28,28"), else 1x28x28. */
static void input_shape(const char *checkpoint, int64_t *chw)
{
    chw[0] = 1;
    chw[1] = chw[2] = 28;
    char *v = NULL;
    long long c, h, w;
    if (dp_checkpoint_meta(checkpoint, "dptrain.input", &v) == 0 &&
        sscanf(v, "%lld,%lld,%lld", &c, &h, &w) == 3 && c > 0 && h > 0 && w > 0) {
        chw[0] = c;
        chw[1] = h;
        chw[2] = w;
    }
    free(v);
}

static int run_export(int argc, char **argv)
{
    export_args a = {0};
    bool help;
    int status = cli_parse(cli_export(), argc, argv, &a, NULL, &help, NULL, NULL, NULL);
    if (status || help) {
        if (help)
            cli_print_help(cli_export(), stdout);
        return status;
    }
    const char *checkpoint = a.checkpoint, *onnx = a.onnx, *model = a.model;
    if (!checkpoint || !onnx) {
        fprintf(stderr, "dptrain: error: export needs --checkpoint FILE and --onnx OUT.onnx\n");
        return 2;
    }
    char name[4096];
    if (dp_checkpoint_model_for(checkpoint, model, name, sizeof name) < 0)
        return cli_fail(DP_EINVAL);
    model = name;
    int64_t chw[3];
    input_shape(checkpoint, chw);
    const dp_model_def *def;
    dp_device_t *dev = NULL;
    dp_model_t *m = NULL;
    int rc = dp_model_def_load(&def, model, chw);
    if (rc == 0)
        rc = dp_device_open(&dev, "cpu:0", 1);
    if (rc == 0)
        rc = dp_model_init(&m, def, dev, 0);
    if (rc == 0)
        rc = dp_checkpoint_load_weights(checkpoint, m);
    if (rc == 0)
        rc = dp_model_export_onnx(m, chw, onnx);
    int64_t params = m ? dp_params_numel(dp_model_params(m)) : 0;
    dp_model_close(m);
    dp_device_close(dev);
    if (rc < 0)
        return cli_fail(rc);
    printf("wrote %s: %s on %lldx%lldx%lld inputs, %lld parameters\n", onnx, model,
           (long long)chw[0], (long long)chw[1], (long long)chw[2], (long long)params);
    return 0;
}
