/* The run's TensorBoard event file (--tensorboard): rank 0 writes the
 * step's loss and learning rate as each step is known to have finished
 * (epoch.c, beside the --log-steps lines, with the same step numbers), and
 * the epoch's figures at its last step, then syncs the file. Every record
 * is in the file as soon as it is written (io/tensorboard.h), so that
 * TensorBoard shows the run as it goes and a killed run leaves a file it
 * reads. */
#include "train/trainer.h"

#include "core/internal.h"
#include "io/tensorboard.h"

struct dp__train_board {
    dp__tb_writer *writer;
};

int dp__board_open(dp__train_board **out, const dp__trainer *t)
{
    *out = NULL;
    if (!t->o->output.tensorboard_dir || t->rank != 0)
        return 0;
    dp__train_board *b = dp__calloc(1, sizeof *b);
    if (!b)
        return DP_ENOMEM;
    *out = b;
    DP_TRY(dp__tb_open(&b->writer, t->o->output.tensorboard_dir));
    /* A resumed run writes its steps from its checkpoint's on: what an
     * earlier file holds after that (a killed run's last steps) is stale. */
    if (t->o->checkpoint.resume_path)
        DP_TRY(dp__tb_start(b->writer, dp__steps_done(t->steps) + 1));
    DP_INFO("TensorBoard events go to %s", dp__tb_path(b->writer));
    return 0;
}

int dp__board_close(dp__train_board *b)
{
    if (!b)
        return 0;
    int rc = dp__tb_close(b->writer);
    dp__free(b);
    return rc;
}

bool dp__board_on(const dp__train_board *b)
{
    return b && b->writer;
}

int dp__board_step(dp__train_board *b, int64_t step, double loss, double lr)
{
    if (!dp__board_on(b))
        return 0;
    static const char *const tags[] = {"train/loss", "train/lr"};
    const float values[] = {(float)loss, (float)lr};
    return dp__tb_scalars(b->writer, step, 2, tags, values);
}

int dp__board_epoch(dp__train_board *b, int64_t step, const dp_epoch_stats *s)
{
    if (!dp__board_on(b))
        return 0;
    static const char *const tags[] = {
        "train/epoch_loss", "train/epoch_accuracy", "train/samples_per_second", "test/accuracy",
        "test/loss",        "test/top5_accuracy"};
    const float values[] = {(float)s->train_loss, (float)s->train_acc, (float)s->samples_per_second,
                            (float)s->test_acc,   (float)s->test_loss, (float)s->test_top5};
    /* Top-5 accuracy where there are more than 5 classes (else 0: left out). */
    DP_TRY(dp__tb_scalars(b->writer, step, s->test_top5 > 0 ? 6 : 5, tags, values));
    return dp__tb_sync(b->writer);
}
