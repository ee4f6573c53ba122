/* The executor interface (dp/executor.h) and its two implementations:
 * data parallelism (data_parallel_step.c) and the pipeline
 * (pipeline_step.c). */
#include "dp/executor.h"

#include "core/internal.h"

struct dp_executor {
    const dp_executor_ops *ops;
    void *self;
    dp_data_parallel_t *replicas;
};

int dp_executor_init(dp_executor_t **out, const dp_executor_ops *ops, void *self,
                     dp_data_parallel_t *replicas)
{
    if (!ops || !ops->forward_backward || !ops->evaluate || !replicas) {
        DP_ERROR("executor: its forward_backward, evaluate and replicas are required");
        return DP_EINVAL;
    }
    dp_executor_t *e = dp__calloc(1, sizeof *e);
    if (!e)
        return DP_ENOMEM;
    e->ops = ops;
    e->self = self;
    e->replicas = replicas;
    *out = e;
    return 0;
}

void dp_executor_close(dp_executor_t *e)
{
    if (!e)
        return;
    if (e->ops->close)
        e->ops->close(e->self);
    dp__free(e);
}

const char *dp_executor_name(const dp_executor_t *e)
{
    return e->ops->name;
}

int dp_executor_forward_backward(dp_executor_t *e, const dp_host_batch *b, dp_tensor_t *loss,
                                 dp_tensor_t *correct)
{
    if (b->n == 0) {
        /* This rank's share of a batch smaller than the ranks: it adds zero
         * gradients to the sum and makes the same update as the others. */
        dp_data_parallel_zero_grad(e->replicas);
        return dp_tensor_fill(loss, 0.0f);
    }
    return e->ops->forward_backward(e->self, b, loss, correct);
}

int dp_executor_step(dp_executor_t *e, float grad_scale)
{
    return dp_data_parallel_step(e->replicas, grad_scale);
}

int dp_executor_evaluate(dp_executor_t *e, const dp_host_batch *b, dp_tensor_t *counts,
                         dp_tensor_t *loss)
{
    return b->n == 0 ? 0 : e->ops->evaluate(e->self, b, counts, loss);
}

dp_data_parallel_t *dp_executor_replicas(dp_executor_t *e)
{
    return e->replicas;
}

/* ---- data parallelism ------------------------------------------------------ */

static int dp_forward_backward(void *self, const dp_host_batch *b, dp_tensor_t *loss,
                               dp_tensor_t *correct)
{
    return dp_data_parallel_forward_backward(self, b, loss, correct);
}

static int dp_evaluate(void *self, const dp_host_batch *b, dp_tensor_t *counts, dp_tensor_t *loss)
{
    return dp_data_parallel_evaluate(self, b, counts, loss);
}

static void dp_close(void *self)
{
    dp_data_parallel_close(self);
}

static const dp_executor_ops data_parallel_ops = {
    .name = "data parallel",
    .forward_backward = dp_forward_backward,
    .evaluate = dp_evaluate,
    .close = dp_close,
};

int dp_executor_init_data_parallel(dp_executor_t **out, dp_data_parallel_t *dp)
{
    return dp_executor_init(out, &data_parallel_ops, dp, dp);
}

/* ---- the pipeline ------------------------------------------------------------ */

static int pipe_forward_backward(void *self, const dp_host_batch *b, dp_tensor_t *loss,
                                 dp_tensor_t *correct)
{
    dp_data_parallel_zero_grad(dp_pipeline_data_parallel(self));
    return dp_pipeline_forward_backward(self, b->x, b->labels, b->n, b->seed, b->step,
                                        b->sample_offset, loss, correct);
}

/* Every device holds the whole model: evaluation splits the batch over
 * them as data parallelism does. */
static int pipe_evaluate(void *self, const dp_host_batch *b, dp_tensor_t *counts, dp_tensor_t *loss)
{
    return dp_data_parallel_evaluate(dp_pipeline_data_parallel(self), b, counts, loss);
}

static void pipe_close(void *self)
{
    dp_pipeline_close(self);
}

static const dp_executor_ops pipeline_ops = {
    .name = "pipeline",
    .forward_backward = pipe_forward_backward,
    .evaluate = pipe_evaluate,
    .close = pipe_close,
};

int dp_executor_init_pipeline(dp_executor_t **out, dp_pipeline_t *p)
{
    return dp_executor_init(out, &pipeline_ops, p, dp_pipeline_data_parallel(p));
}
