/* The pipeline executor against one device: the same weights after 20
 * steps for LeNet and an nn.Sequential file (K = 2 and 3 stages, M = 1, 2
 * and 4 micro-batches, both schedules), two pipelines of two stages, and
 * ResNet-18 with its batch norm. */
#include "testutil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* LeNet-like, with Dropout: the masks must follow each sample's row. */
static const char seq_text[] = "Conv2d(1, 6, 5, padding=2)\n"
                               "ReLU()\n"
                               "MaxPool2d(2)\n"
                               "Conv2d(6, 16, 5)\n"
                               "ReLU()\n"
                               "AvgPool2d(2)\n"
                               "Flatten()\n"
                               "Linear(400, 120)\n"
                               "Dropout(0.5)\n"
                               "ReLU()\n"
                               "Linear(120, 10)\n";

typedef struct run {
    const dp_model_def *def;
    int64_t chw[3];
    int ndev, stages, micro_batches; /* stages 0: one device, no pipeline */
    dp_pipeline_schedule schedule;
    int steps;
    int64_t batch;
} run;

typedef struct result {
    float *params, *buffers;
    int64_t nparams, nbuffers, batches_tracked;
    double loss; /* the last step's */
} result;

static result train(const run *r)
{
    dp_device_t *devs[8];
    tu_open_cpu_devices(devs, r->ndev);
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, r->def, devs[0], 7), 0);
    dp_data_parallel_options u = {.allreduce = DP_ALLREDUCE_RING,
                                  .optimizer = {.lr = 0.05f, .momentum = 0.9f},
                                  .bucket_mb = 0};
    dp_pipeline_t *p = NULL;
    dp_data_parallel_t *dp;
    if (r->stages) {
        dp_pipeline_options po = {.stages = r->stages,
                                  .micro_batches = r->micro_batches,
                                  .schedule = r->schedule,
                                  .update = u};
        assert_int_equal(dp_pipeline_init(&p, m, devs, r->ndev, r->chw, &po), 0);
        dp = dp_pipeline_data_parallel(p);
    } else {
        assert_int_equal(dp_data_parallel_init(&dp, m, devs, 1, &u), 0);
    }
    int64_t one = 1, pixels = r->chw[0] * r->chw[1] * r->chw[2];
    dp_tensor_t *loss_t, *correct;
    assert_int_equal(dp_tensor_new(&loss_t, devs[0], DP_F32, 1, &one), 0);
    assert_int_equal(dp_tensor_new(&correct, devs[0], DP_F32, 1, &one), 0);
    assert_int_equal(dp_tensor_fill(correct, 0.0f), 0);
    float *x = malloc((size_t)(r->batch * pixels) * sizeof *x);
    int32_t *y = malloc((size_t)r->batch * sizeof *y);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    float last = 0;
    for (int step = 0; step < r->steps; step++) {
        tu_make_batch((uint64_t)step, r->batch, pixels, x, y);
        if (p) {
            dp_data_parallel_zero_grad(dp);
            assert_int_equal(dp_pipeline_forward_backward(p, x, y, r->batch, 3, (uint64_t)step, 0,
                                                          loss_t, correct),
                             0);
        } else {
            dp_tape_begin(tape);
            int64_t xs[4] = {r->batch, r->chw[0], r->chw[1], r->chw[2]};
            dp_tensor_t *xt, *yt, *logits, *loss;
            assert_int_equal(dp_tensor_from_host(&xt, devs[0], DP_F32, 4, xs, x), 0);
            assert_int_equal(dp_tensor_from_host(&yt, devs[0], DP_I32, 1, &r->batch, y), 0);
            dp_model_set_step(m, 3, (uint64_t)step, 0);
            assert_int_equal(dp_model_forward(m, xt, true, &logits), 0);
            assert_int_equal(dp_cross_entropy(&loss, logits, yt, DP_REDUCE_SUM), 0);
            assert_int_equal(dp_tensor_to_host(loss, &last, sizeof last), 0);
            dp_data_parallel_zero_grad(dp);
            assert_int_equal(dp_backward(loss), 0);
            dp_tape_end(tape);
            dp_tape_reset(tape);
            dp_tensor_free(xt);
            dp_tensor_free(yt);
        }
        assert_int_equal(dp_data_parallel_step(dp, 1.0f / (float)r->batch), 0);
        if (p)
            assert_int_equal(dp_tensor_to_host(loss_t, &last, sizeof last), 0);
    }
    assert_int_equal(dp_waitall(), 0);
    result out = {.loss = last};
    out.params = tu_replica_params(dp, m, dp_data_parallel_size(dp), &out.nparams);
    dp_params_t *B = dp_model_buffers(m);
    if (B) {
        out.nbuffers = dp_params_numel(B);
        out.buffers = malloc((size_t)out.nbuffers * sizeof *out.buffers);
        assert_int_equal(dp_params_get_all(B, out.buffers), 0);
        /* Every replica holds the same statistics after the update. */
        float *other = malloc((size_t)out.nbuffers * sizeof *other);
        for (int k = 1; k < dp_data_parallel_size(dp); k++) {
            assert_int_equal(
                dp_params_get_all(dp_model_buffers(dp_data_parallel_replica(dp, k)), other), 0);
            assert_memory_equal(other, out.buffers, (size_t)out.nbuffers * sizeof *other);
        }
        free(other);
    }
    out.batches_tracked = dp_model_batches_tracked(m);
    free(x);
    free(y);
    dp_tape_close(tape);
    dp_tensor_free(loss_t);
    dp_tensor_free(correct);
    if (p)
        dp_pipeline_close(p);
    else
        dp_data_parallel_close(dp);
    dp_model_close(m);
    dp_devices_close(devs, r->ndev);
    return out;
}

