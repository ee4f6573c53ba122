/* Test accuracy: the end of each epoch of dp_train, and dp_evaluate of a
 * checkpoint's weights. */
#include "train/trainer.h"

#include "core/internal.h"

#include <string.h>

int dp__train_evaluate(dp__trainer *t, double *acc)
{
    dp_device_t *dev = t->dev;
    DP_TRY(dp_tensor_fill(t->correct, 0.0f));
    DP_TRY(dp_loader_start_epoch(t->test_loader, 0, 0));
    dp_batch b;
    int64_t seen = 0, issued = 0;
    int rc = 0, more;
    while (rc == 0 && (more = dp_loader_next(t->test_loader, &b)) > 0) {
        /* Each rank evaluates its chunk of every batch. */
        int64_t row0, n = dp__train_rank_rows(t, b.n, &row0);
        seen += b.n;
        if (n == 0)
            continue;
        /* One batch in flight: the previous one has finished everywhere. */
        if (issued++ > 0)
            rc = dp_waitall();
        if (rc < 0)
            break;
        int64_t pixels = (int64_t)t->in_channels * t->in_rows * t->in_cols;
        int64_t xs[4] = {n, t->in_channels, t->in_rows, t->in_cols}, ys[1] = {n};
        dp_tensor_t *x = NULL, *y = NULL, *logits;
        dp_tape_begin(t->eval_tape);
        rc = dp_tensor_from_host(&x, dev, DP_F32, 4, xs, b.x + row0 * pixels);
        if (rc == 0)
            rc = dp_tensor_from_host(&y, dev, DP_I32, 1, ys, b.y + row0);
        if (rc == 0)
            rc = dp_data_parallel_forward(t->dp, x, false, &logits);
        if (rc == 0)
            rc = dp_accuracy_accumulate(t->correct, logits, y);
        dp_tape_end(t->eval_tape);
        dp_tape_reset(t->eval_tape);
        dp_tensor_free(x);
        dp_tensor_free(y);
    }
    if (rc == 0 && more < 0)
        rc = more;
    float correct = 0;
    if (rc == 0)
        rc = dp_tensor_to_host(t->correct, &correct, sizeof correct);
    if (rc == 0)
        rc = dp_dist_sum_f32(&correct, 1);
    *acc = seen ? correct / (double)seen : 0.0;
    return rc;
}

int dp_evaluate(const dp_eval_options *o, double *test_acc, char *devices, size_t devices_size)
{
    /* A built-in name or a model file's path. */
    char model[4096];
    if (!o->checkpoint) {
        DP_ERROR("evaluate: no checkpoint given");
        return DP_EINVAL;
    }
    const char *named = o->model_def ? o->model_def->name : o->model;
    if (named) {
        if (strlen(named) >= sizeof model) {
            DP_ERROR("evaluate: the model name is longer than %zu characters", sizeof model - 1);
            return DP_EINVAL;
        }
        snprintf(model, sizeof model, "%s", named);
    } else if (dp_checkpoint_model(o->checkpoint, model, sizeof model) < 0) {
        if (dp_last_error()[0] == '\0')
            DP_ERROR("%s does not say which model it holds: give the model name", o->checkpoint);
        return DP_EINVAL;
    }
    dp_train_options to;
    dp_train_options_default(&to);
    to.model = model;
    to.model_def = o->model_def;
    to.devices = o->devices ? o->devices : "1";
    to.threads = o->threads;
    to.batch_size = o->batch_size > 0 ? o->batch_size : 256;
    to.dataset = o->dataset;
    to.data_dir = o->data_dir;
    to.test_set = o->test_set;
    to.limit_test = o->limit_test;
    to.precision = o->precision;
    dp__trainer t;
    memset(&t, 0, sizeof t);
    t.o = &to;
    t.rank = dp_dist_rank();
    t.ranks = dp_dist_size();
    int64_t one = 1;
    int rc = dp_devices_open(t.devs, &t.ndev, to.devices, to.threads);
    if (rc == 0) {
        t.dev = t.devs[0];
        dp_devices_str(t.devs, t.ndev, t.devices, sizeof t.devices);
        rc = dp__train_setup_precision(&t);
    }
    if (rc == 0)
        rc = dp__train_open_data(&t, false);
    dp_loader_options lo = {.batch_size = to.batch_size, .limit = o->limit_test};
    if (rc == 0)
        rc = dp_loader_init(&t.test_loader, t.test_set, &lo);
    /* The model takes the dataset's samples (C, H, W). */
    const dp_model_def *def = o->model_def;
    int64_t in_chw[3] = {t.in_channels, t.in_rows, t.in_cols};
    if (rc == 0 && !def)
        rc = dp_model_def_load(&def, model, in_chw);
    if (rc == 0)
        rc = dp_model_init(&t.model, def, t.dev, 0);
    if (rc == 0)
        rc = dp_checkpoint_load_weights(o->checkpoint, t.model);
    dp_data_parallel_options po = {.sgd = {.lr = 1.0f}};
    if (rc == 0)
        rc = dp_data_parallel_init(&t.dp, t.model, t.devs, t.ndev, &po);
    if (rc == 0)
        rc = dp_tape_init(&t.eval_tape, false);
    if (rc == 0)
        rc = dp_tensor_new(&t.correct, t.dev, DP_F32, 1, &one);
    if (rc == 0)
        rc = dp__train_evaluate(&t, test_acc);
    if (devices)
        snprintf(devices, devices_size, "%s", t.devices);
    dp__train_teardown(&t);
    return rc;
}
