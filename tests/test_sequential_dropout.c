/* A model written as the body of PyTorch's nn.Sequential with Dropout
 * trains the same on one and on two devices. */
#include "sequentialutil.h"

#include "dp/train.h"

#include <stdio.h>
#include <string.h>

/* d2l's LeNet with Dropout(0.5) between its Linear layers, trained on
 * `devices`; the checkpoint goes to `ckpt`. */
static void train_dropout_lenet(const char *model, const char *devices, const char *ckpt)
{
    dp_train_options o;
    dp_train_options_default(&o);
    o.model = model;
    o.devices = devices;
    o.threads = 1;
    o.epochs = 1;
    o.batch_size = 64;
    o.lr = 0.3f;
    o.seed = 42;
    o.limit_train = 512;
    o.limit_test = 256;
    o.checkpoint_path = ckpt;
    o.deterministic = true;
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

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dropout_one_vs_two_devices, tu_setup_tmp,
                                        tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, group_setup, group_teardown);
}
