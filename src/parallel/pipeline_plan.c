/* The pipeline's plan (dp/pipeline.h): balanced split points, `--stages`
 * lists, the GPipe and 1F1B orders, and a schedule played out with fixed
 * task times (the bubble the orders leave). */
#include "dp/pipeline.h"

#include "core/internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dp_named_value schedule_names[] = {{"1f1b", DP_PIPELINE_1F1B},
                                                {"gpipe", DP_PIPELINE_GPIPE}};
const dp_name_table dp_pipeline_schedule_names = DP_NAME_TABLE(schedule_names);

const char *dp_pipeline_schedule_name(dp_pipeline_schedule s)
{
    const char *name = dp_name_of(&dp_pipeline_schedule_names, s);
    return name ? name : "?";
}

static bool may_start(const bool *can_start, int layer)
{
    return layer == 0 || !can_start || can_start[layer];
}

/* fits[k * (n + 1) + i]: layers i .. n - 1 split into k stages, each
 * costing at most `limit` (prefix sums `sum`: layers i .. j - 1 cost
 * sum[j] - sum[i]). */
static void suffix_fits(const double *sum, const bool *can_start, int n, int stages, double limit,
                        bool *fits)
{
    for (int k = 0; k <= stages; k++)
        for (int i = 0; i <= n; i++)
            fits[k * (n + 1) + i] = k == 0 && i == n;
    for (int k = 1; k <= stages; k++)
        for (int i = 0; i < n; i++) {
            if (!may_start(can_start, i))
                continue;
            for (int j = i + 1; j <= n && sum[j] - sum[i] <= limit; j++)
                if (fits[(k - 1) * (n + 1) + j]) {
                    fits[k * (n + 1) + i] = true;
                    break;
                }
        }
}

int dp_pipeline_balance(const double *cost, const bool *can_start, int nlayers, int stages,
                        int *first)
{
    if (!cost || !first || nlayers < 1 || stages < 1 || stages > DP_PIPELINE_MAX_STAGES) {
        DP_ERROR("pipeline: %d stages of %d layers: the stages must be 1 to %d", stages, nlayers,
                 DP_PIPELINE_MAX_STAGES);
        return DP_EINVAL;
    }
    int starts = 0;
    for (int i = 0; i < nlayers; i++) {
        if (!(cost[i] >= 0) || !isfinite(cost[i])) {
            DP_ERROR("pipeline: layer %d has cost %g; costs are finite and >= 0", i, cost[i]);
            return DP_EINVAL;
        }
        starts += may_start(can_start, i);
    }
    if (stages > starts) {
        DP_ERROR("`pipeline` %d: the model has %d layers where a stage may start", stages, starts);
        return DP_EINVAL;
    }
    size_t cells = (size_t)(stages + 1) * (size_t)(nlayers + 1);
    double *sum = dp__calloc((size_t)nlayers + 1, sizeof *sum);
    double *best = dp__malloc(cells * sizeof *best);
    bool *fits = dp__calloc(cells, sizeof *fits);
    if (!sum || !best || !fits) {
        dp__free(sum);
        dp__free(best);
        dp__free(fits);
        return DP_ENOMEM;
    }
    for (int i = 0; i < nlayers; i++)
        sum[i + 1] = sum[i] + cost[i];
    /* The linear partition: best[k * (n + 1) + i] is the cheapest costliest
     * stage of layers 0 .. i - 1 in k stages (INFINITY: no split), the last
     * of them starting at some allowed j. */
    int n1 = nlayers + 1;
    for (size_t c = 0; c < cells; c++)
        best[c] = INFINITY;
    best[0] = 0;
    for (int k = 1; k <= stages; k++)
        for (int i = 1; i <= nlayers; i++)
            for (int j = 0; j < i; j++)
                if (may_start(can_start, j) && best[(k - 1) * n1 + j] < INFINITY)
                    best[k * n1 + i] =
                        fmin(best[k * n1 + i], fmax(best[(k - 1) * n1 + j], sum[i] - sum[j]));
    double limit = best[stages * n1 + nlayers];
    suffix_fits(sum, can_start, nlayers, stages, limit, fits);
    /* Earliest split points: each stage ends at the first layer from which
     * the rest still fits. */
    first[0] = 0;
    for (int k = 1; k < stages; k++) {
        int j = first[k - 1] + 1;
        while (!(fits[(stages - k) * (nlayers + 1) + j] && sum[j] - sum[first[k - 1]] <= limit))
            j++;
        first[k] = j;
    }
    first[stages] = nlayers;
    dp__free(best);
    dp__free(sum);
    dp__free(fits);
    return 0;
}

