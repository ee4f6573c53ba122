/* The d2l "Multiple GPUs" chapter from scratch (seeds 000, 002, 003), with
 * dptrain's primitives in place of the notebook's functions:
 *
 *   device_params = [get_params(params, d) for d in devices]  -> dp_replicate
 *   X_shards, y_shards = split_batch(X, y, devices)            -> dp_scatter
 *   ls = [loss(lenet(X_shard, W), y_shard).sum() ...]          -> one loss per device
 *   for l in ls: l.backward()                                  -> dp_backward each
 *   allreduce([device_params[c][i].grad ...])                  -> dp_allreduce_sum,
 *                                                                 once over each
 *                                                                 device's gradient buffer
 *   for param in device_params: sgd(param, lr, X.shape[0])    -> dp_optimizer_step(1 / B)
 *
 * Nothing here waits for a device except reading the loss at the end: the
 * front end issues every device's work and the devices run together. */
#include "examples.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>

/* train_batch: one step of the seed's from-scratch data parallelism. */
static int train_batch(dp_tensor_t *X, dp_tensor_t *y, dp_model_t **replicas, dp_optimizer_t **sgd,
                       dp_device_t **devs, int n, dp_allreduce_algo algo, float *loss_sum)
{
    dp_tensor_t *X_shards[DP_MAX_DEVICES], *y_shards[DP_MAX_DEVICES], *ls[DP_MAX_DEVICES];
    dp_tensor_t *grads[DP_MAX_DEVICES];
    int shards;
    DP_TRY_EXAMPLE(dp_scatter(X_shards, &shards, X, devs, n));
    DP_TRY_EXAMPLE(dp_scatter(y_shards, &shards, y, devs, n));
    for (int k = 0; k < shards; k++) {
        dp_tensor_t *y_hat;
        DP_TRY_EXAMPLE(dp_model_forward(replicas[k], X_shards[k], true, &y_hat));
        DP_TRY_EXAMPLE(dp_cross_entropy(&ls[k], y_hat, y_shards[k], DP_REDUCE_SUM));
    }
    for (int k = 0; k < n; k++)
        dp_params_zero_grad(dp_model_params(replicas[k]));
    for (int k = 0; k < shards; k++)
        DP_TRY_EXAMPLE(dp_backward(ls[k]));
    for (int k = 0; k < n; k++) {
        DP_TRY_EXAMPLE(dp_params_finish_grad(dp_model_params(replicas[k])));
        grads[k] = dp_params_grads(dp_model_params(replicas[k]));
    }
    DP_TRY_EXAMPLE(dp_allreduce_sum(grads, n, algo));
    for (int k = 0; k < n; k++)
        DP_TRY_EXAMPLE(dp_optimizer_step(sgd[k], 1.0f / (float)dp_tensor_dim(X, 0)));
    *loss_sum = 0;
    for (int k = 0; k < shards; k++) {
        float l;
        DP_TRY_EXAMPLE(dp_tensor_to_host(ls[k], &l, sizeof l));
        *loss_sum += l;
    }
    return 0;
}

int example_lenet_scratch(const char *devices, const char *algo_name, int steps,
                          const char *checkpoint)
{
    enum { BATCH = 256 };
    dp_device_t *devs[DP_MAX_DEVICES];
    dp_model_t *params = NULL, *replicas[DP_MAX_DEVICES] = {0};
    dp_optimizer_t *sgd[DP_MAX_DEVICES] = {0};
    dp_dataset train = {0};
    dp_tape_t *tape = NULL;
    int n = 0, rc, algo;
    if (dp_name_parse(&dp_allreduce_algo_names, algo_name, &algo) < 0)
        return DP_EINVAL;
    if ((rc = dp_devices_open(devs, &n, devices, 1)) < 0)
        return rc;
    /* params lives on the host side of the story: device 0 here. */
    rc = dp_fashion_mnist_load(NULL, true, &train);
    if (rc == 0)
        rc = dp_model_init_builtin(&params, "lenet", devs[0], 0);
    if (rc == 0)
        rc = dp_replicate(replicas, params, devs, n);
    for (int k = 0; rc == 0 && k < n; k++)
        rc = dp_optimizer_init(&sgd[k], dp_model_params(replicas[k]),
                               &(dp_optimizer_options){.lr = 0.2f});
    if (rc == 0)
        rc = dp_tape_init(&tape, true);
    char names[256];
    if (rc == 0)
        printf("training on %s\n", dp_devices_str(devs, n, names, sizeof names));
    float loss = 0;
    for (int s = 0; rc == 0 && s < steps && (int64_t)(s + 1) * BATCH <= train.n; s++) {
        int64_t xs[4] = {BATCH, 1, 28, 28}, ys = BATCH;
        dp_tensor_t *X = NULL, *y = NULL;
        rc = dp_tensor_from_host(&X, devs[0], DP_F32, 4, xs, train.images + s * BATCH * 784);
        if (rc == 0)
            rc = dp_tensor_from_host(&y, devs[0], DP_I32, 1, &ys, train.labels + s * BATCH);
        dp_tape_begin(tape);
        if (rc == 0)
            rc = train_batch(X, y, replicas, sgd, devs, n, (dp_allreduce_algo)algo, &loss);
        dp_tape_end(tape);
        dp_tape_reset(tape);
        dp_tensor_free(X);
        dp_tensor_free(y);
    }
    /* A checksum of device 0's weights: the same for any number of devices,
     * up to float rounding. */
    double checksum = 0;
    if (rc == 0) {
        dp_params_t *p = dp_model_params(replicas[0]);
        int64_t numel = dp_params_numel(p);
        static float w[1 << 20];
        if (numel <= (int64_t)(sizeof w / sizeof *w) && (rc = dp_params_get_all(p, w)) == 0)
            for (int64_t i = 0; i < numel; i++)
                checksum += fabs((double)w[i]);
    }
    if (rc == 0)
        printf("after %d steps: loss %.6f, sum of |weights| %.6f\n", steps, loss / BATCH, checksum);
    if (rc == 0 && checkpoint)
        rc = dp_checkpoint_save(checkpoint, replicas[0], NULL, NULL);
    dp_tape_close(tape);
    for (int k = 0; k < n; k++) {
        dp_optimizer_close(sgd[k]);
        dp_model_close(replicas[k]);
    }
    dp_model_close(params);
    dp_dataset_close(&train);
    dp_devices_close(devs, n);
    return rc;
}

#ifndef DP_EXAMPLE_NO_MAIN
int main(int argc, char **argv)
{
    int rc =
        example_lenet_scratch(argc > 1 ? argv[1] : "2", argc > 2 ? argv[2] : "naive", 20, NULL);
    if (rc < 0)
        fprintf(stderr, "lenet_from_scratch: %s\n", dp_strerror(rc));
    return rc < 0;
}
#endif
