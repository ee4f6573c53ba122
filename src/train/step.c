/* One training step: upload this rank's chunk of the batch, forward,
 * loss, backward, allreduce and update, all enqueued; the step's loss and
 * gradient check are copied to the host for the front end to read later. */
#include "train/trainer.h"

#include "core/internal.h"

/* The allreduce and update of the step of batch b (the gradient check
 * included), and the copy of the check's result to the host. */
static int finish_step(dp__trainer *t, const dp_batch *b)
{
    if (t->inject_step == t->step + 1)
        DP_TRY(dp__train_inject_nan(t));
    /* The seed's sgd(params, lr, batch_size) after the allreduce: the loss
     * is summed over the whole (global) batch, the update divides by its
     * size. */
    DP_TRY(dp_data_parallel_step(t->dp, 1.0f / (float)b->n));
    if (t->checked)
        DP_TRY(dp_sgd_read_first_nonfinite_async(dp_data_parallel_sgd(t->dp, 0),
                                                 &t->step_nonfinite[b->index]));
    return 0;
}

/* Issues one training step on (this rank's chunk of) batch b; returns
 * without waiting. */
int dp__train_step(dp__trainer *t, const dp_batch *b)
{
    dp_device_t *dev = t->dev;
    int64_t row0, n = dp__train_rank_rows(t, b->n, &row0);
    /* x: [n, channels, rows, cols], this rank's rows of the batch. */
    int64_t pixels = (int64_t)t->in_channels * t->in_rows * t->in_cols;
    int64_t xs[4] = {n, t->in_channels, t->in_rows, t->in_cols}, ys[1] = {n};
    dp_tensor_t *x = NULL, *y = NULL, *logits, *loss;
    t->step_rows[b->index] = n;
    if (n == 0) {
        /* A last batch smaller than the ranks: this rank adds zero
         * gradients to the sum and makes the same update as the others. */
        t->step_loss[b->index] = 0;
        dp_data_parallel_zero_grad(t->dp);
        int rc = finish_step(t, b);
        t->step++;
        return rc;
    }
    if (t->pipe) {
        dp_data_parallel_zero_grad(t->dp);
        int rc =
            dp_pipeline_forward_backward(t->pipe, b->x + row0 * pixels, b->y + row0, n, t->seed,
                                         (uint64_t)t->step, row0, t->pipe_loss, t->correct);
        if (rc == 0)
            rc = dp_accumulate(t->loss_sum, t->pipe_loss);
        if (rc == 0)
            rc = dp_tensor_read_async(t->pipe_loss, &t->step_loss[b->index], sizeof(float));
        if (rc == 0)
            rc = finish_step(t, b);
        t->step++;
        return rc;
    }
    dp_tape_begin(t->tape);
    int rc = dp_tensor_from_host(&x, dev, DP_F32, 4, xs, b->x + row0 * pixels);
    if (rc == 0)
        rc = dp_tensor_from_host(&y, dev, DP_I32, 1, ys, b->y + row0);
    /* Dropout's masks: keyed by the step and each sample's global row. */
    dp_model_set_step(t->model, t->seed, (uint64_t)t->step, row0);
    if (rc == 0)
        rc = dp_data_parallel_forward(t->dp, x, true, &logits);
    if (rc == 0)
        rc = dp_cross_entropy(&loss, logits, y, DP_REDUCE_SUM);
    if (rc == 0)
        rc = dp_accuracy_accumulate(t->correct, logits, y);
    if (rc == 0)
        rc = dp_accumulate(t->loss_sum, loss);
    if (rc == 0)
        rc = dp_tensor_read_async(loss, &t->step_loss[b->index], sizeof(float));
    if (rc == 0) {
        dp_data_parallel_zero_grad(t->dp);
        rc = dp_backward(loss);
    }
    if (rc == 0)
        rc = finish_step(t, b);
    dp_tape_end(t->tape);
    dp_tape_reset(t->tape);
    /* The batch's memory goes back once the step's commands have run. */
    dp_tensor_free(x);
    dp_tensor_free(y);
    t->step++;
    return rc;
}
