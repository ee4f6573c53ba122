/* The run's precision, convolution algorithm and split-invariant sums
 * (the options `precision`, `conv_algo`, `split_invariant`): checked against the devices before
 * anything is loaded, set for the run on the thread that issues its ops (and put back after), and,
 * under DP_CONV_ALGO_AUTO, the kernel choices measured once, before the
 * first step, by rank 0, whose table every rank then loads: every replica
 * of every rank runs the same kernels. A resumed run loads the choices its
 * checkpoint recorded first, so it measures nothing and runs what the
 * interrupted run ran. */
#include "train/trainer.h"

#include "core/internal.h"
#include "dp/conv_cache.h"

#include <stdlib.h>
#include <string.h>

struct dp__train_prec {
    /* The thread's precision and the process's convolution algorithm
     * before the run set its own, put back by dp__prec_close. */
    bool set;
    dp_precision saved_precision;
    dp_conv_algo saved_conv_algo;
    int64_t saved_split_rows;
    char *choices; /* the kernels chosen before the first step (auto), or NULL */
    bool taken;    /* in an epoch's metrics already */
};

static bool power_of_two(int64_t n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

/* The parts a batch is cut into: the devices' and ranks' shares, a
 * pipeline's micro-batches. */
static int64_t split_parts(const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    int ndev = dp__net_count(t->net), stages = o->parallel.pipeline > 0 ? o->parallel.pipeline : 1;
    return (int64_t)(ndev / stages) * t->ranks *
           (o->parallel.pipeline ? DP_MAX(o->parallel.micro_batches, 1) : 1);
}

bool dp__prec_split_whole(const dp__trainer *t, int64_t rows)
{
    int64_t block = t->o->numerics.split_invariant, parts = split_parts(t);
    return block > 0 && rows % block == 0 && power_of_two(rows / block) && power_of_two(parts) &&
           parts <= rows / block;
}

/* Split-invariant sums hold when every part the batch is cut into is a
 * whole subtree of the blocks' tree: a power-of-two count of whole
 * blocks. */
static int check_split(const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    int64_t rows = o->numerics.split_invariant;
    if (rows == 0)
        return 0;
    int64_t blocks = rows > 0 ? o->data.batch_size / rows : 0;
    if (rows < 0 || o->data.batch_size % rows != 0 || !power_of_two(blocks)) {
        DP_ERROR("`split_invariant` in blocks of %lld samples: `batch_size` %lld is not "
                 "%lld times a power of two",
                 (long long)rows, (long long)o->data.batch_size, (long long)rows);
        return DP_EINVAL;
    }
    if (!dp__prec_split_whole(t, o->data.batch_size)) {
        DP_ERROR("`split_invariant` in blocks of %lld samples: the batch of %lld cut into %lld "
                 "parts (devices x ranks x micro-batches) is not a power-of-two count of whole "
                 "blocks in each",
                 (long long)rows, (long long)o->data.batch_size, (long long)split_parts(t));
        return DP_EINVAL;
    }
    if (t->ranks > 2)
        DP_WARN("`split_invariant`: MPI adds the gradients of %d ranks in an order of its "
                "own; one device's bits are matched by 2 ranks",
                t->ranks);
    return 0;
}

int dp__prec_open(dp__train_prec **out, const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    dp__train_prec *p = dp__calloc(1, sizeof *p);
    if (!p)
        return DP_ENOMEM;
    *out = p;
    for (int k = 0; k < dp__net_count(t->net) && o->numerics.precision != DP_PRECISION_FP32; k++) {
        dp_device_t *dev = dp__net_device(t->net, k);
        if (!dp_device_has(dev, DP_DEVICE_BF16)) {
            DP_ERROR("`precision` %s: %s runs float32 only (bf16 runs on CPU devices)",
                     dp_precision_name(o->numerics.precision), dp_device_name(dev));
            return DP_ENOTSUP;
        }
        if (o->numerics.precision == DP_PRECISION_BF16 &&
            !dp_device_has(dev, DP_DEVICE_BF16_NATIVE)) {
            DP_ERROR("`precision` bf16: this CPU has no native bf16 (neither avx512_bf16 nor "
                     "amx_bf16, or DNNL_MAX_CPU_ISA hides them), so it would run slower than "
                     "fp32; `precision` bf16-reference runs the same arithmetic on float32 "
                     "kernels, to check bf16's accuracy");
            return DP_ENOTSUP;
        }
    }
    DP_TRY(check_split(t));
    p->saved_precision = dp_set_precision(o->numerics.precision);
    p->saved_split_rows = dp_get_split_invariant();
    dp_set_split_invariant(o->numerics.split_invariant);
    p->saved_conv_algo = dp_get_conv_algo();
    dp_set_conv_algo(o->numerics.conv_algo);
    p->set = true;
    return 0;
}

void dp__prec_close(dp__train_prec *p)
{
    if (!p)
        return;
    free(p->choices);
    if (p->set) {
        dp_set_precision(p->saved_precision);
        dp_set_conv_algo(p->saved_conv_algo);
        dp_set_split_invariant(p->saved_split_rows);
    }
    dp__free(p);
}

const char *dp__prec_take_choices(dp__train_prec *p)
{
    if (p->taken)
        return NULL;
    p->taken = true;
    return p->choices;
}

/* One forward and backward pass of the model on device 0 over `rows`
 * samples of the training set, in eval mode (the running statistics stay
 * as they are): every convolution shape and pass of a training step runs,
 * and is measured the first time. Only the parameters' gradients are
 * written, and every step's first backward writes them afresh. */
static int measure_once(const dp__trainer *t, int64_t rows)
{
    const dp_dataset *ds = dp__data_train_set(t->data);
    const int64_t *chw = dp__data_chw(t->data);
    dp_device_t *dev = dp__net_device(t->net, 0);
    rows = DP_MIN(rows, ds->n);
    int64_t xs[4] = {rows, chw[0], chw[1], chw[2]}, ys[1] = {rows};
    /* Zeros, not the first samples: a kernel's time does not depend on the
     * values, and a streamed set would be decoded here, on this thread,
     * from files outside this rank's share (dp_dataset_files_opened counts
     * exactly the rows a run trains on). */
    size_t bytes = (size_t)(rows * chw[0] * chw[1] * chw[2]) * sizeof(float);
    float *host = dp__malloc(bytes);
    if (!host)
        return DP_ENOMEM;
    memset(host, 0, bytes);
    dp_tape_t *tape;
    int rc = dp_tape_init(&tape, true);
    if (rc < 0) {
        dp__free(host);
        return rc;
    }
    dp_tape_begin(tape);
    dp_tensor_t *x = NULL, *y = NULL, *logits, *loss;
    rc = dp_tensor_from_host(&x, dev, DP_F32, 4, xs, host);
    if (rc == 0)
        rc = dp_tensor_from_host(&y, dev, DP_I32, 1, ys, ds->labels);
    if (rc == 0)
        rc = dp_model_forward(dp__net_model(t->net), x, false, &logits);
    if (rc == 0)
        rc = dp_cross_entropy(&loss, logits, y, DP_REDUCE_SUM);
    if (rc == 0)
        rc = dp_backward(loss);
    if (rc == 0)
        rc = dp__net_sync(t->net);
    dp_tape_end(tape);
    dp_tape_close(tape);
    dp_tensor_free(x);
    dp_tensor_free(y);
    dp__free(host);
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

/* --verbose: how many passes this process measured; with a cache file,
 * they join it (a file that cannot be written is a warning: the run goes
 * on). */
static int keep_measured(const char *cache)
{
    char *measured = dp_conv_choices_save_measured();
    if (!measured)
        return DP_ENOMEM;
    int passes = 0;
    for (const char *c = measured; (c = strchr(c, '=')); c++)
        passes++;
    DP_INFO("convolution kernels: %d passes measured (the cache file: %s)", passes,
            cache ? cache : "off");
    int rc = cache && passes ? dp_conv_algo_cache_add(cache, measured) : 0;
    free(measured);
    return rc == DP_EIO ? 0 : rc;
}

int dp__prec_tune(dp__train_prec *p, const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    if (o->numerics.conv_algo != DP_CONV_ALGO_AUTO)
        return 0;
    /* The rows a device sees in a step: the batch over the ranks, the
     * devices (or the pipeline's micro-batches). The choice holds for
     * every batch size; this only sets the size it is measured at. */
    int ndev = dp__net_count(t->net);
    int64_t per = (int64_t)t->ranks * (o->parallel.pipeline ? ndev / o->parallel.pipeline : ndev);
    if (o->parallel.pipeline)
        per *= o->parallel.micro_batches > 0 ? o->parallel.micro_batches : 1;
    int64_t rows = DP_MAX(o->data.batch_size / DP_MAX(per, 1), 1);
    /* Rank 0 takes the cache file's choices for this machine first (the
     * checkpoint's, loaded before, win), measures only the rest, and adds
     * what it measured; the other ranks get its table below. */
    char cache[4096];
    int rc = t->rank == 0
                 ? dp_conv_algo_cache_path(o->numerics.conv_algo_cache, cache, sizeof cache)
                 : 1;
    bool cached = rc == 0;
    if (cached)
        rc = dp_conv_algo_cache_read(cache);
    if (rc >= 0)
        rc = t->rank == 0 ? measure_once(t, rows) : 0;
    if (rc == 0 && t->rank == 0)
        rc = keep_measured(cached ? cache : NULL);
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
    if (rc == 0 && o->output.verbose && text)
        log_choices(text, t->rank);
    p->choices = text; /* for the first epoch's metrics; freed by dp__prec_close */
    return rc;
}

void dp__prec_record(const dp__trainer *t, dp_checkpoint_state *ck)
{
    ck->conv_algos[0] = '\0';
    if (t->o->numerics.conv_algo != DP_CONV_ALGO_AUTO)
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
