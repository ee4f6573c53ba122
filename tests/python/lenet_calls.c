/* lenet_calls: claim 2's C side. Seed 003's from-scratch LeNet on 2
 * devices, issuing over the public API exactly the calls that
 * tests/python/claims_lenet_scratch.py makes through `import dptrain as
 * torch` (python/src/), so that test_claims_bits.py can require the
 * same bits from both: Python adds no arithmetic.
 *
 *   python (claims_lenet_scratch.py)         C (each call's counterpart)
 *   torch.from_numpy(W) on cuda:0 / .to(cuda:1)  dp_tensor_from_host on each device
 *   p.requires_grad_()                       dp_tensor_set_requires_grad(p, NULL)
 *   nn.parallel.scatter(X, devices)          dp_scatter
 *   F.conv2d(input=X, weight=W, bias=b),     dp_conv2d_avg_pool2d (stride 1, no
 *   then F.relu and F.avg_pool2d (kernel      padding, ReLU fused): the front end
 *   (2, 2), stride (2, 2)) of the result      defers conv2d and relu to make this
 *                                            one call (python/src/lazy.c)
 *   h2.reshape(h2.shape[0], -1)              dp_reshape (N, 800)
 *   torch.mm(h, W) + b                       dp_matmul, dp_binary(ADD) (b broadcast)
 *   CrossEntropyLoss(reduction="none")(..).sum() dp_cross_entropy(DP_REDUCE_NONE), dp_sum(-1)
 *   l.backward()                             dp_backward, the step's tape begun
 *   data[0][:] += data[i].to(data[0].device) dp_to_device, dp_add, dp_tensor_copy
 *   data[i][:] = data[0].to(data[i].device)  dp_to_device, dp_tensor_copy
 *   param -= lr * param.grad / batch_size    dp_activation(LINEAR, lr), (LINEAR, 1 / B),
 *                                            dp_binary(SUB), dp_tensor_copy
 *   param.grad.zero_()                       dp_tensor_fill(grad, 0)
 *
 * Usage: lenet_calls DATA_DIR OUT_DIR STEPS LR
 * DATA_DIR: W1.f32 .. b4.f32 (raw float32, the shapes below), X.f32 (STEPS,
 * B, 1, 28, 28) float32 and y.i32 (STEPS, B) int32, B from X's size.
 * Prints `step i loss L` as the script does; writes device 0's parameters
 * after the last step as OUT_DIR/W1.f32 .. b4.f32. */
#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NPARAMS = 8, NDEV = 2 };

static const struct {
    const char *name;
    int ndim;
    int64_t shape[4];
} params_spec[NPARAMS] = {
    {"W1", 4, {20, 1, 3, 3}}, {"b1", 1, {20}},  {"W2", 4, {50, 20, 5, 5}}, {"b2", 1, {50}},
    {"W3", 2, {800, 128}},    {"b3", 1, {128}}, {"W4", 2, {128, 10}},      {"b4", 1, {10}},
};

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int try_rc_ = (expr);                                                                      \
        if (try_rc_ < 0) {                                                                         \
            fprintf(stderr, "lenet_calls: %s: %s (%s)\n", #expr, dp_strerror(try_rc_),             \
                    dp_last_error());                                                              \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* The whole file `dir/name` into a malloc'd buffer; its size in *bytes. */
static void *read_file(const char *dir, const char *name, size_t *bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        fprintf(stderr, "lenet_calls: cannot read %s\n", path);
        exit(1);
    }
    long size = ftell(f);
    rewind(f);
    void *buf = malloc(size > 0 ? (size_t)size : 1);
    if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "lenet_calls: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *bytes = (size_t)size;
    return buf;
}

static void write_tensor(const char *dir, const char *name, const dp_tensor_t *t)
{
    size_t bytes = (size_t)dp_tensor_numel(t) * sizeof(float);
    float *buf = malloc(bytes);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    FILE *f = fopen(path, "wb");
    if (!buf || !f) {
        fprintf(stderr, "lenet_calls: cannot write %s\n", path);
        exit(1);
    }
    TRY(dp_tensor_to_host(t, buf, bytes));
    if (fwrite(buf, 1, bytes, f) != bytes || fclose(f) != 0) {
        fprintf(stderr, "lenet_calls: cannot write %s\n", path);
        exit(1);
    }
    free(buf);
}

/* y_hat (N, 10) = the seed's lenet(X (N, 1, 28, 28), W). */
static dp_tensor_t *lenet(dp_tensor_t *X, dp_tensor_t *const *W)
{
    const dp_conv2d_params conv_relu = {.relu = true};
    const dp_pool2d_params pool = {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2};
    dp_tensor_t *h1, *h2_pool, *h2, *h3_mm, *h3_lin, *h3, *y_mm, *y_hat;
    TRY(dp_conv2d_avg_pool2d(&h1, X, W[0], W[1], &conv_relu, &pool));
    TRY(dp_conv2d_avg_pool2d(&h2_pool, h1, W[2], W[3], &conv_relu, &pool));
    int64_t flat[2] = {dp_tensor_dim(h2_pool, 0), 800};
    TRY(dp_reshape(&h2, h2_pool, 2, flat));
    TRY(dp_matmul(&h3_mm, h2, W[4]));
    TRY(dp_binary(&h3_lin, DP_BINARY_ADD, h3_mm, W[5]));
    TRY(dp_relu(&h3, h3_lin));
    TRY(dp_matmul(&y_mm, h3, W[6]));
    TRY(dp_binary(&y_hat, DP_BINARY_ADD, y_mm, W[7]));
    return y_hat;
}

