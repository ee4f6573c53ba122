/* What a run reports and keeps besides its weights: the per-step and
 * per-epoch callbacks (and a stop either asks for), the checkpoint of the
 * best test accuracy and the early stop, and the evaluation's loss, top-5
 * accuracy and confusion matrix. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct seen {
    int64_t steps[64];
    double lrs[64];
    int nsteps, nepochs;
    int64_t stop_at_step; /* on_step asks to stop here (0: never) */
    int stop_at_epoch;    /* on_epoch asks to stop here (0: never) */
} seen;

static bool on_step(const dp_step_view *v, void *user)
{
    seen *s = user;
    if (s->nsteps < 64) {
        s->steps[s->nsteps] = v->step;
        s->lrs[s->nsteps] = v->lr;
        s->nsteps++;
    }
    assert_true(isfinite(v->loss) && v->loss > 0);
    return v->step == s->stop_at_step;
}

static bool on_epoch(const dp_epoch_stats *e, void *user)
{
    seen *s = user;
    s->nepochs++;
    assert_true(e->test_loss > 0 && e->test_top5 >= e->test_acc);
    return e->epoch == s->stop_at_epoch;
}

static void options(dp_train_options *o, seen *s)
{
    dp_train_options_default(o);
    o->data.batch_size = 64;
    o->data.limit_train = 640; /* 10 steps an epoch */
    o->data.limit_test = 500;
    o->run.epochs = 3;
    o->numerics.conv_algo = DP_CONV_ALGO_DIRECT;
    o->schedule.lr_schedule = DP_LR_COSINE;
    o->on_step = on_step;
    o->on_epoch = on_epoch;
    o->callback_user = s;
}

static void callbacks_see_every_step_and_stop_a_run(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    seen s = {0};
    dp_train_options o;
    options(&o, &s);
    dp_train_result r;
    assert_int_equal(dp_train(&o, &r), 0);
    printf("on_step: %d steps, lr %.4f at the first, %.4f at the last; on_epoch: %d epochs\n",
           s.nsteps, s.lrs[0], s.lrs[s.nsteps - 1], s.nepochs);
    assert_int_equal(s.nsteps, 30);
    assert_int_equal(s.nepochs, 3);
    for (int i = 0; i < 30; i++) {
        assert_int_equal(s.steps[i], i + 1);
        double mom = -1, want = dp_lr_at(&(dp_lr_schedule){.kind = DP_LR_COSINE, .total_steps = 30},
                                         (double)0.2f, i, &mom);
        tu_assert_close(s.lrs[i], want, 0, 1e-12);
    }
    /* Asked at step 5: the run ends after the step it is on, saved. */
    memset(&s, 0, sizeof s);
    s.stop_at_step = 5;
    o.checkpoint.checkpoint_path = tu_tmp_path("stopped.safetensors");
    assert_int_equal(dp_train(&o, &r), DP_EINTR);
    printf("on_step asked to stop at step 5: stopped before epoch %d batch %lld (%d steps seen)\n",
           r.stopped_epoch, (long long)r.stopped_batch, s.nsteps);
    assert_int_equal(r.stopped_epoch, 1);
    assert_true(r.stopped_batch >= 5 && r.stopped_batch <= 7);
    assert_int_equal(dp_train_stop_signal(), 0); /* not a signal: the next run is not stopped */
    /* Asked after epoch 2: two epochs done. */
    memset(&s, 0, sizeof s);
    s.stop_at_epoch = 2;
    o.checkpoint.checkpoint_path = NULL;
    assert_int_equal(dp_train(&o, &r), DP_EINTR);
    assert_int_equal(r.epochs_done, 2);
    assert_int_equal(s.nepochs, 2);
}

/* Learning rate 0.9 keeps the seed's LeNet at chance on this slice: no
 * epoch beats the first, and --early-stop 2 ends the run after epoch 3. */
