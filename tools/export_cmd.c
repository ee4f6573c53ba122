/* dptrain export: a checkpoint's model and weights as an ONNX file. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_export[] =
    "usage: dptrain export --checkpoint FILE --onnx OUT.onnx [options]\n"
    "\n"
    "Writes the model in FILE with its weights as an ONNX model that ONNX\n"
    "Runtime runs (batch norm in inference mode, any batch size): an ONNX\n"
    "model's own graph with the trained initializers, or the graph of lenet,\n"
    "resnet18 or an nn.Sequential file.\n"
    "\n"
    "options (default in brackets):\n"
    "  --checkpoint FILE    the weights (required)\n"
    "  --onnx OUT.onnx      the file to write (required)\n"
    "  --model NAME|FILE    lenet, resnet18, a model file or an ONNX model [the\n"
    "                       model named in FILE]\n"
    "  -h, --help           show this help\n";

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

int cmd_export(int argc, char **argv)
{
    const char *checkpoint = NULL, *onnx = NULL, *model = NULL;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            fputs(usage_export, stdout);
            return 0;
        }
        static const char *const with_value[] = {"--checkpoint", "--onnx", "--model"};
        const char *v;
        if (cli_option_value("export", with_value, sizeof with_value / sizeof *with_value, argc,
                             argv, &i, &v))
            return 2;
        if (strcmp(f, "--checkpoint") == 0)
            checkpoint = v;
        else if (strcmp(f, "--onnx") == 0)
            onnx = v;
        else if (cli_check_model(f, v))
            return 2;
        else
            model = v;
    }
    if (!checkpoint || !onnx) {
        fprintf(stderr, "dptrain: error: export needs --checkpoint FILE and --onnx OUT.onnx\n");
        return 2;
    }
    char name[4096];
    if (!model) {
        if (dp_checkpoint_model(checkpoint, name, sizeof name) < 0) {
            fprintf(stderr, "dptrain: error: %s names no model: give --model\n", checkpoint);
            return 1;
        }
        model = name;
    }
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
