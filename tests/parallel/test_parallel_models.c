/* Data parallelism on whole models: LeNet trained on 1, 2 and 3 devices to
 * the same weights, and ResNet-18 in eval mode giving the same logits on 2
 * devices as on 1.
 *
 * "The same" is within float rounding after a step from the same weights:
 * the devices sum the gradients in another order. Over many steps that
 * rounding is a perturbation of SGD like any other, and a ReLU whose input
 * sits within it of zero flips on one side and not the other, which moves
 * the weights by far more than rounding (on the AMD EPYC Zen 5 of issue 39,
 * an ASan build's 16th step moved one fc bias by 20%); the 20 steps below
 * show that the weights train, and the test_onnx_split_invariant runs show
 * N devices equal to 1 bit for bit over whole epochs. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- LeNet on 1, 2 and 3 devices ------------------------------------------ */

enum { STEPS = 20, BATCH = 64 };

/* Trains `steps` steps of LeNet with DataParallel over n devices on the
 * first steps * BATCH training images in file order; returns replica 0's
 * parameters and checks that every replica holds the same ones. */
static float *train_lenet(const dp_dataset *ds, int n, dp_allreduce_algo algo, int steps,
                          int64_t *numel)
{
    dp_device_t *devs[3];
    tu_open_cpu_devices(devs, n);
    dp_model_t *model;
    assert_int_equal(dp_model_init_builtin(&model, "lenet", devs[0], 7), 0);
    dp_data_parallel_t *dp;
    dp_data_parallel_options opt = {.allreduce = algo, .optimizer = {.lr = 0.2f, .momentum = 0.5f}};
    assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    for (int s = 0; s < steps; s++) {
        tu_data_parallel_step(dp, tape, devs[0], ds->images + s * BATCH * 784,
                              ds->labels + s * BATCH, BATCH);
    }
    float *p0 = tu_replica_params(dp, model, n, numel);
    dp_tape_close(tape);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    dp_devices_close(devs, n);
    return p0;
}

static void lenet_n_devices_equals_one(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist()) {
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    }
    dp_dataset ds;
    assert_int_equal(dp_fashion_mnist_load(NULL, true, &ds), 0);
    int64_t numel;
    float *trained = train_lenet(&ds, 1, DP_ALLREDUCE_RING, STEPS, &numel);
    float *start = tu_lenet_initial_params(7, numel);
    double moved = tu_max_diff("weights vs their start", trained, start, numel);
    double scale = tu_max_abs("1 device's weights", trained, numel);
    printf("1 device: max |param| %.4f, max change over %d steps %.4f\n", scale, STEPS, moved);
    assert_true(moved > 1e-2);
    free(trained);
    /* One step from the same weights: the update, relative to the weights'
     * largest, is the part rounding can touch. */
    float *one = train_lenet(&ds, 1, DP_ALLREDUCE_RING, 1, &numel);
    double step = tu_max_diff("a step's update", one, start, numel);
    assert_true(step > 1e-4);
    for (int algo = 0; algo < 2; algo++) {
        for (int n = 2; n <= 3; n++) {
            float *many = train_lenet(&ds, n, (dp_allreduce_algo)algo, 1, &numel);
            double worst = tu_max_diff("n devices vs 1", many, one, numel) / step;
            printf("%d devices, %s allreduce: a step's max |difference| / its max |update| = "
                   "%.2e\n",
                   n, algo == DP_ALLREDUCE_RING ? "ring" : "naive", worst);
            assert_true(worst <= 1e-5);
            free(many);
        }
    }
    free(start);
    free(one);
    dp_dataset_close(&ds);
}

/* ResNet-18 in eval mode (running statistics) gives the same logits on 2
 * devices as on 1; after a training step on 2 devices the replicas' running
 * statistics are identical (their average). */
static void resnet_two_devices(void **state)
{
    (void)state;
    enum { N = 6 };
    static float images[N * 784];
    int32_t labels[N] = {0, 1, 2, 3, 4, 5};
    dp_rng rng;
    dp_rng_init(&rng, 3, 0);
    for (int i = 0; i < N * 784; i++)
        images[i] = dp_rng_uniform(&rng);
    float logits[2][N * 10];
    for (int n = 1; n <= 2; n++) {
        dp_device_t *devs[2];
        tu_open_cpu_devices(devs, n);
        dp_model_t *model;
        assert_int_equal(dp_model_init_builtin(&model, "resnet18", devs[0], 11), 0);
        dp_data_parallel_t *dp;
        dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING, .optimizer = {.lr = 0.1f}};
        assert_int_equal(dp_data_parallel_init(&dp, model, devs, n, &opt), 0);
        dp_tape_t *tape;
        assert_int_equal(dp_tape_init(&tape, true), 0);
        int64_t xs[4] = {N, 1, 28, 28}, ys = N;
        dp_tensor_t *x, *y, *out, *loss;
        assert_int_equal(dp_tensor_from_host(&x, devs[0], DP_F32, 4, xs, images), 0);
        assert_int_equal(dp_tensor_from_host(&y, devs[0], DP_I32, 1, &ys, labels), 0);
        dp_tape_begin(tape);
        assert_int_equal(dp_data_parallel_forward(dp, x, false, &out), 0);
        assert_int_equal(dp_tensor_to_host(out, logits[n - 1], sizeof logits[0]), 0);
        dp_tape_end(tape);
        dp_tape_reset(tape);
        /* One training step: batch statistics per replica, then the
         * running statistics averaged over the replicas. */
        dp_tape_begin(tape);
        assert_int_equal(dp_data_parallel_forward(dp, x, true, &out), 0);
        assert_int_equal(dp_cross_entropy(&loss, out, y, DP_REDUCE_SUM), 0);
        dp_data_parallel_zero_grad(dp);
        assert_int_equal(dp_backward(loss), 0);
        assert_int_equal(dp_data_parallel_step(dp, 1.0f / N), 0);
        dp_tape_end(tape);
        dp_tape_reset(tape);
        if (n == 2) {
            dp_params_t *b0 = dp_model_buffers(dp_data_parallel_replica(dp, 0));
            dp_params_t *b1 = dp_model_buffers(dp_data_parallel_replica(dp, 1));
            int64_t numel = dp_params_numel(b0);
            float *r0 = malloc((size_t)numel * sizeof *r0),
                  *r1 = malloc((size_t)numel * sizeof *r1);
            assert_int_equal(dp_params_get_all(b0, r0), 0);
            assert_int_equal(dp_params_get_all(b1, r1), 0);
            assert_memory_equal(r0, r1, (size_t)numel * sizeof *r0);
            /* running_mean moved from 0 somewhere: the step did update it */
            int moved = 0;
            for (int64_t i = 0; i < numel; i++)
                moved |= r0[i] != 0.0f && r0[i] != 1.0f;
            assert_true(moved);
            free(r0);
            free(r1);
        }
        dp_tensor_free(x);
        dp_tensor_free(y);
        dp_tape_close(tape);
        dp_data_parallel_close(dp);
        dp_model_close(model);
        dp_devices_close(devs, n);
    }
    double worst = tu_max_diff("logits, 2 devices vs 1", logits[0], logits[1], N * 10);
    double scale = tu_max_abs("logits", logits[0], N * 10);
    printf("ResNet-18 eval logits, 2 devices vs 1: max |difference| %.3g (max |logit| %.3g)\n",
           worst, scale);
    assert_true(worst <= 1e-5 * fmax(scale, 1e-3));
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lenet_n_devices_equals_one),
        cmocka_unit_test(resnet_two_devices),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
