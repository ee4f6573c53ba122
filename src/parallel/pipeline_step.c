/* One pipelined step (dp_pipeline_forward_backward): the batch split over
 * the D pipelines and into micro-batches, every (stage, micro-batch)
 * forward and backward issued in the order of the schedule played out,
 * each task timed on its device, and the step's bubble measured from those
 * times once every device has run it. */
#include "parallel/pipeline.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- timing on the devices ------------------------------------------------ */

static void stamp(void *arg)
{
    *(double *)arg = dp_time_seconds();
}

/* On device 0's worker, after every device has run the step: each
 * pipeline's idle share, and pipeline 0's task times for the timeline. */
static void summarize(void *arg)
{
    dp__pipeline_summary *a = arg;
    dp_pipeline_t *p = a->p;
    const double *t = p->times[a->parity];
    double sum = 0;
    int counted = 0;
    for (int d = 0; d < p->D; d++) {
        int m = p->step_m[a->parity][d];
        if (m == 0)
            continue;
        double lo = 1e300, hi = -1e300, busy = 0;
        for (int k = 0; k < p->K; k++) {
            for (int i = 0; i < 2 * m; i++) {
                const double *s = &t[task_slot(p, d, k, i)];
                lo = DP_MIN(lo, s[0]);
                hi = DP_MAX(hi, s[1]);
                busy += s[1] - s[0];
            }
        }
        if (hi > lo) {
            sum += 1.0 - busy / ((double)p->K * (hi - lo));
            counted++;
        }
        if (d == 0) {
            for (int k = 0; k < p->K; k++) {
                for (int i = 0; i < 2 * m; i++) {
                    const double *s = &t[task_slot(p, 0, k, i)];
                    p->last_start[k * 2 * m + i] = s[0] - lo;
                    p->last_end[k * 2 * m + i] = s[1] - lo;
                }
            }
            p->last_m = m;
        }
    }
    if (counted > 0) {
        p->bubble_sum += sum / counted;
        p->bubble_steps++;
    }
}

void dp_pipeline_take_stats(dp_pipeline_t *p, dp_pipeline_stats *s)
{
    memset(s, 0, sizeof *s);
    s->steps = p->bubble_steps;
    s->bubble_fraction = p->bubble_steps ? p->bubble_sum / (double)p->bubble_steps : 0;
    for (int k = 0; k < p->K; k++) {
        s->peak_activation_bytes[k] = p->peak_bytes[k];
        s->stage_params[k] = p->stage_params[k];
    }
    s->micro_batches = p->last_m;
    s->start = p->last_start;
    s->end = p->last_end;
    p->bubble_sum = 0;
    p->bubble_steps = 0;
}

/* ---- the order of issue --------------------------------------------------- */

/* Fills p->order (each stage's tasks) and p->issue: every task as (stage,
 * index), sorted by its start in the schedule played out with forwards of
 * 1 and backwards of 2; at the same start the later stage first, so that a
 * stage's next task is queued before the earlier stage's copy of its
 * gradient makes it wait. */
static int issue_order(dp_pipeline_t *p, int m)
{
    /* Every step but a short last one has the same count: computed once. */
    if (p->issue_m == m)
        return 0;
    p->issue_m = 0;
    int K = p->K;
    for (int k = 0; k < K; k++)
        DP_TRY(dp_pipeline_order(p->schedule, K, k, m, &p->order[k * 2 * m]));
    double fwd[DP_PIPELINE_MAX_STAGES], bwd[DP_PIPELINE_MAX_STAGES];
    for (int k = 0; k < K; k++) {
        fwd[k] = 1;
        bwd[k] = 2;
    }
    dp_pipeline_timeline tl;
    DP_TRY(dp_pipeline_simulate(p->schedule, K, m, fwd, bwd, &tl, p->sim_start, NULL));
    int n = K * 2 * m;
    for (int j = 0; j < n; j++) {
        p->issue[2 * j] = j / (2 * m);
        p->issue[2 * j + 1] = j % (2 * m);
    }
    /* Insertion sort (stable, n = 2 K M is small). */
    for (int j = 1; j < n; j++) {
        int k = p->issue[2 * j], i = p->issue[2 * j + 1], at = j;
        while (at > 0) {
            int pk = p->issue[2 * (at - 1)], pi = p->issue[2 * (at - 1) + 1];
            double a = p->sim_start[k * 2 * m + i], b = p->sim_start[pk * 2 * m + pi];
            if (!(a < b || (a == b && k > pk)))
                break;
            p->issue[2 * at] = pk;
            p->issue[2 * at + 1] = pi;
            at--;
        }
        p->issue[2 * at] = k;
        p->issue[2 * at + 1] = i;
    }
    p->issue_m = m;
    return 0;
}

/* ---- the tasks ------------------------------------------------------------ */

/* Bytes of the tensors tape t holds. */
static int64_t tape_bytes(const dp_tape_t *t)
{
    int64_t n = 0;
    for (size_t i = 0; i < t->ntensors; i++)
        n += (int64_t)dp__tensor_owned_bytes(t->tensors[i]);
    return n;
}

