/* dp_param_specs_set_weight_init: Xavier-uniform and N(0, std^2) weights
 * with PyTorch's fan_in and fan_out, biases left as defined; and the drawn
 * weights fill their range. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* d2l's LeNet's first Conv2d and first Linear, with their biases. */
static dp_param_spec lenet_specs(int i)
{
    static const dp_param_spec specs[4] = {
        {"0.weight", 4, {6, 1, 5, 5}, DP_INIT_UNIFORM, 0.2f},
        {"0.bias", 1, {6}, DP_INIT_UNIFORM, 0.2f},
        {"7.weight", 2, {120, 400}, DP_INIT_UNIFORM, 0.05f},
        {"7.bias", 1, {120}, DP_INIT_UNIFORM, 0.05f},
    };
    return specs[i];
}

static void test_xavier_bounds(void **state)
{
    (void)state;
    dp_param_spec s[4];
    for (int i = 0; i < 4; i++)
        s[i] = lenet_specs(i);
    dp_param_specs_set_weight_init(s, 4, DP_WEIGHTS_XAVIER, 0);
    /* conv: fan_in 1*5*5 = 25, fan_out 6*5*5 = 150; linear: 400 and 120. */
    assert_int_equal(s[0].init, DP_INIT_UNIFORM);
    assert_float_equal(s[0].scale, sqrt(6.0 / (25 + 150)), 1e-7);
    assert_float_equal(s[2].scale, sqrt(6.0 / (400 + 120)), 1e-7);
    /* Biases keep the module's own. */
    assert_float_equal(s[1].scale, 0.2f, 0);
    assert_float_equal(s[3].scale, 0.05f, 0);
}

static void test_normal_std(void **state)
{
    (void)state;
    dp_param_spec s[4];
    for (int i = 0; i < 4; i++)
        s[i] = lenet_specs(i);
    dp_param_specs_set_weight_init(s, 4, DP_WEIGHTS_NORMAL, 0.01f);
    assert_int_equal(s[0].init, DP_INIT_NORMAL);
    assert_int_equal(s[2].init, DP_INIT_NORMAL);
    assert_float_equal(s[2].scale, 0.01f, 0);
    assert_int_equal(s[1].init, DP_INIT_UNIFORM);
    dp_param_specs_set_weight_init(s, 4, DP_WEIGHTS_AS_DEFINED, 0);
    assert_int_equal(s[0].init, DP_INIT_NORMAL); /* as defined: unchanged */
}

/* The drawn Linear weights lie within the Xavier bound and come close to
 * it (48,000 draws: the largest is within 1% of the bound). */
static void test_drawn_weights_fill_the_bound(void **state)
{
    (void)state;
    dp_param_spec s = lenet_specs(2);
    dp_param_specs_set_weight_init(&s, 1, DP_WEIGHTS_XAVIER, 0);
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    dp_params_t *p;
    assert_int_equal(dp_params_init(&p, dev, &s, 1, true), 0);
    assert_int_equal(dp_params_init_random(p, 3), 0);
    int64_t n = dp_params_numel(p);
    float *w = malloc((size_t)n * sizeof *w);
    assert_int_equal(dp_params_get_all(p, w), 0);
    double bound = sqrt(6.0 / 520), largest = tu_max_abs("weights", w, n);
    printf("largest |w| %.6f, bound %.6f\n", largest, bound);
    assert_true(largest <= bound);
    assert_true(largest > 0.99 * bound);
    free(w);
    dp_params_close(p);
    dp_device_close(dev);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xavier_bounds),
        cmocka_unit_test(test_normal_std),
        cmocka_unit_test(test_drawn_weights_fill_the_bound),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
