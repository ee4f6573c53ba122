/* What a checkpoint may hold: its training state finite and in range (an lr
 * of nan, a momentum of inf or 1, a NaN in the history are errors naming
 * the field), its weights finite (dp_evaluate of NaN weights is an error,
 * not an accuracy), a wrong dtype named as found, and the safetensors
 * reader holding tensor names to the writer's limit. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static dp_device_t *dev;
static dp_model_t *model;

static int setup(void **state)
{
    if (tu_setup_tmp(state) != 0 || dp_device_open(&dev, "cpu:0", 1) != 0 ||
        dp_model_init_builtin(&model, "lenet", dev, 1) != 0)
        return -1;
    tu_quiet_log();
    return 0;
}

static int teardown(void **state)
{
    dp_model_close(model);
    dp_device_close(dev);
    return tu_teardown_tmp(state);
}

/* A state as dp_train writes it after one epoch. */
static void good_state(dp_checkpoint_state *st)
{
    memset(st, 0, sizeof *st);
    snprintf(st->model, sizeof st->model, "lenet");
    st->epochs_done = 1;
    st->step = 10;
    st->seed = 1;
    dp_train_options_default(&st->options);
    st->options.data.batch_size = 256;
    st->options.optim.lr = 0.1f, st->options.optim.momentum = 0.9f;
    st->nhistory = 1;
    st->history[0] = (dp_epoch_stats){.epoch = 1,
                                      .train_loss = 0.5,
                                      .train_acc = 0.8,
                                      .test_acc = 0.79,
                                      .epoch_seconds = 2,
                                      .samples_per_second = 30000,
                                      .peak_rss_mb = 300};
    snprintf(st->devices, sizeof st->devices, "[cpu:0]");
}

/* Saves `st` and loads it back: the status of the load. */
static int save_and_load(const dp_checkpoint_state *st)
{
    const char *path = tu_tmp_path("state.safetensors");
    assert_int_equal(dp_checkpoint_save(path, model, NULL, st), 0);
    static dp_checkpoint_state back;
    return dp_checkpoint_load(path, model, NULL, &back);
}

static void test_good_state_loads(void **state)
{
    (void)state;
    dp_checkpoint_state st;
    good_state(&st);
    assert_int_equal(save_and_load(&st), 0);
}

static void test_non_finite_state_is_refused(void **state)
{
    (void)state;
    dp_checkpoint_state st;
    good_state(&st);
    st.options.optim.lr = NAN;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("metadata 'dptrain.lr' is 'nan': expected a number > 0");
    good_state(&st);
    st.options.optim.lr = 0;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("'dptrain.lr' is '0'");
    good_state(&st);
    st.options.optim.momentum = INFINITY;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("metadata 'dptrain.momentum' is 'inf'");
    good_state(&st);
    st.options.optim.momentum = 1; /* SGD takes 0 <= momentum < 1 */
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("metadata 'dptrain.momentum' is '1'");
    good_state(&st);
    st.options.optim.weight_decay = -1;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("metadata 'dptrain.weight_decay' is '-1'");
}

static void test_non_finite_history_is_refused(void **state)
{
    (void)state;
    dp_checkpoint_state st;
    good_state(&st);
    st.history[0].train_loss = NAN;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("'dptrain.history' entry 1: train_loss is not finite");
    good_state(&st);
    st.history[0].test_acc = 1.5;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("entry 1: test_acc");
    good_state(&st);
    st.history[0].epoch_seconds = -INFINITY;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("entry 1: epoch_seconds");
    /* A run stopped mid-epoch keeps its partial figures: finite too. */
    good_state(&st);
    st.batch = 3;
    st.partial_loss = 1.5, st.partial_correct = 40, st.partial_seconds = INFINITY;
    assert_int_equal(save_and_load(&st), DP_EFORMAT);
    tu_assert_error_mentions("metadata 'dptrain.partial' is '1.5 40 inf'");
}

/* LeNet's weights with element k of the buffer set to v, saved to path. */
static void save_weights_with(const char *path, int64_t k, float v)
{
    dp_params_t *p = dp_model_params(model);
    int64_t n = dp_params_numel(p);
    float *w = malloc((size_t)n * sizeof *w), *keep = malloc((size_t)n * sizeof *w);
    assert_int_equal(dp_params_get_all(p, keep), 0);
    memcpy(w, keep, (size_t)n * sizeof *w);
    w[k] = v;
    assert_int_equal(dp_params_set(p, w), 0);
    assert_int_equal(dp_checkpoint_save(path, model, NULL, NULL), 0);
    assert_int_equal(dp_params_set(p, keep), 0);
    free(w);
    free(keep);
}