static void note_live_bytes(dp_pipeline_t *p, int d, int k)
{
    int64_t live = 0;
    for (int m = 0; m < p->M; m++)
        live += tape_bytes(p->tapes[tape_index(p, d, k, m)]);
    if (live > p->peak_bytes[k])
        p->peak_bytes[k] = live;
}

/* Stage k's input for micro-batch m: stage k - 1's output copied to stage
 * k's device, with a state on tape t so the stage's backward gives it a
 * gradient. */
static int stage_input(dp_pipeline_t *p, int d, int k, int m, dp_tensor_t **x)
{
    dp_tensor_t *y = p->out[tape_index(p, d, k - 1, m)];
    int64_t shape[DP_MAX_DIMS];
    for (int i = 0; i < dp_tensor_ndim(y); i++)
        shape[i] = dp_tensor_dim(y, i);
    DP_TRY(dp__tape_alloc(x, stage_device(p, d, k), dp_tensor_dtype(y), dp_tensor_ndim(y), shape,
                          dp__tensor_nhwc(y)));
    /* y stays on its tape until stage k - 1's backward of m, which follows
     * this stage's backward, which follows this copy: no wait back. */
    DP_TRY(dp__copy_written(*x, y, false));
    (*x)->ag = dp__state_new(dp__tape_current());
    return (*x)->ag ? 0 : DP_ENOMEM;
}

static int run_forward(dp_pipeline_t *p, int d, int k, int m, int slot, const int64_t *offsets,
                       uint64_t seed, uint64_t step)
{
    size_t ti = tape_index(p, d, k, m);
    dp_device_t *dev = stage_device(p, d, k);
    dp_model_t *replica = stage_replica(p, d, k);
    dp_tensor_t *x = p->xs[d * p->M + m], *y, *loss;
    if (k > 0)
        DP_TRY(stage_input(p, d, k, m, &x));
    p->in[ti] = x;
    double *times = p->times[p->parity];
    dp__enqueue_host_call(dev, stamp, &times[slot], "pipeline task start");
    dp_model_set_step(replica, seed, step, offsets[m]);
    DP_TRY(dp_model_forward_layers(replica, x, p->first[k], p->first[k + 1] - 1, true, &y));
    p->out[ti] = y;
    if (k == p->K - 1) {
        dp_tensor_t *labels = p->labels[d * p->M + m];
        DP_TRY(dp_cross_entropy_smoothed(&loss, y, labels, DP_REDUCE_SUM, p->label_smoothing));
        DP_TRY(dp_accuracy_accumulate(p->correct_acc[d], y, labels));
        DP_TRY(dp_accumulate(p->loss_acc[d], loss));
        p->loss[d * p->M + m] = loss;
    }
    dp__enqueue_host_call(dev, stamp, &times[slot + 1], "pipeline task end");
    return 0;
}

static int run_backward(dp_pipeline_t *p, int d, int k, int m, int slot)
{
    size_t ti = tape_index(p, d, k, m);
    dp_device_t *dev = stage_device(p, d, k);
    double *times = p->times[p->parity];
    if (k == p->K - 1) {
        dp__enqueue_host_call(dev, stamp, &times[slot], "pipeline task start");
        DP_TRY(dp_backward(p->loss[d * p->M + m]));
    } else {
        /* The next stage's input gradient becomes this stage's output's. */
        dp_tensor_t *y = p->out[ti], *next = p->in[tape_index(p, d, k + 1, m)], *dy;
        DP_TRY(dp__grad_begin(y, &dy));
        DP_TRY(dp__copy_written(dy, dp_tensor_grad(next), true));
        DP_TRY(dp__grad_end(y, dy));
        dp__enqueue_host_call(dev, stamp, &times[slot], "pipeline task start");
        DP_TRY(dp_backward_from(y));
    }
    dp__enqueue_host_call(dev, stamp, &times[slot + 1], "pipeline task end");
    return 0;
}

/* Runs task i of stage k of pipeline d on its tape. */
static int run_task(dp_pipeline_t *p, int d, int k, int i, int m_count, const int64_t *offsets,
                    uint64_t seed, uint64_t step)
{
    dp_pipeline_task task = p->order[k * 2 * m_count + i];
    int m = task.micro_batch;
    dp_tape_t *tape = p->tapes[tape_index(p, d, k, m)];
    int slot = (int)task_slot(p, d, k, i);
    bool tree = task.backward && dp__pipeline_tree_on(m_count);
    if (tree)
        DP_TRY(dp__pipeline_tree_begin(p, d, k));
    dp_tape_begin(tape);
    int rc = task.backward ? run_backward(p, d, k, m, slot)
                           : run_forward(p, d, k, m, slot, offsets, seed, step);
    dp_tape_end(tape);
    if (rc == 0 && tree)
        rc = dp__pipeline_tree_push(p, d, k);
    if (rc < 0)
        return rc;
    note_live_bytes(p, d, k);
    if (task.backward) {
        /* The next stage's tape gave its input's gradient: it can go. */
        if (k + 1 < p->K)
            dp_tape_reset(p->tapes[tape_index(p, d, k + 1, m)]);
        if (k == 0)
            dp_tape_reset(tape);
    }
    return 0;
}

