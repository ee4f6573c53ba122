/* Models built from definitions (dp/nn.h): parameters and buffers from the
 * specs, the forward the definition gives. */
#include "nn/model.h"

#include "core/internal.h"

#include <string.h>

static int check_def(const dp_model_def *def)
{
    if (!def || !def->name || !def->forward || !def->params || def->nparams < 1 ||
        def->nbuffers < 0 || (def->nbuffers > 0 && !def->buffers) || def->nbn < 0 ||
        (def->nbn > 0 && !def->bn_names)) {
        DP_ERROR("model definition '%s': needs a name, a forward and at least one parameter; "
                 "buffers and batch norm names need their arrays",
                 def && def->name ? def->name : "?");
        return DP_EINVAL;
    }
    return 0;
}

/* The parameters of def, refused over DP_MAX_PARAMS before their buffer is
 * allocated (Linear(784, 3000000) asked for 9.4 GB). Counted in double:
 * exact to 2^53, and no product of sizes overflows it. */
static int check_param_count(const dp_model_def *def)
{
    double total = 0;
    for (int i = 0; i < def->nparams; i++) {
        double numel = 1;
        for (int d = 0; d < def->params[i].ndim; d++)
            numel *= (double)def->params[i].shape[d];
        total += numel;
    }
    if (total > (double)DP_MAX_PARAMS) {
        DP_ERROR("%s: %.0f parameters, more than the %lld one model may have", def->name, total,
                 (long long)DP_MAX_PARAMS);
        return DP_EINVAL;
    }
    return 0;
}

static int create(dp_model_t **out, const dp_model_def *def, dp_device_t *dev, bool init,
                  uint64_t seed)
{
    DP_TRY(check_def(def));
    DP_TRY(check_param_count(def));
    dp_model_t *m = dp__calloc(1, sizeof *m);
    if (!m)
        return DP_ENOMEM;
    m->def = *def;
    m->dev = dev;
    int rc = dp_params_init(&m->params, dev, def->params, def->nparams, true);
    if (rc == 0 && init)
        rc = def->param_values ? dp_params_set(m->params, def->param_values)
                               : dp_params_init_random(m->params, seed);
    if (rc == 0 && def->nbuffers > 0) {
        rc = dp_params_init(&m->buffers, dev, def->buffers, def->nbuffers, false);
        if (rc == 0 && init)
            rc = def->buffer_values ? dp_params_set(m->buffers, def->buffer_values)
                                    : dp_params_init_random(m->buffers, seed);
    }
    if (rc < 0) {
        dp_model_close(m);
        return rc;
    }
    *out = m;
    return 0;
}

int dp_model_init(dp_model_t **out, const dp_model_def *def, dp_device_t *dev, uint64_t seed)
{
    return create(out, def, dev, true, seed);
}

int dp__model_init_uninit(dp_model_t **out, const dp_model_def *def, dp_device_t *dev)
{
    return create(out, def, dev, false, 0);
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

void dp_model_bn_params(const dp_model_t *m, int layer, bool train, dp_batch_norm_params *p)
{
    memset(p, 0, sizeof *p);
    p->training = train;
    if (m->bn_sync && m->sync_ranks >= 1 && layer >= 0 && layer < m->def.nbn) {
        p->sync = m->bn_sync[layer];
        p->rank = m->sync_rank;
        p->ranks = m->sync_ranks;
    }
}

void dp_model_dropout_params(const dp_model_t *m, int layer, float prob, bool train,
                             dp_dropout_params *p)
{
    *p = (dp_dropout_params){.prob = prob,
                             .training = train,
                             .seed = m->seed,
                             .step = m->step,
                             .layer = (uint32_t)layer,
                             .sample_offset = m->sample_offset};
}

void dp_model_set_step(dp_model_t *m, uint64_t seed, uint64_t step, int64_t sample_offset)
{
    m->seed = seed;
    m->step = step;
    m->sample_offset = sample_offset;
}

void dp_model_close(dp_model_t *m)
{
    if (!m)
        return;
    dp_params_close(m->params);
    dp_params_close(m->buffers);
    dp__free(m);
}

void dp_model_def_free(dp_model_def *def)
{
    if (def && def->release)
        def->release(def);
}

int dp_model_def_input_chw(const dp_model_def *def, int64_t chw[3])
{
    return def && def->input_chw ? def->input_chw(def, chw) : DP_ENOENT;
}

const dp_model_def *dp_model_definition(const dp_model_t *m)
{
    return &m->def;
}

const void *dp_model_user(const dp_model_t *m)
{
    return m->def.user;
}

const char *dp_model_name(const dp_model_t *m)
{
    return m->def.name;
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
    *n = m->def.nbn;
    return m->def.bn_names;
}

dp_device_t *dp_model_device(const dp_model_t *m)
{
    return m->dev;
}

int dp_model_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    DP_TRY(m->def.forward(m, x, train, logits));
    if (train && m->buffers)
        m->batches_tracked++;
    if (m->hook)
        m->hook(m, x, *logits, m->hook_user);
    return 0;
}

int dp_model_forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                            dp_tensor_t **y)
{
    if (!m->def.forward_layers) {
        DP_ERROR("model %s cannot run a range of its layers: its definition has no "
                 "forward_layers",
                 m->def.name);
        return DP_ENOTSUP;
    }
    if (first < 0 || first > last) {
        DP_ERROR("%s: layers %d-%d are not a range (0 <= first <= last)", m->def.name, first, last);
        return DP_EINVAL;
    }
    DP_TRY(m->def.forward_layers(m, x, first, last, train, y));
    /* The stage that starts the forward counts the batch, once per forward. */
    if (train && m->buffers && first == 0)
        m->batches_tracked++;
    return 0;
}
