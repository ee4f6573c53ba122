/* A non-leaf's gradient starts afresh in each dp_backward call, a leaf's
 * accumulates, as PyTorch's: x a leaf (3), t = x * 2 recorded once and
 * backpropagated twice, after a backward through x * 3:
 *   (x*3).sum().backward(); t.sum().backward(); t.sum().backward()
 * gives x.grad = 3 + 2 + 2 = 7 in PyTorch (t's own gradient is 1 in each
 * call, never 2). A fourth, (t + t).sum(), still adds t's two
 * contributions within one call: + 4 = 11. */
#include "testutil.h"

#include "dp/dp.h"

#define OK(expr) assert_int_equal((expr), 0)

static void nonleaf_gradients_start_fresh_each_backward(void **state)
{
    (void)state;
    dp_device_t *dev;
    OK(dp_device_open(&dev, "cpu:0", 1));
    const float xv[3] = {1.0f, -2.0f, 0.5f}, two = 2.0f, three = 3.0f;
    int64_t n = 3, one = 1;
    dp_tensor_t *x, *c2, *c3;
    OK(dp_tensor_from_host(&x, dev, DP_F32, 1, &n, xv));
    OK(dp_tensor_from_host(&c2, dev, DP_F32, 1, &one, &two));
    OK(dp_tensor_from_host(&c3, dev, DP_F32, 1, &one, &three));
    OK(dp_tensor_set_requires_grad(x, NULL));
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    dp_tensor_t *t, *u, *su, *st1, *st2, *tt, *stt;
    OK(dp_binary(&t, DP_BINARY_MUL, x, c2));
    OK(dp_binary(&u, DP_BINARY_MUL, x, c3));
    OK(dp_sum(&su, u, -1, false));
    OK(dp_backward(su));
    OK(dp_sum(&st1, t, -1, false));
    OK(dp_backward(st1));
    OK(dp_sum(&st2, t, -1, false));
    OK(dp_backward(st2));
    float g[3], gt[3];
    OK(dp_tensor_to_host(dp_tensor_grad(x), g, sizeof g));
    OK(dp_tensor_to_host(dp_tensor_grad(t), gt, sizeof gt));
    for (int i = 0; i < 3; i++) {
        if (g[i] != 7.0f || gt[i] != 1.0f)
            fail_msg("element %d: x.grad %g (want 3 + 2 + 2 = 7), t's gradient %g (want 1)", i,
                     (double)g[i], (double)gt[i]);
    }
    OK(dp_add(&tt, t, t));
    OK(dp_sum(&stt, tt, -1, false));
    OK(dp_backward(stt));
    OK(dp_tensor_to_host(dp_tensor_grad(x), g, sizeof g));
    OK(dp_tensor_to_host(dp_tensor_grad(t), gt, sizeof gt));
    for (int i = 0; i < 3; i++) {
        if (g[i] != 11.0f || gt[i] != 2.0f)
            fail_msg("element %d: x.grad %g (want 7 + 4 = 11), t's gradient %g (want 2)", i,
                     (double)g[i], (double)gt[i]);
    }
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    dp_tensor_free(c2);
    dp_tensor_free(c3);
    dp_device_close(dev);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nonleaf_gradients_start_fresh_each_backward),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
