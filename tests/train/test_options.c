/* The option list as data (dp/train_option_list.h, dp/option.h): every
 * option named once, its default taken by its own checks and read back
 * from its own text; values parsed, range checked and refused with the
 * option's name; the options that depend on each other refused together;
 * and a checkpoint keeping the options the list records, checked as the
 * command line checks them when it is read back. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void every_option_once(void **state)
{
    (void)state;
    int n;
    const dp_option *opts = dp_train_option_list(&n);
    assert_int_equal(n, DP_TRAIN_OPTION_COUNT);
    for (int i = 0; i < n; i++) {
        assert_non_null(opts[i].name);
        assert_non_null(opts[i].help);
        assert_true(opts[i].help[0] != '\0');
        assert_ptr_equal(dp_train_option_find(opts[i].name), &opts[i]);
        for (int j = 0; j < i; j++) {
            assert_string_not_equal(opts[i].name, opts[j].name);
            if (opts[i].flag && opts[j].flag)
                assert_string_not_equal(opts[i].flag, opts[j].flag);
        }
        /* An enum has its names; a value its parse and format. */
        if (opts[i].type == DP_OPTION_ENUM)
            assert_non_null(opts[i].names);
        if (opts[i].type == DP_OPTION_VALUE)
            assert_true(opts[i].parse && opts[i].format);
        /* A checkpoint holds no pointer into a file it read. */
        if (opts[i].traits & DP_OPTION_RECORD)
            assert_int_not_equal(opts[i].type, DP_OPTION_TEXT);
    }
    assert_null(dp_train_option_find("bucket_size"));
}

/* Each default passes its checks and is read back from its own text. */
static void defaults_read_back(void **state)
{
    (void)state;
    dp_train_options d, back;
    dp_train_options_default(&d);
    assert_int_equal(dp_train_options_check(&d), 0);
    int n;
    const dp_option *opts = dp_train_option_list(&n);
    for (int i = 0; i < n; i++) {
        char text[512], why[256];
        dp_option_format(&opts[i], &d, text, sizeof text);
        /* "none" is NULL's text, not a string to read; channels' 0 is the
         * first image's, which no text names. */
        if (opts[i].type == DP_OPTION_TEXT || strcmp(opts[i].name, "channels") == 0)
            continue;
        dp_train_options_default(&back);
        int rc = dp_option_parse(&opts[i], &back, text, why, sizeof why);
        /* A default outside its range ("0: off") is the default's own. */
        if (rc < 0 && dp_option_check(&opts[i], &d, why, sizeof why) < 0)
            continue;
        if (rc < 0)
            fail_msg("%s: its default's text '%s' does not read back: %s", opts[i].name, text, why);
        assert_true(dp_option_equal(&opts[i], &d, &back));
    }
}

