/* End to end: the training loss goes down on a real slice of Fashion-MNIST,
 * trained data-parallel on two single-threaded devices, and the metrics file
 * says so too. */
#include "testutil.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void loss_goes_down(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist()) {
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    }
    char *dir = tu_tempdir("train");
    char metrics[256];
    snprintf(metrics, sizeof metrics, "%s/m.jsonl", dir);
    dp_train_options o;
    dp_train_options_default(&o);
    o.data.limit_train = 3072;
    o.data.limit_test = 1000;
    o.data.batch_size = 64;
    o.optim.lr = 0.1f;
    o.optim.momentum = 0.9f;
    o.run.epochs = 4;
    o.run.seed = 1;
    o.parallel.devices = "2";
    o.parallel.threads = 1;
    o.output.metrics_path = metrics;
    o.output.log_steps = true;
    dp_train_result r;
    assert_int_equal(dp_train(&o, &r), 0);
    assert_int_equal(r.epochs_done, 4);
    printf("final train loss %.4f, train acc %.4f, test acc %.4f\n", r.train_loss, r.train_acc,
           r.test_acc);
    /* Chance is ln(10) = 2.303 and 10%. */
    assert_true(r.train_loss < 1.9);
    assert_true(r.test_acc > 0.35);

    /* 4 epoch lines and 48 step lines; the first step's loss is near ln 10. */
    FILE *f = fopen(metrics, "r");
    assert_non_null(f);
    char line[1024];
    int epochs = 0, steps = 0;
    double first = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "{\"epoch\":", 9) == 0)
            epochs++;
        if (strncmp(line, "{\"step\":", 8) == 0) {
            if (steps++ == 0)
                assert_int_equal(sscanf(strstr(line, "\"loss\":") + 7, "%lf", &first), 1);
        }
    }
    fclose(f);
    assert_int_equal(epochs, 4);
    assert_int_equal(steps, 4 * 48);
    tu_assert_close(first, 2.302585, 0, 0.01);
    remove(metrics);
    remove(dir);
    free(dir);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(loss_goes_down)};
    return tu_run(argc, argv, tests, NULL, NULL);
}
