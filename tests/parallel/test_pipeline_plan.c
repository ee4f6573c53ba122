/* The pipeline's plan (dp/pipeline.h): balanced split points against every
 * split there is, `--stages` lists and their errors, the GPipe and 1F1B
 * orders, and the bubble (K - 1) / (M + K - 1) that both leave for stages
 * of equal cost. */
#include "testutil.h"

#include "core/internal.h"
#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The costliest stage of a split. */
static double worst_stage(const double *cost, const int *first, int stages)
{
    double worst = 0;
    for (int k = 0; k < stages; k++) {
        double c = 0;
        for (int i = first[k]; i < first[k + 1]; i++)
            c += cost[i];
        worst = fmax(worst, c);
    }
    return worst;
}

/* Every split of n layers into `stages`, earliest first: the best worst
 * stage and the earliest split that has it. */
static double brute_force(const double *cost, const bool *can_start, int n, int stages,
                          int *best_first)
{
    double best = INFINITY;
    int first[8] = {0};
    first[stages] = n;
    /* Split points first[1..stages) as an increasing sequence, in
     * lexicographic order. */
    for (int k = 1; k < stages; k++)
        first[k] = k;
    while (true) {
        bool ok = true;
        for (int k = 1; k < stages; k++)
            ok = ok && can_start[first[k]];
        double worst = worst_stage(cost, first, stages);
        if (ok && worst < best) {
            best = worst;
            memcpy(best_first, first, sizeof(int) * (size_t)(stages + 1));
        }
        int k = stages - 1;
        while (k >= 1 && first[k] == n - (stages - k))
            k--;
        if (k < 1)
            break;
        first[k]++;
        for (int j = k + 1; j < stages; j++)
            first[j] = first[j - 1] + 1;
    }
    return best;
}

static void balance_is_the_best_split(void **state)
{
    (void)state;
    dp_rng rng;
    dp_rng_init(&rng, 7, 0);
    int checked = 0;
    for (int trial = 0; trial < 400; trial++) {
        int n = 2 + (int)dp_rng_below(&rng, 8);
        int stages = 1 + (int)dp_rng_below(&rng, (uint64_t)DP_MIN(n, 5));
        double cost[10];
        bool can_start[10];
        int starts = 1;
        for (int i = 0; i < n; i++) {
            /* Whole numbers: ties between splits are exact. */
            cost[i] = (double)dp_rng_below(&rng, 6);
            can_start[i] = i == 0 || dp_rng_below(&rng, 4) != 0;
            starts += i > 0 && can_start[i];
        }
        int got[9], want[9];
        if (stages > starts) {
            tu_quiet_log();
            assert_int_equal(dp_pipeline_balance(cost, can_start, n, stages, got), DP_EINVAL);
            tu_assert_error_mentions("layers where a stage may start");
            dp_log_set(NULL, NULL);
            continue;
        }
        assert_int_equal(dp_pipeline_balance(cost, can_start, n, stages, got), 0);
        double best = brute_force(cost, can_start, n, stages, want);
        assert_true(worst_stage(cost, got, stages) == best);
        for (int k = 0; k <= stages; k++)
            assert_int_equal(got[k], want[k]);
        checked++;
    }
    print_message("%d random splits equal the best of every split, earliest first\n", checked);
    assert_true(checked > 300);
}

static void balance_equal_layers(void **state)
{
    (void)state;
    double ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int first[4];
    assert_int_equal(dp_pipeline_balance(ones, NULL, 8, 2, first), 0);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 4);
    assert_int_equal(first[2], 8);
    assert_int_equal(dp_pipeline_balance(ones, NULL, 8, 3, first), 0);
    /* 2 + 3 + 3: the worst is 3 whichever way, the earliest split first. */
    assert_int_equal(first[1], 2);
    assert_int_equal(first[2], 5);
    assert_int_equal(first[3], 8);
    /* One heavy layer gets a stage of its own. */
    double heavy[5] = {1, 1, 10, 1, 1};
    assert_int_equal(dp_pipeline_balance(heavy, NULL, 5, 3, first), 0);
    assert_int_equal(first[1], 2);
    assert_int_equal(first[2], 3);
    tu_quiet_log();
    assert_int_equal(dp_pipeline_balance(ones, NULL, 8, 9, first), DP_EINVAL);
    tu_assert_error_mentions("`pipeline` 9: the model has 8 layers where a stage may start");
    double bad[2] = {1, NAN};
    assert_int_equal(dp_pipeline_balance(bad, NULL, 2, 1, first), DP_EINVAL);
    tu_assert_error_mentions("layer 1 has cost nan");
    dp_log_set(NULL, NULL);
}