/* ---- a step ----------------------------------------------------------------- */

/* Uploads pipeline d's micro-batches: images to stage 0, labels to the last
 * stage; *m_count of them, their first rows' dropout offsets in offsets. */
static int upload(dp_pipeline_t *p, int d, const float *x, const int32_t *labels, int64_t row0,
                  int64_t rows, int64_t sample_offset, int *m_count, int64_t *offsets)
{
    const int64_t *chw = p->in_chw;
    int64_t pixels = chw[0] * chw[1] * chw[2];
    int64_t sizes[DP_PIPELINE_MAX_MICRO_BATCHES];
    int count = dp_chunk_sizes(rows, p->M, sizes);
    int64_t r = row0;
    for (int m = 0; m < count; m++) {
        int64_t xs[4] = {sizes[m], chw[0], chw[1], chw[2]};
        DP_TRY(dp_tensor_from_host(&p->xs[d * p->M + m], stage_device(p, d, 0), DP_F32, 4, xs,
                                   x + r * pixels));
        DP_TRY(dp_tensor_from_host(&p->labels[d * p->M + m], stage_device(p, d, p->K - 1), DP_I32,
                                   1, &sizes[m], labels + r));
        offsets[m] = sample_offset + r;
        r += sizes[m];
    }
    *m_count = count;
    return 0;
}

static void free_uploads(dp_pipeline_t *p)
{
    for (int i = 0; i < p->D * p->M; i++) {
        dp_tensor_free(p->xs[i]);
        dp_tensor_free(p->labels[i]);
        p->xs[i] = p->labels[i] = NULL;
    }
}

/* The pipelines' losses and right answers into device 0's tensors, then
 * the step's summary on device 0 once every device has run the step. */
static int finish(dp_pipeline_t *p, dp_tensor_t *loss, dp_tensor_t *correct)
{
    DP_TRY(dp_tensor_fill(loss, 0.0f));
    dp_tape_t *tape = p->tapes[0];
    dp_tape_begin(tape);
    int rc = 0;
    for (int d = 0; rc == 0 && d < p->D; d++) {
        dp_tensor_t *l, *c;
        rc = dp_gather(&l, &p->loss_acc[d], 1, dp_tensor_device(loss));
        if (rc == 0)
            rc = dp_gather(&c, &p->correct_acc[d], 1, dp_tensor_device(loss));
        if (rc == 0)
            rc = dp_accumulate(loss, l);
        if (rc == 0)
            rc = dp_accumulate(correct, c);
    }
    dp_tape_end(tape);
    dp_tape_reset(tape); /* released once device 0 has run the sums */
    if (rc < 0)
        return rc;
    dp_device_t *dev0 = p->devs[0];
    for (int i = 1; i < p->D * p->K; i++)
        dp__after(dev0, p->devs[i]);
    dp__pipeline_summary *a = &p->summary[p->parity];
    a->p = p;
    a->parity = p->parity;
    dp__enqueue_host_call(dev0, summarize, a, "pipeline step summary");
    p->parity ^= 1;
    return 0;
}

int dp_pipeline_forward_backward(dp_pipeline_t *p, const float *x, const int32_t *labels, int64_t n,
                                 uint64_t seed, uint64_t step, int64_t sample_offset,
                                 dp_tensor_t *loss, dp_tensor_t *correct)
{
    int64_t shard[DP_MAX_DEVICES];
    int pipelines = dp_chunk_sizes(n, p->D, shard);
    int64_t row0 = 0;
    int rc = 0;
    for (int d = 0; d < p->D; d++)
        p->step_m[p->parity][d] = 0;
    for (int d = 0; rc == 0 && d < pipelines; d++) {
        int m_count = 0;
        int64_t offsets[DP_PIPELINE_MAX_MICRO_BATCHES];
        rc = upload(p, d, x, labels, row0, shard[d], sample_offset, &m_count, offsets);
        if (rc == 0)
            rc = dp_tensor_fill(p->loss_acc[d], 0.0f);
        if (rc == 0)
            rc = dp_tensor_fill(p->correct_acc[d], 0.0f);
        if (rc == 0)
            rc = issue_order(p, m_count);
        for (int j = 0; rc == 0 && j < p->K * 2 * m_count; j++)
            rc = run_task(p, d, p->issue[2 * j], p->issue[2 * j + 1], m_count, offsets, seed, step);
        for (int k = 0; rc == 0 && k < p->K && dp__pipeline_tree_on(m_count); k++)
            rc = dp__pipeline_tree_end(p, d, k);
        p->step_m[p->parity][d] = m_count;
        row0 += shard[d];
    }
    if (rc == 0)
        rc = finish(p, loss, correct);
    free_uploads(p);
    return rc;
}