/* A non-negative decimal integer at *p (advanced past it), or -1. */
static long read_index(const char **p)
{
    if (!isdigit((unsigned char)**p))
        return -1;
    char *end;
    long v = strtol(*p, &end, 10);
    if (v > 1000000)
        return -1;
    *p = end;
    return v;
}

int dp_pipeline_parse_stages(const char *text, const bool *can_start, int nlayers, int *first,
                             int *stages)
{
    const char *t = text ? text : "";
    const char *p = t;
    int k = 0, next = 0;
    while (true) {
        const char *range = p;
        long a = read_index(&p), b = a;
        if (a >= 0 && *p == '-') {
            p++;
            b = read_index(&p);
        }
        if (a < 0 || b < 0 || (*p != ',' && *p != '\0')) {
            int len = (int)strcspn(range, ",");
            DP_ERROR("`stages` %s: '%.*s' is not a layer or a range of layers like 0-3", t, len,
                     range);
            return DP_EINVAL;
        }
        if (b < a) {
            DP_ERROR("`stages` %s: %ld-%ld runs backwards", t, a, b);
            return DP_EINVAL;
        }
        if (a > next) {
            DP_ERROR("`stages` %s: layer %d is in no stage", t, next);
            return DP_EINVAL;
        }
        if (a < next) {
            DP_ERROR("`stages` %s: layer %ld is in two stages", t, a);
            return DP_EINVAL;
        }
        if (b >= nlayers) {
            DP_ERROR("`stages` %s: layer %ld is past the model's last layer, %d", t, b,
                     nlayers - 1);
            return DP_EINVAL;
        }
        if (!may_start(can_start, (int)a)) {
            DP_ERROR("`stages` %s: layer %ld cannot start a stage (it is inside a residual "
                     "block, or runs in one kernel with the layer before it; `dptrain model` "
                     "marks where a stage may start)",
                     t, a);
            return DP_EINVAL;
        }
        if (k == DP_PIPELINE_MAX_STAGES) {
            DP_ERROR("`stages` %s: more than %d stages", t, DP_PIPELINE_MAX_STAGES);
            return DP_EINVAL;
        }
        first[k++] = (int)a;
        next = (int)b + 1;
        if (*p == '\0')
            break;
        p++;
    }
    if (next < nlayers) {
        DP_ERROR("`stages` %s: layers %d-%d are in no stage", t, next, nlayers - 1);
        return DP_EINVAL;
    }
    first[k] = nlayers;
    *stages = k;
    return 0;
}

int dp_pipeline_order(dp_pipeline_schedule schedule, int stages, int stage, int micro_batches,
                      dp_pipeline_task *tasks)
{
    if (stages < 1 || stages > DP_PIPELINE_MAX_STAGES || stage < 0 || stage >= stages ||
        micro_batches < 1 || !tasks) {
        DP_ERROR("pipeline: stage %d of %d with %d micro-batches", stage, stages, micro_batches);
        return DP_EINVAL;
    }
    int m = micro_batches, n = 0;
    /* GPipe: all forwards first. 1F1B: as many as the stages after this one
     * (the micro-batches in flight downstream), then one F one B. */
    int warmup = schedule == DP_PIPELINE_GPIPE ? m : DP_MIN(stages - 1 - stage, m);
    for (int i = 0; i < warmup; i++)
        tasks[n++] = (dp_pipeline_task){false, i};
    for (int i = 0; i < m - warmup; i++) {
        tasks[n++] = (dp_pipeline_task){false, warmup + i};
        tasks[n++] = (dp_pipeline_task){true, i};
    }
    for (int i = m - warmup; i < m; i++)
        tasks[n++] = (dp_pipeline_task){true, i};
    return 0;
}