static void test_nan_weights_are_refused(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("nan.safetensors");
    save_weights_with(path, 5, NAN);
    assert_int_equal(dp_checkpoint_load_weights(path, model), DP_EFORMAT);
    tu_assert_error_mentions("holds nan at element 5: the weights are not finite");
    save_weights_with(path, 0, -INFINITY);
    assert_int_equal(dp_checkpoint_load_weights(path, model), DP_EFORMAT);
    tu_assert_error_mentions("holds -inf at element 0");

    /* dp_evaluate said "test acc" of such weights; now it fails. */
    save_weights_with(path, 5, NAN);
    enum { N = 8 };
    static uint8_t pixels[N * 784];
    int32_t labels[N] = {0, 1, 2, 3, 4, 5, 6, 7};
    dp_dataset test;
    assert_int_equal(dp_dataset_from_memory(&test, N, 1, 28, 28, NULL, pixels, labels, 10), 0);
    dp_eval_options o = {.model = "lenet", .checkpoint = path, .devices = "1", .test_set = &test};
    double acc = -1;
    assert_int_equal(dp_evaluate(&o, &acc, NULL, 0), DP_EFORMAT);
    tu_assert_error_mentions("the weights are not finite");
    save_weights_with(path, 5, 0.25f);
    assert_int_equal(dp_evaluate(&o, &acc, NULL, 0), 0);
    assert_true(acc >= 0 && acc <= 1);
    dp_dataset_close(&test);
}

static void test_wrong_dtype_is_named(void **state)
{
    (void)state;
    const char *good = tu_tmp_path("good.safetensors");
    assert_int_equal(dp_checkpoint_save(good, model, NULL, NULL), 0);
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, good), 0);
    int n = dp_safetensors_count(f);
    dp_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    for (int i = 0; i < n; i++) {
        assert_int_equal(dp_safetensors_get(f, i, &ts[i]), 0);
        if (strcmp(ts[i].name, "W1") == 0)
            ts[i].dtype = DP_ST_I32; /* the same bytes, read as int32 */
    }
    const char *bad = tu_tmp_path("i32.safetensors");
    assert_int_equal(dp_safetensors_write(bad, ts, n, NULL, 0), 0);
    dp_safetensors_close(f);
    free(ts);
    assert_int_equal(dp_checkpoint_load_weights(bad, model), DP_EFORMAT);
    /* It said "is not F32 [...]"; now what was found. */
    tu_assert_error_mentions("tensor 'W1' is I32 [20, 1, 3, 3], lenet expects F32 [20, 1, 3, 3]");
}

/* A safetensors file of one U8 tensor of one byte called `name`. */
static void write_named(const char *path, const char *name)
{
    char header[1024];
    int len = snprintf(header, sizeof header,
                       "{\"%s\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", name);
    uint8_t file[1100];
    for (int i = 0; i < 8; i++)
        file[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(file + 8, header, (size_t)len);
    file[8 + len] = 7;
    assert_int_equal(tu_write_file(path, file, (size_t)len + 9), 0);
}

static void test_reader_and_writer_agree_on_names(void **state)
{
    (void)state;
    char name[DP_ST_MAX_NAME + 2];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0'; /* DP_ST_MAX_NAME + 1 bytes */
    const char *path = tu_tmp_path("long.safetensors");
    write_named(path, name);
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), DP_EFORMAT);
    tu_assert_error_mentions("is longer than 256 bytes");
    /* The longest the writer takes opens, and writes back. */
    name[DP_ST_MAX_NAME] = '\0';
    write_named(path, name);
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    dp_st_tensor t;
    assert_int_equal(dp_safetensors_get(f, 0, &t), 0);
    assert_int_equal(strlen(t.name), DP_ST_MAX_NAME);
    assert_int_equal(dp_safetensors_write(tu_tmp_path("back.safetensors"), &t, 1, NULL, 0), 0);
    dp_safetensors_close(f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_state_loads),
        cmocka_unit_test(test_non_finite_state_is_refused),
        cmocka_unit_test(test_non_finite_history_is_refused),
        cmocka_unit_test(test_nan_weights_are_refused),
        cmocka_unit_test(test_wrong_dtype_is_named),
        cmocka_unit_test(test_reader_and_writer_agree_on_names),
    };
    return tu_run(argc, argv, tests, setup, teardown);
}
