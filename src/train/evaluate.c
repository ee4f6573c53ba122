/* Test accuracy: the end of each epoch of dp_train, and dp_evaluate of a
 * checkpoint's weights (trainer.c). Each rank evaluates its chunk of every
 * batch, and the executor splits that over the devices. */
#include "train/trainer.h"

#include "core/internal.h"

int dp__train_evaluate(dp__trainer *t, dp_tensor_t *correct, double *acc)
{
    dp_executor_t *ex = dp__net_executor(t->net);
    dp_loader_t *loader = dp__data_loader(t->data, false);
    DP_TRY(dp_tensor_fill(correct, 0.0f));
    DP_TRY(dp_loader_start_epoch(loader, 0, 0));
    dp_batch b;
    int64_t seen = 0, issued = 0;
    int rc = 0, more;
    while (rc == 0 && (more = dp_loader_next(loader, &b)) > 0) {
        dp_host_batch hb;
        dp__data_host_batch(t, &b, 0, 0, &hb);
        seen += b.n;
        if (hb.n == 0)
            continue;
        /* One batch in flight: the previous one has finished everywhere. */
        if (issued++ > 0)
            rc = dp_waitall();
        if (rc == 0)
            rc = dp_executor_evaluate(ex, &hb, correct);
    }
    if (rc == 0 && more < 0)
        rc = more;
    float right = 0;
    if (rc == 0)
        rc = dp_tensor_to_host(correct, &right, sizeof right);
    if (rc == 0)
        rc = dp_dist_sum_f32(&right, 1);
    *acc = seen ? right / (double)seen : 0.0;
    return rc;
}