/* LeNet's layers by their FLOPs (`dptrain model lenet`): its second
 * convolution is 90% of the work, so 2 stages split right after it. */
static void balance_lenet_flops(void **state)
{
    (void)state;
    const dp_model_def *def;
    assert_int_equal(dp_model_builtin(&def, "lenet", NULL), 0);
    dp_layer_summary *rows;
    int n;
    assert_int_equal(dp_model_summary(def, NULL, &rows, &n), 0);
    assert_int_equal(n, 8);
    double cost[8];
    for (int i = 0; i < n; i++)
        cost[i] = (double)rows[i].flops;
    int first[3];
    assert_int_equal(dp_pipeline_balance(cost, NULL, n, 2, first), 0);
    double first_stage = 0;
    for (int i = 0; i < first[1]; i++)
        first_stage += cost[i];
    print_message("lenet in 2 stages: layers 0-%d (%.0f FLOPs) and %d-7 (%.0f)\n", first[1] - 1,
                  first_stage, first[1], worst_stage(cost, first, 2));
    /* conv2d (243,360) + avg_pool2d: one stage; the second convolution and
     * the rest: the other. No split makes the second cheaper. */
    assert_int_equal(first[1], 2);
    free(rows);
}

/* A stage may start anywhere in LeNet but at its first pool (which runs
 * with the first convolution in one kernel), and in ResNet-18 nowhere
 * between a residual block's first op and its sum: its sum reads the
 * block's input. */
static void stage_starts_of_models(void **state)
{
    (void)state;
    const dp_model_def *def;
    dp_layer_summary *rows;
    int n, adds = 0, starts = 0;
    assert_int_equal(dp_model_builtin(&def, "lenet", NULL), 0);
    assert_int_equal(dp_model_summary(def, NULL, &rows, &n), 0);
    for (int i = 0; i < n; i++)
        assert_int_equal(rows[i].can_start, i != 1);
    free(rows);
    assert_int_equal(dp_model_builtin(&def, "resnet18", NULL), 0);
    assert_int_equal(dp_model_summary(def, NULL, &rows, &n), 0);
    for (int i = 0; i < n; i++) {
        starts += rows[i].can_start;
        if (strcmp(rows[i].op, "add") != 0)
            continue;
        adds++;
        /* Back to the op after the block's input: conv, bn, conv, bn (and
         * the shortcut's conv and bn). */
        int block = i - 1;
        while (block > 0 && !rows[block].can_start)
            block--;
        assert_true(i - block >= 4);
        for (int j = block + 1; j <= i; j++)
            assert_false(rows[j].can_start);
    }
    print_message("resnet18: %d residual blocks, a stage may start at %d of its %d ops\n", adds,
                  starts, n);
    assert_int_equal(adds, 8);
    free(rows);
}

static void expect_stages(const char *text, int n, int want_stages, const int *want_first)
{
    int first[DP_PIPELINE_MAX_STAGES + 1], stages = -1;
    assert_int_equal(dp_pipeline_parse_stages(text, NULL, n, first, &stages), 0);
    assert_int_equal(stages, want_stages);
    for (int k = 0; k <= stages; k++)
        assert_int_equal(first[k], want_first[k]);
}

static void expect_stages_error(const char *text, const bool *can_start, const char *why)
{
    int first[DP_PIPELINE_MAX_STAGES + 1], stages = -1;
    tu_quiet_log();
    assert_int_equal(dp_pipeline_parse_stages(text, can_start, 8, first, &stages), DP_EINVAL);
    tu_assert_error_mentions(why);
    dp_log_set(NULL, NULL);
}

