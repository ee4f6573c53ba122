/* A model written as the body of PyTorch's nn.Sequential with Dropout
 * trains the same on one and on two devices; a model file's loss falls,
 * every parameter moves, and Dropout(0.5) trains other weights than
 * Dropout(0): equal runs prove nothing when a parameter gets no gradient or
 * a Dropout does nothing, and `make test` has no PyTorch to compare with. */
#include "mpiutil.h"
#include "sequentialutil.h"

#include "dp/dp.h"
#include "dp/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* d2l's LeNet with Dropout(0.5) between its Linear layers, trained on
 * `devices`; the checkpoint goes to `ckpt`. */
static void train_dropout_lenet(const char *model, const char *devices, const char *ckpt)
{
    dp_train_options o;
    dp_train_options_default(&o);
    o.net.model = model;
    o.parallel.devices = devices;
    o.parallel.threads = 1;
    o.run.epochs = 1;
    o.data.batch_size = 64;
    o.optim.lr = 0.3f;
    o.run.seed = 42;
    o.data.limit_train = 512;
    o.data.limit_test = 256;
    o.checkpoint.checkpoint_path = ckpt;
    o.numerics.deterministic = true;
    dp_train_result r;
    int rc = dp_train(&o, &r);
    if (rc != 0)
        fail_msg("train on %s: %d: %s", devices, rc, last_log);
    printf("%s: test acc %.4f, train loss %.4f\n", devices, r.test_acc, r.train_loss);
}

static void test_dropout_one_vs_two_devices(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed");
    static const char text[] =
        LENET_FEATURES("Conv2d(1, 6, kernel_size=5, padding=2)\n") "Linear(16 * 5 * 5, 120)\n"
                                                                   "Sigmoid()\n"
                                                                   "Dropout(0.5)\n"
                                                                   "Linear(120, 84)\n"
                                                                   "Sigmoid()\n"
                                                                   "Dropout(p=0.5)\n"
                                                                   "Linear(84, 10)\n";
    const char *model = tu_tmp_path("dropout_lenet.txt");
    char model_path[1024];
    snprintf(model_path, sizeof model_path, "%s", model);
    assert_int_equal(tu_write_file(model_path, text, strlen(text)), 0);
    char one[1024], two[1024];
    snprintf(one, sizeof one, "%s", tu_tmp_path("one.safetensors"));
    snprintf(two, sizeof two, "%s", tu_tmp_path("two.safetensors"));
    train_dropout_lenet(model_path, "cpu:0", one);
    train_dropout_lenet(model_path, "cpu:0,cpu:1", two);
    double diff = tu_max_rel_diff(two, one);
    printf("1 vs 2 devices with dropout: max relative difference %.3g\n", diff);
    if (!(diff <= 1e-5))
        fail_msg("1 device and 2 devices differ by %.3g (relative), more than 1e-5", diff);
}

/* How far each parameter of checkpoint `ck` is from its initial value
 * (the model file `model` drawn with `seed`, as dp_train draws it): fails
 * unless every tensor moved; returns the smallest max |change| / max |value|
 * over the tensors. */
static double least_moved(const char *model, const char *ck, uint64_t seed)
{
    const dp_model_def *def;
    int64_t chw[3] = {1, 28, 28};
    assert_int_equal(dp_model_def_load(&def, model, chw), 0);
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, cpu, seed), 0);
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, ck), 0);
    dp_params_t *P = dp_model_params(m);
    double least = INFINITY;
    for (int i = 0; i < dp_params_count(P); i++) {
        dp_tensor_t *t = dp_params_get(P, i);
        int64_t n = dp_tensor_numel(t);
        float *init = malloc((size_t)n * sizeof *init);
        assert_non_null(init);
        assert_int_equal(dp_tensor_to_host(t, init, (size_t)n * sizeof *init), 0);
        dp_st_tensor st;
        assert_int_equal(dp_safetensors_find(f, dp_params_name(P, i), &st), 0);
        assert_int_equal(st.bytes, (size_t)n * sizeof(float));
        double d = tu_max_diff(dp_params_name(P, i), st.data, init, n);
        double scale = tu_max_abs(dp_params_name(P, i), st.data, n);
        free(init);
        if (!(d > 0))
            fail_msg("%s: parameter '%s' never moved from its initial value", ck,
                     dp_params_name(P, i));
        least = fmin(least, d / scale);
    }
    dp_safetensors_close(f);
    dp_model_close(m);
    dp_model_def_free((dp_model_def *)def);
    return least;
}

static void test_file_trains_and_dropout_acts(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed");
    /* ReLUs, not LeNet's sigmoids, whose loss stays at ln 10 for the first
     * ~60 steps: with momentum this one's falls by 0.4 in its 16. */
    static const char *const p[] = {"0.5", "0"};
    char ck[2][1024];
    for (int i = 0; i < 2; i++) {
        char text[512], model[1024], metrics[1024], name[64];
        snprintf(text, sizeof text,
                 "Conv2d(1, 6, 5, padding=2)\nReLU()\nMaxPool2d(2)\nFlatten()\n"
                 "Linear(6 * 14 * 14, 64)\nReLU()\nDropout(%s)\nLinear(64, 10)\n",
                 p[i]);
        snprintf(name, sizeof name, "relu_dropout_%s.txt", p[i]);
        snprintf(model, sizeof model, "%s", tu_tmp_path(name));
        assert_int_equal(tu_write_file(model, text, strlen(text)), 0);
        snprintf(name, sizeof name, "relu_dropout_%s.safetensors", p[i]);
        snprintf(ck[i], sizeof ck[i], "%s", tu_tmp_path(name));
        snprintf(metrics, sizeof metrics, "%s", tu_tmp_path("metrics.jsonl"));
        dp_train_options o;
        dp_train_options_default(&o);
        o.net.model = model;
        o.parallel.devices = "cpu:0";
        o.parallel.threads = 1;
        o.run.epochs = 2;
        o.data.batch_size = 64;
        o.optim.lr = 0.1f;
        o.optim.momentum = 0.9f;
        o.run.seed = 42;
        o.data.limit_train = 512;
        o.data.limit_test = 256;
        o.checkpoint.checkpoint_path = ck[i];
        o.output.metrics_path = metrics;
        o.numerics.deterministic = true;
        dp_train_result r;
        int rc = dp_train(&o, &r);
        if (rc != 0)
            fail_msg("train %s: %d: %s", model, rc, last_log);
        double first = mu_json_nth(metrics, "train_loss", 0);
        double second = mu_json_nth(metrics, "train_loss", 1);
        double moved = least_moved(model, ck[i], 42);
        printf("Dropout(%s): train loss %.4f in epoch 1, %.4f in epoch 2; every parameter "
               "moved, the least by %.3g of its largest value\n",
               p[i], first, second, moved);
        tu_assert_at_most(second, first - 0.1);
        tu_assert_at_most(first, log(10.0)); /* below chance already */
    }
    double d = tu_max_rel_diff(ck[0], ck[1]);
    printf("Dropout(0.5) vs Dropout(0): max relative difference %.3g\n", d);
    if (!(d > 1e-3))
        fail_msg("Dropout(0.5) and Dropout(0) trained weights within %.3g of each other", d);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dropout_one_vs_two_devices, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_file_trains_and_dropout_acts, tu_setup_tmp,
                                        tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