static void values_parsed_and_refused(void **state)
{
    (void)state;
    dp_train_options o;
    dp_train_options_default(&o);
    char text[64];
    const dp_option *lr = dp_train_option_find("lr");
    assert_string_equal(dp_option_format(lr, &o, text, sizeof text), "0.2");
    assert_int_equal(dp_train_option_set(&o, "batch_size", "64"), 0);
    assert_int_equal(o.data.batch_size, 64);
    assert_int_equal(dp_train_option_set(&o, "optimizer", "adamw"), 0);
    assert_int_equal(o.optim.optimizer, DP_OPTIMIZER_ADAMW);
    assert_int_equal(dp_train_option_set(&o, "betas", "0.8,0.99"), 0);
    assert_true(o.optim.betas.beta1 == 0.8f && o.optim.betas.beta2 == 0.99f);
    assert_int_equal(dp_train_option_set(&o, "lr_milestones", "30,60"), 0);
    assert_int_equal(o.schedule.lr_milestones.n, 2);
    assert_int_equal(dp_train_option_set(&o, "augment", "crop:4,flip"), 0);
    assert_true(o.data.augment.crop_pad == 4 && o.data.augment.flip);
    assert_int_equal(dp_train_option_set(&o, "bucket_mb", "2.5"), 0);
    assert_true(o.parallel.bucket_mb == 2.5);
    assert_int_equal(dp_train_option_set(&o, "sync_bn", "true"), 0);
    assert_true(o.parallel.sync_bn);
    /* A size in bytes is written in the largest unit that divides it. */
    const dp_option *mem = dp_train_option_find("max_memory");
    static const struct {
        const char *in, *out;
        int64_t bytes;
    } sizes[] = {{"8G", "8G", (int64_t)8 << 30},
                 {"1.5G", "1536M", (int64_t)1536 << 20},
                 {"1000", "1000", 1000},
                 {"2T", "2T", (int64_t)2 << 40},
                 {"0", "0", 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        assert_int_equal(dp_train_option_set(&o, "max_memory", sizes[i].in), 0);
        assert_int_equal(o.run.max_memory, sizes[i].bytes);
        assert_string_equal(dp_option_format(mem, &o, text, sizeof text), sizes[i].out);
    }

    tu_quiet_log();
    assert_int_equal(dp_train_option_set(&o, "batch_size", "0"), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`batch_size` 0: expected an integer from 1 to 1048576");
    assert_int_equal(o.data.batch_size, 64);
    assert_int_equal(dp_train_option_set(&o, "lr", "nan"), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`lr` nan: expected a number > 0 and <= 1e+06");
    assert_int_equal(dp_train_option_set(&o, "pct_start", "1"), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`pct_start` 1: expected a number > 0 and < 1");
    assert_int_equal(dp_train_option_set(&o, "optimizer", "lamb"), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`optimizer` lamb: expected sgd, adam or adamw");
    assert_int_equal(dp_train_option_set(&o, "no_such_option", "1"), DP_EINVAL);
    tu_assert_error_mentions("no option `no_such_option`");
}

/* dp_train's own checks, before anything is opened: a value out of its
 * range, and options that need each other, each named. */
static void options_checked_before_a_run(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_train_options o;
    dp_train_options_default(&o);
    o.parallel.threads = -1;
    assert_int_equal(dp_train_options_check(&o), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`threads` -1: expected an integer from 0 to 1024");
    dp_train_options_default(&o);
    o.checkpoint.on_checkpoint_error = (dp_on_error)7;
    assert_int_equal(dp_train_options_check(&o), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`on_checkpoint_error` 7: expected stop or continue");
    dp_train_options_default(&o);
    o.optim.nesterov = true;
    assert_int_equal(dp_train_options_check(&o), DP_EINVAL);
    tu_assert_error_mentions("`nesterov` needs `optimizer` sgd and `momentum` above 0");
    dp_train_options_default(&o);
    o.output.log_steps = true;
    assert_int_equal(dp_train_options_check(&o), DP_EINVAL);
    assert_string_equal(dp_last_error(), "`log_steps` needs `metrics_path` FILE");
    dp_train_options_default(&o);
    o.data.augment.norm_channels = 1;
    o.data.augment.std[0] = 1;
    assert_int_equal(dp_train_options_check(&o), DP_EINVAL);
    tu_assert_error_mentions("`normalize` the normalisation");
    /* 0 is "off" where the range starts at 1: a default is taken. */
    dp_train_options_default(&o);
    assert_int_equal(o.parallel.pipeline, 0);
    assert_int_equal(dp_train_options_check(&o), 0);
}

/* The recorded options go into a checkpoint under their names and come
 * back as they were; a value the option would refuse is refused there
 * too, naming the key. */
static void checkpoint_keeps_the_recorded_options(void **state)
{
    (void)state;
    dp_device_t *dev;
    dp_model_t *model;
    assert_int_equal(dp_device_open(&dev, "cpu:0", 1), 0);
    assert_int_equal(dp_model_init_builtin(&model, "lenet", dev, 1), 0);
    static dp_checkpoint_state st, back;
    memset(&st, 0, sizeof st);
    snprintf(st.model, sizeof st.model, "lenet");
    snprintf(st.devices, sizeof st.devices, "[cpu:0]");
    dp_train_options_default(&st.options);
    st.options.data.batch_size = 32;
    st.options.optim.lr = 0.05f;
    st.options.numerics.precision = DP_PRECISION_BF16_REFERENCE;
    assert_int_equal(dp_augment_parse("crop:2", &st.options.data.augment), 0);
    assert_int_equal(dp_normalize_parse("0.5,0.25", &st.options.data.normalize), 0);
    st.options.parallel.bucket_mb = 3; /* not recorded */
    const char *path = tu_tmp_path("options.safetensors");
    assert_int_equal(dp_checkpoint_save(path, model, NULL, &st), 0);
    char *v;
    assert_int_equal(dp_checkpoint_meta(path, "dptrain.lr", &v), 0);
    assert_string_equal(v, "0.05");
    free(v);
    assert_int_equal(dp_checkpoint_meta(path, "dptrain.bucket_mb", &v), DP_ENOENT);
    assert_int_equal(dp_checkpoint_load(path, model, NULL, &back), 0);
    int n;
    const dp_option *opts = dp_train_option_list(&n);
    for (int i = 0; i < n; i++) {
        bool recorded = opts[i].traits & DP_OPTION_RECORD;
        assert_int_equal(back.recorded[i], recorded);
        if (recorded)
            assert_true(dp_option_equal(&opts[i], &st.options, &back.options));
    }
    assert_true(back.options.parallel.bucket_mb == 25); /* the default */
    tu_quiet_log();
    st.options.data.batch_size = 0;
    assert_int_equal(dp_checkpoint_save(path, model, NULL, &st), 0);
    assert_int_equal(dp_checkpoint_load(path, model, NULL, &back), DP_EFORMAT);
    tu_assert_error_mentions("metadata 'dptrain.batch_size' is '0': expected an integer from 1");
    dp_model_close(model);
    dp_device_close(dev);
}

/* The enums' names: one table type, one parser. */
static void name_tables(void **state)
{
    (void)state;
    int v;
    char choices[128];
    assert_int_equal(dp_name_parse(&dp_conv_algo_names, "winograd", &v), 0);
    assert_int_equal(v, DP_CONV_ALGO_WINOGRAD);
    assert_string_equal(dp_name_of(&dp_precision_names, DP_PRECISION_BF16), "bf16");
    assert_null(dp_name_of(&dp_precision_names, 9));
    assert_string_equal(dp_name_choices(&dp_on_error_names, choices, sizeof choices),
                        "stop or continue");
    assert_string_equal(dp_name_choices(&dp_progress_mode_names, choices, sizeof choices),
                        "auto, always or never");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_option_once),
        cmocka_unit_test(defaults_read_back),
        cmocka_unit_test(values_parsed_and_refused),
        cmocka_unit_test(options_checked_before_a_run),
        cmocka_unit_test_setup_teardown(checkpoint_keeps_the_recorded_options, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test(name_tables),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
