/* Models by name. */
#include "nn/model.h"

#include "core/internal.h"

#include <string.h>

static const dp__model_ops *const models[] = {&dp__lenet_ops, &dp__resnet18_ops,
                                              &dp__tutorial_ops};
static const char *const model_names[] = {"lenet", "resnet18", "tutorial", NULL};
_Static_assert(DP_COUNTOF(models) + 1 == DP_COUNTOF(model_names), "one name per model");

const char *const *dp_model_names(void)
{
    return model_names;
}

static int create(dp_model_t **out, const char *name, dp_device_t *dev, bool init, uint64_t seed)
{
    const dp__model_ops *ops = NULL;
    for (size_t i = 0; i < DP_COUNTOF(models); i++)
        if (strcmp(models[i]->name, name) == 0)
            ops = models[i];
    if (!ops) {
        DP_ERROR("unknown model '%s' (known: lenet, resnet18, tutorial)", name);
        return DP_EINVAL;
    }
    dp_model_t *m = dp__calloc(1, sizeof *m);
    if (!m)
        return DP_ENOMEM;
    m->ops = ops;
    m->dev = dev;
    int n;
    const dp_param_spec *specs = ops->specs(&n);
    int rc = dp_params_init(&m->params, dev, specs, n, true);
    if (rc == 0 && init)
        rc = dp_params_init_random(m->params, seed);
    if (rc == 0 && ops->buffer_specs) {
        specs = ops->buffer_specs(&n);
        rc = dp_params_init(&m->buffers, dev, specs, n, false);
        if (rc == 0 && init)
            rc = dp_params_init_random(m->buffers, seed);
    }
    if (rc < 0) {
        dp_model_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

int dp_model_create(dp_model_t **out, const char *name, dp_device_t *dev, uint64_t seed)
{
    return create(out, name, dev, true, seed);
}

int dp__model_create_uninit(dp_model_t **out, const char *name, dp_device_t *dev)
{
    return create(out, name, dev, false, 0);
}

void dp_model_set_forward_hook(dp_model_t *m, dp_forward_hook hook, void *user)
{
    m->hook = hook;
    m->hook_user = user;
}

void dp__model_set_sync_group(dp_model_t *m, dp_bn_sync_t **groups, int rank, int ranks)
{
    m->bn_sync = groups;
    m->sync_rank = groups ? rank : 0;
    m->sync_ranks = groups ? ranks : 0;
}

void dp_model_close(dp_model_t *m)
{
    if (!m)
        return;
    dp_params_close(m->params);
    dp_params_close(m->buffers);
    dp__free(m);
}

const char *dp_model_name(const dp_model_t *m)
{
    return m->ops->name;
}

dp_params_t *dp_model_params(dp_model_t *m)
{
    return m->params;
}

dp_params_t *dp_model_buffers(dp_model_t *m)
{
    return m->buffers;
}

int64_t dp_model_batches_tracked(const dp_model_t *m)
{
    return m->batches_tracked;
}

void dp_model_set_batches_tracked(dp_model_t *m, int64_t n)
{
    m->batches_tracked = n;
}

const char *const *dp_model_bn_names(const dp_model_t *m, int *n)
{
    *n = 0;
    return m->ops->bn_names ? m->ops->bn_names(n) : NULL;
}

dp_device_t *dp_model_device(const dp_model_t *m)
{
    return m->dev;
}

int dp_model_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    DP_TRY(m->ops->forward(m, x, train, logits));
    if (train && m->buffers)
        m->batches_tracked++;
    if (m->hook)
        m->hook(m, x, *logits, m->hook_user);
    return 0;
}