static void free_result(result *r)
{
    free(r->params);
    free(r->buffers);
}

/* Trains r and checks its weights against ref's: identical when
 * `identical`, else within 5e-7 of the largest weight, as the README says
 * (measured: 3.9e-7 for the nn.Sequential file, 8.9e-8 for LeNet). */
static void assert_like(const result *ref, const run *r, bool identical)
{
    result got = train(r);
    assert_int_equal(got.nparams, ref->nparams);
    double d = tu_max_rel_diff_of("parameters", got.params, ref->params, ref->nparams);
    print_message("%s on %d devices, K=%d M=%d %s: %lld weights, largest difference %.3g of the "
                  "largest weight; last loss %.6f vs %.6f\n",
                  r->def->name, r->ndev, r->stages, r->micro_batches,
                  dp_pipeline_schedule_name(r->schedule), (long long)ref->nparams, d, got.loss,
                  ref->loss);
    if (identical)
        assert_memory_equal(got.params, ref->params, (size_t)ref->nparams * sizeof *ref->params);
    else if (!(d <= 5e-7))
        fail_msg("largest difference %.3g of the largest weight, more than 5e-7", d);
    free_result(&got);
}

/* Every parameter tensor of the one-device run moved from its initial
 * values (train's seed, 7): one that got no gradient would stay equal on
 * both sides of every comparison here. */
static void assert_every_tensor_moved(const dp_model_def *def, const result *ref)
{
    dp_device_t *dev;
    tu_open_cpu_devices(&dev, 1);
    dp_model_t *m;
    assert_int_equal(dp_model_init(&m, def, dev, 7), 0);
    dp_params_t *P = dp_model_params(m);
    assert_int_equal(dp_params_numel(P), ref->nparams);
    float *init = malloc((size_t)ref->nparams * sizeof *init);
    assert_int_equal(dp_params_get_all(P, init), 0);
    for (int i = 0, off = 0; i < dp_params_count(P); i++) {
        int n = (int)dp_tensor_numel(dp_params_get(P, i)), moved = 0;
        for (int k = off; k < off + n; k++)
            moved += ref->params[k] != init[k];
        if (moved == 0)
            fail_msg("%s: parameter '%s' never moved in %d steps", def->name, dp_params_name(P, i),
                     20);
        off += n;
    }
    free(init);
    dp_model_close(m);
    dp_devices_close(&dev, 1);
}

