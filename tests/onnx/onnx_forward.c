/* onnx_forward: one forward pass of an ONNX model through dptrain's public
 * API, its output written as .npy, for tests/onnx/onnx_torchvision.py, which
 * compares it with the PyTorch module's in training mode (batch norm on
 * the batch's statistics): dptrain predict runs eval mode only. Built by
 * CMake beside the tests, not a CTest test of its own.
 *
 *   onnx_forward MODEL.onnx IN.npy OUT.npy train|eval
 *
 * IN.npy: float32 images (N, C, H, W); OUT.npy: float32 (N, K), the
 * graph's output. The weights are the graph's initializers (what
 * torch.onnx.export wrote); one CPU device. Exit 0, 1 on an error (one
 * line naming it), 2 on bad usage. */
#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The error of a check made here rather than by the library. */
static char own_error[512];

static int fail(void)
{
    const char *what = own_error[0] ? own_error : dp_last_error();
    fprintf(stderr, "onnx_forward: error: %s\n", what[0] ? what : "unknown");
    return 1;
}

/* The forward of x (N, C, H, W) on dev into out (malloc'd [N, K]). */
static int run(const char *model, const dp_npy *in, bool train, dp_npy *out)
{
    const int64_t chw[3] = {in->shape[1], in->shape[2], in->shape[3]};
    dp_model_def *def = NULL;
    dp_device_t *dev = NULL;
    dp_model_t *m = NULL;
    dp_tape_t *tape = NULL;
    dp_tensor_t *x = NULL, *y = NULL;
    int rc = dp_model_def_load_onnx(&def, model, chw);
    if (rc == 0)
        rc = dp_device_open(&dev, "cpu:0", 0);
    if (rc == 0)
        rc = dp_model_init(&m, def, dev, 0);
    if (rc == 0)
        rc = dp_tape_init(&tape, false);
    if (rc == 0)
        rc = dp_tensor_from_host(&x, dev, DP_F32, 4, in->shape, in->data);
    if (rc == 0) {
        dp_tape_begin(tape);
        rc = dp_model_forward(m, x, train, &y);
    }
    if (rc == 0 && dp_tensor_ndim(y) != 2) {
        char s[64];
        snprintf(own_error, sizeof own_error, "%s: the output is %s, not (N, K)", model,
                 dp_tensor_shape_str(y, s, sizeof s));
        rc = DP_ESHAPE;
    }
    if (rc == 0) {
        out->dtype = DP_NPY_F32;
        out->ndim = 2;
        out->shape[0] = dp_tensor_dim(y, 0);
        out->shape[1] = dp_tensor_dim(y, 1);
        out->size = (size_t)dp_tensor_numel(y) * sizeof(float);
        out->data = malloc(out->size);
        rc = out->data ? dp_tensor_to_host(y, out->data, out->size) : DP_ENOMEM;
    }
    if (tape) {
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    dp_tensor_free(x);
    dp_tape_close(tape);
    dp_model_close(m);
    dp_device_close(dev);
    dp_model_def_free(def);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "train") != 0 && strcmp(argv[4], "eval") != 0)) {
        fprintf(stderr, "usage: onnx_forward MODEL.onnx IN.npy OUT.npy train|eval\n");
        return 2;
    }
    dp_npy in, out = {0};
    if (dp_npy_read(argv[2], &in) < 0)
        return fail();
    if (in.dtype != DP_NPY_F32 || in.ndim != 4) {
        snprintf(own_error, sizeof own_error, "%s: expected float32 images (N, C, H, W)", argv[2]);
        dp_npy_close(&in);
        return fail();
    }
    int rc = run(argv[1], &in, strcmp(argv[4], "train") == 0, &out);
    dp_npy_close(&in);
    if (rc == 0)
        rc = dp_npy_write(argv[3], &out);
    free(out.data);
    return rc < 0 ? fail() : 0;
}
