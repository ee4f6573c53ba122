/* Evaluation: the end of each epoch of dp_train, and dp_evaluate of a
 * checkpoint's weights (trainer.c). Each rank evaluates its chunk of every
 * batch, and the executor splits that over the devices; the counts (right
 * answers, top-5 right answers, the confusion matrix) and the summed loss
 * are added up on the first device and, under mpirun, over the ranks. */
#include "train/trainer.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

int dp__train_evaluate(dp__trainer *t, dp_eval_result *out)
{
    dp_executor_t *ex = dp__net_executor(t->net);
    dp_loader_t *loader = dp__data_loader(t->data, false);
    int64_t k = dp__net_classes(t->net), ncounts = 2 + k * k, one = 1;
    dp_device_t *dev = dp__net_device(t->net, 0);
    dp_tensor_t *counts = NULL, *loss = NULL;
    float *host = dp__calloc((size_t)ncounts + 1, sizeof *host);
    int rc = host ? 0 : DP_ENOMEM;
    if (rc == 0)
        rc = dp_tensor_new(&counts, dev, DP_F32, 1, &ncounts);
    if (rc == 0)
        rc = dp_tensor_new(&loss, dev, DP_F32, 1, &one);
    if (rc == 0)
        rc = dp_tensor_fill(counts, 0.0f);
    if (rc == 0)
        rc = dp_tensor_fill(loss, 0.0f);
    if (rc == 0)
        rc = dp_loader_start_epoch(loader, 0, 0);
    dp_batch b;
    int64_t seen = 0, issued = 0;
    int more = 0;
    while (rc == 0 && (more = dp_loader_next(loader, &b)) > 0) {
        dp_host_batch hb;
        dp__data_host_batch(t, &b, 0, 0, &hb);
        seen += b.n;
        if (hb.n == 0)
            continue;
        /* One batch in flight: the previous one has finished everywhere. */
        if (issued++ > 0)
            rc = dp__net_sync(t->net);
        if (rc == 0)
            rc = dp_executor_evaluate(ex, &hb, counts, loss);
    }
    if (rc == 0 && more < 0)
        rc = more;
    if (rc == 0)
        rc = dp_tensor_to_host(counts, host, (size_t)ncounts * sizeof *host);
    if (rc == 0)
        rc = dp_tensor_to_host(loss, host + ncounts, sizeof *host);
    if (rc == 0)
        rc = dp_dist_sum_f32(host, (int)ncounts + 1);
    dp_eval_result_free(out);
    if (rc == 0 && seen > 0) {
        out->test_acc = host[0] / (double)seen;
        out->test_top5 = k > 5 ? host[1] / (double)seen : 0.0;
        out->test_loss = host[ncounts] / (double)seen;
        out->classes = (int)k;
        out->samples = seen;
        out->confusion = malloc((size_t)(k * k) * sizeof *out->confusion);
        if (!out->confusion)
            rc = DP_ENOMEM;
        for (int64_t i = 0; rc == 0 && i < k * k; i++)
            out->confusion[i] = (int64_t)host[2 + i];
    }
    dp__net_sync(t->net);
    dp_tensor_free(counts);
    dp_tensor_free(loss);
    dp__free(host);
    return rc;
}

void dp_eval_result_free(dp_eval_result *r)
{
    free(r->confusion);
    r->confusion = NULL;
    r->test_acc = r->test_loss = r->test_top5 = 0;
    r->samples = 0;
    r->classes = 0;
}