/* Every stage count, micro-batch count and schedule against one device. */
static void equal_to_one_device(const dp_model_def *def, const int64_t *chw)
{
    run one = {.def = def, .chw = {chw[0], chw[1], chw[2]}, .ndev = 1, .steps = 20, .batch = 24};
    result ref = train(&one);
    assert_every_tensor_moved(def, &ref);
    static const int ms[3] = {1, 2, 4};
    for (int K = 2; K <= 3; K++) {
        for (int i = 0; i < 3; i++) {
            for (int s = 0; s < 2; s++) {
                run r = one;
                r.ndev = K;
                r.stages = K;
                r.micro_batches = ms[i];
                r.schedule = s ? DP_PIPELINE_GPIPE : DP_PIPELINE_1F1B;
                /* One micro-batch: the same sums in the same order. */
                assert_like(&ref, &r, ms[i] == 1);
            }
        }
    }
    free_result(&ref);
}

static void lenet_equals_one_device(void **state)
{
    (void)state;
    static const int64_t chw[3] = {1, 28, 28};
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "lenet", chw), 0);
    equal_to_one_device(def, chw);
}

static void sequential_equals_one_device(void **state)
{
    (void)state;
    static const int64_t chw[3] = {1, 28, 28};
    dp_model_def *def;
    assert_int_equal(dp_model_def_parse(&def, seq_text, "pipeline_seq.txt", chw), 0);
    equal_to_one_device(def, chw);
    dp_model_def_free(def);
}

/* Two pipelines of two stages on four devices. */
static void hybrid_equals_one_device(void **state)
{
    (void)state;
    static const int64_t chw[3] = {1, 28, 28};
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "lenet", chw), 0);
    run one = {.def = def, .chw = {1, 28, 28}, .ndev = 1, .steps = 20, .batch = 24};
    result ref = train(&one);
    for (int M = 1; M <= 2; M++) {
        run r = one;
        r.ndev = 4;
        r.stages = 2;
        r.micro_batches = M;
        assert_like(&ref, &r, false);
    }
    free_result(&ref);
}

/* Batch norm, one micro-batch: weights, running statistics and
 * num_batches_tracked as on one device, bit for bit (the same sums in the
 * same order). */
static void resnet18_equals_one_device(void **state)
{
    (void)state;
    static const int64_t chw[3] = {1, 16, 16};
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "resnet18", chw), 0);
    run one = {.def = def, .chw = {1, 16, 16}, .ndev = 1, .steps = 2, .batch = 6};
    result ref = train(&one);
    run r = one;
    r.ndev = 2;
    r.stages = 2;
    r.micro_batches = 1;
    result got = train(&r);
    double dp_ = tu_max_rel_diff_of("parameters", got.params, ref.params, ref.nparams);
    double db = tu_max_rel_diff_of("buffers", got.buffers, ref.buffers, ref.nbuffers);
    print_message("resnet18 K=2 M=1: %lld weights differ by %.3g, %lld statistics by %.3g, "
                  "batches tracked %lld vs %lld\n",
                  (long long)ref.nparams, dp_, (long long)ref.nbuffers, db,
                  (long long)got.batches_tracked, (long long)ref.batches_tracked);
    assert_int_equal(got.nbuffers, ref.nbuffers);
    assert_memory_equal(got.params, ref.params, (size_t)ref.nparams * sizeof *ref.params);
    assert_memory_equal(got.buffers, ref.buffers, (size_t)ref.nbuffers * sizeof *ref.buffers);
    assert_int_equal(got.batches_tracked, ref.batches_tracked);
    free_result(&got);
    free_result(&ref);
}

int main(int argc, char **argv)
{
    tu_quiet_log();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lenet_equals_one_device),
        cmocka_unit_test(sequential_equals_one_device),
        cmocka_unit_test(hybrid_equals_one_device),
        cmocka_unit_test(resnet18_equals_one_device),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
