/* The run's precision and convolution algorithm (dp_train_options.precision,
 * .conv_algo): checked against the devices before anything is loaded, set
 * for the run on the thread that issues its ops (and put back after), and,
 * under DP_CONV_ALGO_AUTO, the kernel choices measured once, before the
 * first step, by rank 0, whose table every rank then loads: every replica
 * of every rank runs the same kernels. A resumed run loads the choices its
 * checkpoint recorded first, so it measures nothing and runs what the
 * interrupted run ran. */
#include "train/trainer.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

int dp__train_setup_precision(dp__trainer *t)
{
    const dp_train_options *o = t->o;
    if ((unsigned)o->precision > DP_PRECISION_BF16_REFERENCE ||
        (unsigned)o->conv_algo > DP_CONV_ALGO_WINOGRAD) {
        DP_ERROR("the precision %d or convolution algorithm %d is not one of dp_precision, "
                 "dp_conv_algo",
                 o->precision, o->conv_algo);
        return DP_EINVAL;
    }
    for (int k = 0; k < t->ndev && o->precision != DP_PRECISION_FP32; k++) {
        if (!dp_device_has(t->devs[k], DP_DEVICE_BF16)) {
            DP_ERROR("the precision %s: %s runs float32 only (bf16 runs on CPU devices)",
                     dp_precision_name(o->precision), dp_device_name(t->devs[k]));
            return DP_ENOTSUP;
        }
        if (o->precision == DP_PRECISION_BF16 &&
            !dp_device_has(t->devs[k], DP_DEVICE_BF16_NATIVE)) {
            DP_ERROR("the precision bf16: this CPU has no native bf16 (neither avx512_bf16 nor "
                     "amx_bf16, or DNNL_MAX_CPU_ISA hides them), so it would run slower than "
                     "fp32; the precision bf16-reference runs the same arithmetic on float32 "
                     "kernels, to check bf16's accuracy");
            return DP_ENOTSUP;
        }
    }
    t->saved_precision = dp_set_precision((dp_precision)o->precision);
    t->saved_conv_algo = dp_get_conv_algo();
    dp_set_conv_algo((dp_conv_algo)o->conv_algo);
    t->precision_set = true;
    return 0;
}

void dp__train_restore_precision(dp__trainer *t)
{
    free(t->conv_algos);
    t->conv_algos = NULL;
    if (!t->precision_set)
        return;
    dp_set_precision(t->saved_precision);
    dp_set_conv_algo(t->saved_conv_algo);
    t->precision_set = false;
}

/* One forward and backward pass of the model on device 0 over `rows`
 * samples of the training set, in eval mode (the running statistics stay
 * as they are): every convolution shape and pass of a training step runs,
 * and is measured the first time. Only the parameters' gradients are
 * written, and every step's first backward writes them afresh. */
static int measure_once(dp__trainer *t, int64_t rows)
{
    const dp_dataset *ds = t->train_set;
    rows = DP_MIN(rows, ds->n);
    int64_t xs[4] = {rows, t->in_channels, t->in_rows, t->in_cols}, ys[1] = {rows};
    dp_tape_t *tape;
    DP_TRY(dp_tape_init(&tape, true));
    dp_tape_begin(tape);
    dp_tensor_t *x = NULL, *y = NULL, *logits, *loss;
    int rc = dp_tensor_from_host(&x, t->dev, DP_F32, 4, xs, ds->images);
    if (rc == 0)
        rc = dp_tensor_from_host(&y, t->dev, DP_I32, 1, ys, ds->labels);
    if (rc == 0)
        rc = dp_model_forward(t->model, x, false, &logits);
    if (rc == 0)
        rc = dp_cross_entropy(&loss, logits, y, DP_REDUCE_SUM);
    if (rc == 0)
        rc = dp_backward(loss);
    if (rc == 0)
        rc = dp_waitall();
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    dp_tensor_free(y);
    return rc;
}

/* --verbose: the table every rank runs (under mpirun each rank says it:
 * rank 0 measured it, the others loaded rank 0's). */
static void log_choices(const char *text, int rank)
{
    DP_INFO("convolution kernels, measured once per shape (batch size aside)%s:",
            rank > 0 ? " by rank 0" : "");
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        int len = end ? (int)(end - p) : (int)strlen(p);
        DP_INFO("  %.*s", len, p);
        p += len + (end ? 1 : 0);
    }
}

int dp__train_tune_convolutions(dp__trainer *t)
{
    const dp_train_options *o = t->o;
    if (o->conv_algo != DP_CONV_ALGO_AUTO)
        return 0;
    /* The rows a device sees in a step: the batch over the ranks, the
     * devices (or the pipeline's micro-batches). The choice holds for
     * every batch size; this only sets the size it is measured at. */
    int64_t per = (int64_t)t->ranks * (o->pipeline ? t->ndev / o->pipeline : t->ndev);
    if (o->pipeline)
        per *= o->micro_batches > 0 ? o->micro_batches : 1;
    int64_t rows = DP_MAX(o->batch_size / DP_MAX(per, 1), 1);
    int rc = t->rank == 0 ? measure_once(t, rows) : 0;
    char *text = rc == 0 && t->rank == 0 ? dp_conv_choices_save() : NULL;
    if (rc == 0 && t->rank == 0 && !text)
        rc = DP_ENOMEM;
    if (t->ranks > 1) {
        /* Every rank takes part in both broadcasts, whatever rank 0's
         * outcome, so that none waits on the others. */
        uint64_t len = rc == 0 && t->rank == 0 ? strlen(text) + 1 : 0;
        int brc = dp_dist_broadcast(&len, sizeof len);
        if (brc == 0 && len == 0)
            brc = DP_EINVAL; /* rank 0 failed: its own error says why */
        char *all = brc == 0 ? calloc(1, (size_t)len) : NULL;
        if (brc == 0 && !all)
            brc = DP_ENOMEM;
        if (brc == 0 && t->rank == 0)
            memcpy(all, text, (size_t)len);
        if (brc == 0)
            brc = dp_dist_broadcast(all, (size_t)len);
        if (brc == 0 && t->rank > 0)
            brc = dp_conv_choices_load(all);
        if (brc == 0 && t->rank > 0)
            text = dp_conv_choices_save();
        free(all);
        if (rc == 0)
            rc = brc;
    }
    if (rc == 0 && o->verbose && text)
        log_choices(text, t->rank);
    t->conv_algos = text; /* for the first epoch's metrics; freed at teardown */
    return rc;
}

void dp__train_record_precision(const dp__trainer *t, dp_checkpoint_state *ck)
{
    snprintf(ck->precision, sizeof ck->precision, "%s", dp_precision_name(t->o->precision));
    ck->conv_algos[0] = '\0';
    if (t->o->conv_algo != DP_CONV_ALGO_AUTO)
        return;
    char *text = dp_conv_choices_save();
    if (!text)
        return;
    /* Whole lines only, as many as the checkpoint holds. */
    size_t len = strlen(text);
    if (len >= sizeof ck->conv_algos) {
        len = sizeof ck->conv_algos - 1;
        while (len > 0 && text[len - 1] != '\n')
            len--;
        DP_WARN("the checkpoint records the first %zu bytes of the convolution choices", len);
    }
    memcpy(ck->conv_algos, text, len);
    ck->conv_algos[len] = '\0';
    free(text);
}