/* data[0][:] += data[1].to(dev 0); data[1][:] = data[0].to(dev 1). */
static void allreduce(dp_tensor_t *const *data, dp_device_t *const *devs)
{
    dp_tensor_t *moved, *sum, *back;
    TRY(dp_to_device(&moved, data[1], devs[0]));
    TRY(dp_add(&sum, data[0], moved));
    TRY(dp_tensor_copy(data[0], sum));
    TRY(dp_to_device(&back, data[0], devs[1]));
    TRY(dp_tensor_copy(data[1], back));
    dp_tensor_free(moved);
    dp_tensor_free(sum);
    dp_tensor_free(back);
}

/* param -= lr * param.grad / batch_size; param.grad.zero_(). */
static void sgd(dp_tensor_t *const *params, float lr, int64_t batch_size)
{
    for (int i = 0; i < NPARAMS; i++) {
        dp_tensor_t *grad = dp_tensor_grad(params[i]), *scaled, *step, *updated;
        TRY(dp_activation(&scaled, grad, DP_ACT_LINEAR, lr, 0.0f));
        TRY(dp_activation(&step, scaled, DP_ACT_LINEAR, (float)(1.0 / (double)batch_size), 0.0f));
        TRY(dp_binary(&updated, DP_BINARY_SUB, params[i], step));
        TRY(dp_tensor_copy(params[i], updated));
        TRY(dp_tensor_fill(grad, 0.0f));
        dp_tensor_free(scaled);
        dp_tensor_free(step);
        dp_tensor_free(updated);
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: lenet_calls DATA_DIR OUT_DIR STEPS LR\n");
        return 2;
    }
    const char *data = argv[1], *out = argv[2];
    int steps = atoi(argv[3]);
    float lr = strtof(argv[4], NULL);
    dp_device_t *devs[DP_MAX_DEVICES];
    int n = 0;
    TRY(dp_devices_open(devs, &n, "2", 0));
    if (n != NDEV) {
        fprintf(stderr, "lenet_calls: %d devices opened, not 2\n", n);
        return 1;
    }

    dp_tensor_t *W[NDEV][NPARAMS];
    for (int i = 0; i < NPARAMS; i++) {
        char name[16];
        size_t bytes;
        snprintf(name, sizeof name, "%s.f32", params_spec[i].name);
        float *host = read_file(data, name, &bytes);
        for (int k = 0; k < NDEV; k++) {
            TRY(dp_tensor_from_host(&W[k][i], devs[k], DP_F32, params_spec[i].ndim,
                                    params_spec[i].shape, host));
            TRY(dp_tensor_set_requires_grad(W[k][i], NULL));
        }
        free(host);
    }
    size_t x_bytes, y_bytes;
    float *X_all = read_file(data, "X.f32", &x_bytes);
    int32_t *y_all = read_file(data, "y.i32", &y_bytes);
    int64_t batch = (int64_t)(y_bytes / sizeof(int32_t)) / steps;
    if ((int64_t)x_bytes != steps * batch * 784 * (int64_t)sizeof(float)) {
        fprintf(stderr, "lenet_calls: X.f32 and y.i32 disagree on the batch size\n");
        return 1;
    }

    for (int step = 0; step < steps; step++) {
        int64_t xs[4] = {batch, 1, 28, 28};
        dp_tensor_t *X, *y, *X_shards[NDEV], *y_shards[NDEV], *ls[NDEV];
        dp_tape_t *tape;
        int shards;
        TRY(dp_tensor_from_host(&X, devs[0], DP_F32, 4, xs, X_all + step * batch * 784));
        TRY(dp_tensor_from_host(&y, devs[0], DP_I32, 1, &batch, y_all + step * batch));
        TRY(dp_tape_init(&tape, true));
        dp_tape_begin(tape);
        TRY(dp_scatter(X_shards, &shards, X, devs, NDEV));
        TRY(dp_scatter(y_shards, &shards, y, devs, NDEV));
        for (int k = 0; k < NDEV; k++) {
            dp_tensor_t *per_row;
            TRY(dp_cross_entropy(&per_row, lenet(X_shards[k], W[k]), y_shards[k], DP_REDUCE_NONE));
            TRY(dp_sum(&ls[k], per_row, -1, false));
        }
        for (int k = 0; k < NDEV; k++)
            TRY(dp_backward(ls[k]));
        dp_tape_end(tape);
        for (int i = 0; i < NPARAMS; i++) {
            dp_tensor_t *grads[NDEV] = {dp_tensor_grad(W[0][i]), dp_tensor_grad(W[1][i])};
            allreduce(grads, devs);
        }
        for (int k = 0; k < NDEV; k++)
            sgd(W[k], lr, batch);
        double total = 0;
        for (int k = 0; k < NDEV; k++) {
            float l;
            TRY(dp_tensor_to_host(ls[k], &l, sizeof l));
            total += l;
        }
        printf("step %d loss %.17g\n", step, total / (double)batch);
        dp_tape_close(tape);
        dp_tensor_free(X);
        dp_tensor_free(y);
    }
    for (int i = 0; i < NPARAMS; i++)
        write_tensor(out, params_spec[i].name, W[0][i]);
    for (int k = 0; k < NDEV; k++)
        for (int i = 0; i < NPARAMS; i++)
            dp_tensor_free(W[k][i]);
    free(X_all);
    free(y_all);
    dp_devices_close(devs, n);
    return 0;
}