int dp_pipeline_simulate(dp_pipeline_schedule schedule, int stages, int micro_batches,
                         const double *forward, const double *backward, dp_pipeline_timeline *out,
                         double *start, double *end)
{
    int K = stages, M = micro_batches, T = 2 * micro_batches;
    if (K < 1 || K > DP_PIPELINE_MAX_STAGES || M < 1 || !forward || !backward || !out) {
        DP_ERROR("pipeline: %d stages with %d micro-batches", K, M);
        return DP_EINVAL;
    }
    for (int k = 0; k < K; k++)
        if (!(forward[k] >= 0 && backward[k] >= 0 && isfinite(forward[k] + backward[k]))) {
            DP_ERROR("pipeline: stage %d's task times %g and %g; they are finite and >= 0", k,
                     forward[k], backward[k]);
            return DP_EINVAL;
        }
    size_t cells = (size_t)K * (size_t)T;
    dp_pipeline_task *order = dp__malloc(cells * sizeof *order);
    /* done[(k * M + m) * 2 + backward]: the task's end time, or -1. */
    double *done = dp__malloc(cells * sizeof *done);
    double *s = dp__malloc(cells * sizeof *s), *e = dp__malloc(cells * sizeof *e);
    if (!order || !done || !s || !e) {
        dp__free(order);
        dp__free(done);
        dp__free(s);
        dp__free(e);
        return DP_ENOMEM;
    }
    *out = (dp_pipeline_timeline){0};
    int next[DP_PIPELINE_MAX_STAGES] = {0};
    double free_at[DP_PIPELINE_MAX_STAGES] = {0}, busy = 0;
    for (int k = 0; k < K; k++) {
        dp_pipeline_order(schedule, K, k, M, &order[(size_t)k * T]);
        int live = 0;
        for (int i = 0; i < T; i++) {
            live += order[(size_t)k * T + i].backward ? -1 : 1;
            out->peak_live[k] = DP_MAX(out->peak_live[k], live);
        }
    }
    for (size_t i = 0; i < cells; i++)
        done[i] = -1;
    /* Each pass runs every stage's next task whose inputs are ready; a valid
     * order always lets some stage go on. */
    for (size_t finished = 0; finished < cells;) {
        size_t before = finished;
        for (int k = 0; k < K; k++) {
            if (next[k] == T)
                continue;
            dp_pipeline_task t = order[(size_t)k * T + next[k]];
            int mb = t.micro_batch;
            double ready;
            if (!t.backward)
                ready = k == 0 ? 0 : done[((size_t)(k - 1) * M + mb) * 2];
            else if (k == K - 1)
                ready = done[((size_t)k * M + mb) * 2];
            else
                ready = done[((size_t)(k + 1) * M + mb) * 2 + 1];
            if (ready < 0)
                continue;
            double took = t.backward ? backward[k] : forward[k];
            size_t at = (size_t)k * T + next[k];
            s[at] = DP_MAX(ready, free_at[k]);
            e[at] = s[at] + took;
            free_at[k] = e[at];
            done[((size_t)k * M + mb) * 2 + t.backward] = e[at];
            busy += took;
            out->makespan = DP_MAX(out->makespan, e[at]);
            next[k]++;
            finished++;
        }
        DP_ASSERT(finished > before);
    }
    out->bubble_fraction = out->makespan > 0 ? 1 - busy / (K * out->makespan) : 0;
    if (start)
        memcpy(start, s, cells * sizeof *s);
    if (end)
        memcpy(end, e, cells * sizeof *e);
    dp__free(order);
    dp__free(done);
    dp__free(s);
    dp__free(e);
    return 0;
}
