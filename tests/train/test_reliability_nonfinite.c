/* Reliability of long runs (issue 7), against the built dptrain
 * (DP_BUILD_DIR): a NaN in a gradient (injected, or from an lr that
 * overflows) stops the run naming the step and the parameter, and the last
 * checkpoint stays as it was; --skip-nonfinite skips such a step and counts
 * it. The device check and the SGD kernel are also tested on their own. */
#include "reliabilityutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device check and the SGD kernel on their own: the first bad element
 * of a buffer (in and across the check's blocks) is found, and an update
 * over a bad gradient changes neither weights nor momentum. */
static void sgd_skips_nonfinite_gradient(void **state)
{
    (void)state;
    dp_device_t *dev[1];
    int ndev;
    /* Two threads run the check's OpenMP path; OMP_NUM_THREADS=1 (the
     * ThreadSanitizer run, which cannot see libgomp's barriers) keeps one. */
    const char *omp = getenv("OMP_NUM_THREADS");
    int threads = omp && atoi(omp) == 1 ? 1 : 2;
    assert_int_equal(dp_devices_open(dev, &ndev, "1", threads), 0);
    /* Larger than the check's parallel threshold. */
    enum { N = 300001 };
    dp_param_spec spec[2] = {{"a", 1, {1000}, DP_INIT_NORMAL, 1.0f},
                             {"b", 1, {N - 1000}, DP_INIT_NORMAL, 1.0f}};
    dp_params_t *p;
    assert_int_equal(dp_params_init(&p, dev[0], spec, 2, true), 0);
    assert_int_equal(dp_params_init_random(p, 1), 0);
    dp_optimizer_t *sgd;
    dp_optimizer_options o = {.lr = 0.1f, .momentum = 0.9f};
    assert_int_equal(dp_optimizer_init(&sgd, p, &o), 0);
    assert_true(dp_optimizer_can_check_finite(sgd));
    assert_int_equal(dp_optimizer_check_finite(sgd), 0);
    float *g = calloc(N, sizeof *g), *w0 = calloc(N, sizeof *g), *w1 = calloc(N, sizeof *g);
    float *v = calloc(N, sizeof *g);
    assert_non_null(g);
    assert_non_null(w0);
    assert_non_null(w1);
    assert_non_null(v);
    for (int64_t i = 0; i < N; i++)
        g[i] = 1e-3f * (float)(i % 97) - 0.05f;
    const int64_t bad_at[] = {0, 999, 1000, 4095, 4096, 150001, N - 1};
    const float bad_values[] = {NAN, INFINITY, -INFINITY};
    int64_t first;
    for (int k = 0; k < (int)(sizeof bad_at / sizeof *bad_at); k++) {
        float keep = g[bad_at[k]];
        g[bad_at[k]] = bad_values[k % 3];
        if (k > 0)
            g[N - 1] = NAN; /* a later bad element does not hide the first */
        assert_int_equal(dp_tensor_copy_from_host(dp_params_grads(p), g, N * sizeof *g), 0);
        assert_int_equal(dp_params_get_all(p, w0), 0);
        assert_int_equal(dp_optimizer_step(sgd, 1.0f), 0);
        assert_int_equal(dp_optimizer_read_first_nonfinite_async(sgd, &first), 0);
        assert_int_equal(dp_waitall(), 0); /* the copy is enqueued */
        assert_int_equal(dp_params_get_all(p, w1), 0);
        assert_int_equal(first, bad_at[k]);
        assert_memory_equal(w0, w1, N * sizeof *w0);
        assert_int_equal(
            dp_tensor_to_host(dp_optimizer_state(sgd, 0, &(const char *){NULL}), v, N * sizeof *v),
            0);
        for (int64_t i = 0; i < N; i++)
            assert_true(v[i] == 0.0f); /* no update ever reached the momentum */
        g[bad_at[k]] = keep;
        g[N - 1] = 0.0f;
    }
    /* A finite gradient: the check says n and the update happens. */
    assert_int_equal(dp_tensor_copy_from_host(dp_params_grads(p), g, N * sizeof *g), 0);
    assert_int_equal(dp_optimizer_step(sgd, 1.0f), 0);
    assert_int_equal(dp_optimizer_read_first_nonfinite_async(sgd, &first), 0);
    assert_int_equal(dp_waitall(), 0);
    assert_int_equal(dp_params_get_all(p, w1), 0);
    assert_int_equal(first, N);
    tu_assert_close(w1[1], w0[1] - 0.1f * g[1], 1e-6, 1e-7);
    free(g);
    free(w0);
    free(w1);
    free(v);
    dp_optimizer_close(sgd);
    dp_params_close(p);
    dp_devices_close(dev, ndev);
}

/* 2048 samples in batches of 64: 32 steps an epoch. Step 40 is epoch 2's
 * batch 7; the checkpoint of epoch 1, which the poisoned run resumed from,
 * must survive byte for byte (rewritten at the stop, it could still say
 * epoch 1 and load). */
static void injected_nan_stops(void **state)
{
    (void)state;
    NEED_DATA();
    char ck[512], kept[512], err[512];
    tmp_path(ck, "nan.safetensors");
    tmp_path(kept, "kept.safetensors");
    tmp_path(err, "err.txt");
    const char *one[] = {"--epochs", "1", "--checkpoint", ck, NULL};
    assert_int_equal(run(one, NULL), 0);
    copy_file(ck, kept);

    const char *a[] = {"--epochs", "3", "--checkpoint", ck, "--resume", ck, NULL};
    child_opts c = {.err_path = err, .env = "DP_INJECT_NAN=40:W2"};
    assert_int_equal(run(a, &c), 1);
    const char *text = slurp(err);
    printf("injected: %s", text);
    assert_has(text, "step 40 (epoch 2, batch 7): gradient of W2 is not finite (NaN or Inf)");
    assert_has(text, "stopped without applying it; the last checkpoint (");
    assert_has(text, "nan.safetensors, epoch 1) is intact");
    assert_int_equal(epochs_done(ck), 1);
    assert_same_file(ck, kept);
    assert_loadable(ck);

    /* Resumed without the injection, it goes on from epoch 1 to the end:
     * epochs 2 and 3. */
    char metrics[512];
    tmp_path(metrics, "resumed.jsonl");
    const char *b[] = {"--epochs", "3",         "--checkpoint", ck,  "--resume",
                       ck,         "--metrics", metrics,        NULL};
    assert_int_equal(run(b, NULL), 0);
    assert_int_equal(epochs_done(ck), 3);
    tu_assert_metrics_epochs(metrics, 2, 3);

    /* A realistic one: an lr so large that the weights overflow. */
    const char *d[] = {"--epochs", "1", "--lr", "1e6", NULL};
    c = (child_opts){.err_path = err};
    assert_int_equal(run(d, &c), 1);
    text = slurp(err);
    printf("lr 1e6: %s", text);
    assert_has(text, "is not finite (NaN or Inf)");
    assert_has(text, "stopped without applying it; no --checkpoint was given");
}

/* --skip-nonfinite: the bad step is dropped, the run ends normally, the
 * epoch's metrics count it. */
static void skip_nonfinite(void **state)
{
    (void)state;
    NEED_DATA();
    char err[512], metrics[512];
    tmp_path(err, "err.txt");
    tmp_path(metrics, "m.jsonl");
    const char *a[] = {"--epochs", "2", "--skip-nonfinite", "--metrics", metrics, NULL};
    child_opts c = {.err_path = err, .env = "DP_INJECT_NAN=5:b4"};
    assert_int_equal(run(a, &c), 0);
    const char *text = slurp(err);
    printf("%s", text);
    assert_has(text, "step 5 (epoch 1, batch 4): gradient of b4 is not finite (NaN or Inf); "
                     "skipped it (--skip-nonfinite)");
    text = slurp(metrics);
    printf("%s", text);
    const char *line2 = strchr(text, '\n');
    assert_non_null(line2);
    const char *skipped = strstr(text, "\"skipped_steps\": 1");
    assert_non_null(skipped); /* exactly 1: the next character ends the number */
    skipped += strlen("\"skipped_steps\": 1");
    assert_true(*skipped == ',' || *skipped == '}');
    assert_true(skipped < line2);                /* on epoch 1's line */
    assert_null(strstr(line2, "skipped_steps")); /* epoch 2 skipped none */
}

/* A skipped step changes nothing: with --no-shuffle, 2 steps of which the
 * second is poisoned and skipped end with the weights and the momentum
 * (the checkpoint's tensors) of a run that made only the first step, bit
 * for bit; on 1 device and on 2. And on 2 devices a NaN in one replica's
 * gradient stops the run with the same message as on 1. */
static void skipped_step_changes_nothing(void **state)
{
    (void)state;
    NEED_DATA();
    char skipped[512], one_step[512], err[512], err1[512];
    tmp_path(skipped, "skipped.safetensors");
    tmp_path(one_step, "one_step.safetensors");
    tmp_path(err, "err.txt");
    tmp_path(err1, "err1.txt");
    const char *devices[] = {"1", "2"};
    for (int d = 0; d < 2; d++) {
        const char *a[] = {"--epochs",
                           "1",
                           "--limit-train",
                           "128",
                           "--no-shuffle",
                           "--momentum",
                           "0.9",
                           "--devices",
                           devices[d],
                           "--skip-nonfinite",
                           "--checkpoint",
                           skipped,
                           NULL};
        child_opts c = {.err_path = err, .env = "DP_INJECT_NAN=2:W1"};
        assert_int_equal(run(a, &c), 0);
        assert_has(slurp(err), "step 2 (epoch 1, batch 1): gradient of W1 is not finite");
        const char *b[] = {"--epochs",   "1",   "--limit-train", "64",       "--no-shuffle",
                           "--momentum", "0.9", "--devices",     devices[d], "--checkpoint",
                           one_step,     NULL};
        assert_int_equal(run(b, NULL), 0);
        printf("%s device(s), step 2 skipped vs 1 step only: ", devices[d]);
        tu_assert_same_tensors(skipped, one_step);
    }
    const char *stop1[] = {"--epochs", "1", "--devices", "1", NULL};
    const char *stop2[] = {"--epochs", "1", "--devices", "2", NULL};
    child_opts c1 = {.err_path = err1, .env = "DP_INJECT_NAN=3:W2"};
    child_opts c2 = {.err_path = err, .env = "DP_INJECT_NAN=3:W2"};
    assert_int_equal(run(stop1, &c1), 1);
    assert_int_equal(run(stop2, &c2), 1);
    char *on_one = strdup(slurp(err1));
    const char *on_two = slurp(err);
    printf("1 device:  %s2 devices: %s", on_one, on_two);
    assert_has(on_one, "step 3 (epoch 1, batch 2): gradient of W2 is not finite (NaN or Inf)");
    assert_string_equal(on_two, on_one);
    free(on_one);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgd_skips_nonfinite_gradient),
        cmocka_unit_test_setup_teardown(injected_nan_stops, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(skip_nonfinite, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(skipped_step_changes_nothing, tu_setup_tmp,
                                        tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, setup, NULL);
}