static void stage_lists(void **state)
{
    (void)state;
    expect_stages("0-3,4-7", 8, 2, (int[]){0, 4, 8});
    expect_stages("0-2,3,4-7", 8, 3, (int[]){0, 3, 4, 8});
    expect_stages("0-7", 8, 1, (int[]){0, 8});
    expect_stages("0,1,2", 3, 3, (int[]){0, 1, 2, 3});
    expect_stages_error("0-3,5-7", NULL, "`stages` 0-3,5-7: layer 4 is in no stage");
    expect_stages_error("0-3,3-7", NULL, "`stages` 0-3,3-7: layer 3 is in two stages");
    expect_stages_error("0-3,4-9", NULL,
                        "`stages` 0-3,4-9: layer 9 is past the model's last layer, 7");
    expect_stages_error("0-3", NULL, "`stages` 0-3: layers 4-7 are in no stage");
    expect_stages_error("0-3,7-4", NULL, "`stages` 0-3,7-4: 7-4 runs backwards");
    expect_stages_error("0-3,,4-7", NULL, "'' is not a layer or a range of layers like 0-3");
    expect_stages_error("0-x,4-7", NULL, "'0-x' is not a layer or a range of layers like 0-3");
    expect_stages_error("", NULL, "is not a layer or a range");
    expect_stages_error("0-3,4-7,", NULL, "is not a layer or a range");
    expect_stages_error("-1-3,4-7", NULL, "'-1-3' is not a layer");
    bool blocks[8] = {true, true, false, true, true, true, true, true};
    expect_stages_error("0-1,2-7", blocks,
                        "layer 2 cannot start a stage (it is inside a residual block");
}

static int count_task(const dp_pipeline_task *t, int n, bool backward, int mb)
{
    int c = 0;
    for (int i = 0; i < n; i++)
        c += t[i].backward == backward && t[i].micro_batch == mb;
    return c;
}

static void orders(void **state)
{
    (void)state;
    dp_pipeline_task t[16];
    /* 2 stages, 4 micro-batches, 1F1B: stage 0 F0 F1 B0 F2 B1 F3 B2 B3,
     * stage 1 F0 B0 F1 B1 F2 B2 F3 B3. */
    const char *want[2] = {"F0F1B0F2B1F3B2B3", "F0B0F1B1F2B2F3B3"};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(dp_pipeline_order(DP_PIPELINE_1F1B, 2, k, 4, t), 0);
        char got[64] = "";
        for (int i = 0; i < 8; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%c%d", t[i].backward ? 'B' : 'F',
                     t[i].micro_batch);
        assert_string_equal(got, want[k]);
    }
    for (int s = 0; s < 2; s++)
        for (int K = 1; K <= 6; K++)
            for (int M = 1; M <= 8; M++)
                for (int k = 0; k < K; k++) {
                    assert_int_equal(dp_pipeline_order(s, K, k, M, t), 0);
                    int live = 0, peak = 0, next_f = 0, next_b = 0;
                    for (int i = 0; i < 2 * M; i++) {
                        /* Forwards and backwards each in micro-batch order,
                         * a backward after its forward. */
                        if (t[i].backward) {
                            assert_int_equal(t[i].micro_batch, next_b++);
                            assert_true(t[i].micro_batch < next_f);
                        } else {
                            assert_int_equal(t[i].micro_batch, next_f++);
                        }
                        live += t[i].backward ? -1 : 1;
                        peak = DP_MAX(peak, live);
                    }
                    for (int mb = 0; mb < M; mb++) {
                        assert_int_equal(count_task(t, 2 * M, false, mb), 1);
                        assert_int_equal(count_task(t, 2 * M, true, mb), 1);
                    }
                    if (s == DP_PIPELINE_GPIPE)
                        assert_int_equal(peak, M);
                    else
                        assert_int_equal(peak, DP_MIN(K - k, M));
                }
    tu_quiet_log();
    assert_int_equal(dp_pipeline_order(DP_PIPELINE_1F1B, 2, 2, 4, t), DP_EINVAL);
    assert_int_equal(dp_pipeline_order(DP_PIPELINE_1F1B, 2, 0, 0, t), DP_EINVAL);
    dp_log_set(NULL, NULL);
}