static void best_checkpoint_and_early_stop(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    seen s = {0};
    dp_train_options o;
    options(&o, &s);
    o.on_step = NULL;
    o.on_epoch = NULL;
    o.optim.lr = 0.9f;
    o.schedule.lr_schedule = DP_LR_CONSTANT;
    o.run.epochs = 6;
    o.checkpoint.early_stop = 2;
    o.checkpoint.save_best_path = tu_tmp_path("best.safetensors");
    dp_train_result r;
    assert_int_equal(dp_train(&o, &r), 0);
    printf("early stop: %d epochs, best %.4f after epoch %d\n", r.epochs_done, r.best_test_acc,
           r.best_epoch);
    assert_true(r.early_stopped);
    assert_int_equal(r.epochs_done, 3);
    assert_int_equal(r.best_epoch, 1);
    dp_safetensors_t *f;
    assert_int_equal(dp_safetensors_open(&f, o.checkpoint.save_best_path), 0);
    const char *epochs = dp_safetensors_meta(f, "dptrain.epochs_done");
    const char *best = dp_safetensors_meta(f, "dptrain.best");
    assert_non_null(epochs);
    assert_non_null(best);
    assert_string_equal(epochs, "1");
    double acc;
    int epoch;
    assert_int_equal(sscanf(best, "%lf %d", &acc, &epoch), 2);
    assert_true(acc == r.best_test_acc && epoch == 1);
    dp_safetensors_close(f);
    /* The kept weights give the kept accuracy. */
    dp_eval_options eo = {.checkpoint = o.checkpoint.save_best_path, .limit_test = 500};
    dp_eval_result er;
    assert_int_equal(dp_evaluate_detailed(&eo, &er), 0);
    tu_assert_close(er.test_acc, r.best_test_acc, 0, 1e-9);
    dp_eval_result_free(&er);
}

/* The confusion matrix holds every sample once, its diagonal the right
 * answers; the top-5 accuracy is at least the accuracy. */
static void evaluation_counts(void **state)
{
    (void)state;
    if (!tu_have_fashion_mnist())
        tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");
    seen s = {0};
    dp_train_options o;
    options(&o, &s);
    o.on_step = NULL;
    o.on_epoch = NULL;
    o.run.epochs = 1;
    o.data.limit_train = 5120;
    o.optim.optimizer = DP_OPTIMIZER_ADAMW;
    o.optim.lr = 0.003f;
    o.checkpoint.checkpoint_path = tu_tmp_path("trained.safetensors");
    dp_train_result r;
    assert_int_equal(dp_train(&o, &r), 0);
    for (int devices = 1; devices <= 2; devices++) {
        dp_eval_options eo = {.checkpoint = o.checkpoint.checkpoint_path,
                              .limit_test = 1000,
                              .devices = devices == 1 ? "1" : "2"};
        dp_eval_result er;
        assert_int_equal(dp_evaluate_detailed(&eo, &er), 0);
        int64_t total = 0, diagonal = 0;
        for (int i = 0; i < er.classes * er.classes; i++)
            total += er.confusion[i];
        for (int i = 0; i < er.classes; i++)
            diagonal += er.confusion[i * er.classes + i];
        printf("%d device(s): acc %.4f, loss %.4f, top-5 %.4f; confusion matrix of %lld samples, "
               "%lld on its diagonal\n",
               devices, er.test_acc, er.test_loss, er.test_top5, (long long)total,
               (long long)diagonal);
        assert_int_equal(er.classes, 10);
        assert_int_equal(total, 1000);
        tu_assert_close((double)diagonal / 1000.0, er.test_acc, 0, 1e-12);
        assert_true(er.test_acc > 0.3 && er.test_top5 > er.test_acc && er.test_top5 <= 1.0);
        assert_true(er.test_loss > 0.1 && er.test_loss < 2.3);
        dp_eval_result_free(&er);
    }
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(callbacks_see_every_step_and_stop_a_run, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(best_checkpoint_and_early_stop, tu_setup_tmp,
                                        tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(evaluation_counts, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