static void equal_stages_leave_the_gpipe_bubble(void **state)
{
    (void)state;
    double f[6] = {1, 1, 1, 1, 1, 1}, b[6] = {2, 2, 2, 2, 2, 2};
    double start[6 * 16], end[6 * 16];
    int cases = 0;
    for (int s = 0; s < 2; s++)
        for (int K = 1; K <= 6; K++)
            for (int M = 1; M <= 8; M++) {
                dp_pipeline_timeline tl;
                assert_int_equal(dp_pipeline_simulate(s, K, M, f, b, &tl, start, end), 0);
                double want = (double)(K - 1) / (M + K - 1);
                tu_assert_close(tl.bubble_fraction, want, 0, 1e-12);
                tu_assert_close(tl.makespan, 3.0 * (M + K - 1), 0, 1e-12);
                /* No stage runs two tasks at once. */
                for (int k = 0; k < K; k++)
                    for (int i = 1; i < 2 * M; i++)
                        assert_true(start[k * 2 * M + i] >= end[k * 2 * M + i - 1]);
                cases++;
            }
    dp_pipeline_timeline g, o;
    assert_int_equal(dp_pipeline_simulate(DP_PIPELINE_GPIPE, 4, 8, f, b, &g, NULL, NULL), 0);
    assert_int_equal(dp_pipeline_simulate(DP_PIPELINE_1F1B, 4, 8, f, b, &o, NULL, NULL), 0);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(g.peak_live[k], 8);
        assert_int_equal(o.peak_live[k], 4 - k);
    }
    print_message("%d (schedule, K, M) cases: bubble (K-1)/(M+K-1); K = 4, M = 8: 1F1B keeps "
                  "%d, %d, %d, %d micro-batches alive, GPipe 8\n",
                  cases, o.peak_live[0], o.peak_live[1], o.peak_live[2], o.peak_live[3]);
    /* Unequal stages: the slowest one sets the pace, M (f + b) of it plus
     * the others' share of one micro-batch. */
    double f2[2] = {1, 3}, b2[2] = {2, 6};
    assert_int_equal(dp_pipeline_simulate(DP_PIPELINE_GPIPE, 2, 4, f2, b2, &g, NULL, NULL), 0);
    tu_assert_close(g.makespan, (1 + 4 * 3 + 4 * 6 + 2), 0, 1e-12);
}

static void schedule_names(void **state)
{
    (void)state;
    int s;
    assert_int_equal(dp_name_parse(&dp_pipeline_schedule_names, "1f1b", &s), 0);
    assert_int_equal(s, DP_PIPELINE_1F1B);
    assert_int_equal(dp_name_parse(&dp_pipeline_schedule_names, "gpipe", &s), 0);
    assert_int_equal(s, DP_PIPELINE_GPIPE);
    assert_int_equal(dp_name_parse(&dp_pipeline_schedule_names, "GPipe", &s), DP_EINVAL);
    assert_int_equal(dp_name_parse(&dp_pipeline_schedule_names, NULL, &s), DP_EINVAL);
    assert_string_equal(dp_pipeline_schedule_name(DP_PIPELINE_GPIPE), "gpipe");
    assert_string_equal(dp_pipeline_schedule_name(DP_PIPELINE_1F1B), "1f1b");
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(balance_is_the_best_split),
        cmocka_unit_test(balance_equal_layers),
        cmocka_unit_test(balance_lenet_flops),
        cmocka_unit_test(stage_starts_of_models),
        cmocka_unit_test(stage_lists),
        cmocka_unit_test(orders),
        cmocka_unit_test(equal_stages_leave_the_gpipe_bubble),
        cmocka_unit_test(schedule_names),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
