/* The run's network: the devices of --devices, the model built for the
 * dataset's samples on the first of them, and the executor that runs each
 * step over all of them (data parallel, or --pipeline's stages). */
#include "train/trainer.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

struct dp__train_net {
    dp_device_t *devs[DP_MAX_DEVICES];
    int ndev;
    char devices[256]; /* "[cpu:0, cpu:1]": this rank's */
    char where[288];   /* devices, and " x 4 ranks" under mpirun */
    dp_model_t *model; /* replica 0, on devs[0] */
    /* The definition with the run's weight init, and its specs, when the
     * options change the weights' init (the model points at them). */
    dp_model_def init_def;
    dp_param_spec *init_specs;
    const dp_model_def *def; /* dp__net_plan's, for samples of def_chw */
    int64_t def_chw[3];
    dp_executor_t *exec;
    dp_pipeline_t *pipe; /* the executor's, with --pipeline; else NULL */
    int64_t classes;     /* the model's outputs per sample */
};

/* --deterministic: the CPU device is reproducible as it is (trainer.c);
 * other backends have not said so yet. */
static void warn_nondeterministic_devices(const dp__train_net *n)
{
    for (int k = 0; k < n->ndev; k++) {
        if (!dp_device_has(n->devs[k], DP_DEVICE_DETERMINISTIC)) {
            DP_WARN("`deterministic`: %s may still pick kernels whose results vary from run "
                    "to run; only CPU devices are known to repeat bit for bit",
                    dp_device_name(n->devs[k]));
            return;
        }
    }
}

int dp__net_open(dp__train_net **out, const dp__trainer *t)
{
    const dp_train_options *o = t->o;
    dp__train_net *n = dp__calloc(1, sizeof *n);
    if (!n)
        return DP_ENOMEM;
    *out = n;
    DP_TRY(dp_devices_open(n->devs, &n->ndev, o->parallel.devices ? o->parallel.devices : "1",
                           o->parallel.threads));
    dp_devices_str(n->devs, n->ndev, n->devices, sizeof n->devices);
    if (t->ranks > 1)
        snprintf(n->where, sizeof n->where, "%s x %d ranks", n->devices, t->ranks);
    else
        snprintf(n->where, sizeof n->where, "%s", n->devices);
    if (o->numerics.deterministic)
        warn_nondeterministic_devices(n);
    return 0;
}

/* --verbose: the gradient buckets, in the order they are summed. */
static void log_buckets(const dp__train_net *n)
{
    dp_params_t *p = dp_model_params(n->model);
    dp_data_parallel_t *dp = dp_executor_replicas(n->exec);
    int nb = dp_data_parallel_bucket_count(dp);
    if (nb == 0) {
        DP_INFO("gradient buckets: none (one device, one rank: nothing to sum)");
        return;
    }
    DP_INFO("gradient buckets: %d, summed in this order as the backward pass finishes them", nb);
    for (int b = 0; b < nb; b++) {
        int first, count;
        int64_t bytes;
        dp_data_parallel_bucket(dp, b, &first, &count, &bytes);
        DP_INFO("  bucket %d: %d parameters, %s .. %s, %lld bytes", b, count,
                dp_params_name(p, first + count - 1), dp_params_name(p, first), (long long)bytes);
    }
}

/* The options' definition, with their weight init when they change it. */
static int definition(dp__train_net *n, const dp_train_options *o, const int64_t *chw,
                      const dp_model_def **def)
{
    *def = o->model_def;
    if (!*def)
        DP_TRY(dp_model_def_load(def, o->net.model, chw));
    if (o->net.weight_init == DP_WEIGHTS_AS_DEFINED)
        return 0;
    n->init_specs = dp__malloc((size_t)(*def)->nparams * sizeof *n->init_specs);
    if (!n->init_specs)
        return DP_ENOMEM;
    memcpy(n->init_specs, (*def)->params, (size_t)(*def)->nparams * sizeof *n->init_specs);
    dp_param_specs_set_weight_init(n->init_specs, (*def)->nparams, o->net.weight_init,
                                   o->net.init_std);
    n->init_def = **def;
    n->init_def.params = n->init_specs;
    /* Asked for, the draws replace a file's starting values (an ONNX
     * model's initializers): every parameter is drawn by its spec. */
    n->init_def.param_values = NULL;
    *def = &n->init_def;
    return 0;
}

/* The model's outputs per sample (its last layer's, from its summary on
 * the meta device: no memory, no kernels), the classes evaluation counts;
 * a model with fewer outputs than the data have classes would fail at the
 * first batch holding a label past them, so it is refused before any step.
 * A program's own definition may read values in its forward, which the
 * meta device has none of: where its summary fails, the data's classes. */
static int count_classes(dp__train_net *n, const dp_train_options *o, const dp_model_def *def,
                         const int64_t *chw, int classes)
{
    dp_layer_summary *rows;
    int nrows;
    int rc = dp_model_summary(def, chw, &rows, &nrows);
    if (rc < 0 && o->model_def && classes > 0) {
        n->classes = classes; /* the summary's error was logged; the run goes on */
        return 0;
    }
    DP_TRY(rc);
    n->classes = 1;
    for (int d = 1; nrows > 0 && d < rows[nrows - 1].ndim; d++)
        n->classes *= rows[nrows - 1].shape[d];
    free(rows);
    if (nrows == 0 || n->classes < 1 || n->classes > 65536) {
        DP_ERROR("the model %s gives %lld outputs per sample: a classifier needs 1 to 65536",
                 def->name, (long long)n->classes);
        return DP_EINVAL;
    }
    if (!o->model_def && classes > 0 && n->classes < classes) {
        DP_ERROR("the data have %d classes but the model %s gives %lld outputs: give a model "
                 "whose last layer has %d (a model file ending in Linear(..., %d))",
                 classes, def->name, (long long)n->classes, classes, classes);
        return DP_EINVAL;
    }
    return 0;
}

int dp__net_plan(dp__train_net *n, const dp__trainer *t, const int64_t *chw)
{
    const dp_train_options *o = t->o;
    DP_TRY(definition(n, o, chw, &n->def));
    memcpy(n->def_chw, chw, sizeof n->def_chw);
    if (o->parallel.pipeline) {
        int first[DP_PIPELINE_MAX_STAGES + 1];
        DP_TRY(dp__train_check_pipeline(t, n->def, chw, first));
    }
    if (o->net.init_path)
        DP_TRY(dp__checkpoint_check_start(o->net.init_path, n->def, NULL));
    return dp__train_check_memory(t, n->def, chw);
}

const dp_model_def *dp__net_definition(const dp__train_net *n)
{
    return n->def;
}

int dp__net_build(dp__train_net *n, const dp__trainer *t, const int64_t *chw)
{
    const dp_train_options *o = t->o;
    const dp_model_def *def = n->def;
    if (!def || memcmp(n->def_chw, chw, sizeof n->def_chw) != 0) {
        dp__free(n->init_specs);
        n->init_specs = NULL;
        DP_TRY(definition(n, o, chw, &def));
    }
    DP_TRY(count_classes(n, o, def, chw, dp__data_classes(t->data)));
    DP_TRY(dp_model_init(&n->model, def, n->devs[0], o->run.seed));
    if (o->net.init_path)
        DP_TRY(dp_checkpoint_load_weights(o->net.init_path, n->model));
    /* The option as given: DataParallel resolves auto for the devices just
     * opened (nccl across GPUs), which the ranks' check could not know. */
    dp_data_parallel_options po = {.allreduce = o->parallel.allreduce,
                                   .optimizer = {.kind = o->optim.optimizer,
                                                 .lr = o->optim.lr,
                                                 .momentum = o->optim.momentum,
                                                 .nesterov = o->optim.nesterov,
                                                 .weight_decay = o->optim.weight_decay,
                                                 .beta1 = o->optim.betas.beta1,
                                                 .beta2 = o->optim.betas.beta2,
                                                 .eps = o->optim.eps,
                                                 .clip_grad_norm = o->optim.clip_grad_norm},
                                   .label_smoothing = o->optim.label_smoothing,
                                   .sync_bn = o->parallel.sync_bn,
                                   .bucket_mb = o->parallel.bucket_mb,
                                   .grad_compress = o->parallel.grad_compress};
    /* Split-invariant sums: the ring adds 3 or more devices' gradients in
     * an order of its own for each chunk; the naive algorithm adds them
     * pairwise, the blocks' tree. */
    if (o->numerics.split_invariant && n->ndev > 2 && t->ranks == 1) {
        if (o->parallel.allreduce == DP_ALLREDUCE_AUTO)
            po.allreduce = DP_ALLREDUCE_NAIVE;
        else if (o->parallel.allreduce != DP_ALLREDUCE_NAIVE)
            DP_WARN("`split_invariant`: `allreduce` %s adds %d devices' gradients in an order of "
                    "its own; `allreduce` naive adds them as one device would",
                    dp_allreduce_algo_name(o->parallel.allreduce), n->ndev);
    }
    /* OneCycleLR sets SGD's momentum (Adam's beta1) from its first step on,
     * as torch does when it is built: SGD then keeps a momentum buffer. */
    dp_lr_schedule schedule;
    dp__steps_schedule(o, 1, &schedule);
    if (dp_lr_schedule_sets_momentum(&schedule)) {
        if (o->optim.optimizer == DP_OPTIMIZER_SGD)
            po.optimizer.momentum = (float)schedule.max_momentum;
        else
            po.optimizer.beta1 = (float)schedule.max_momentum;
    }
    int rc;
    if (o->parallel.pipeline) {
        DP_TRY(dp__train_open_pipeline(t, n->model, def, chw, &po, &n->pipe));
        rc = dp_executor_init_pipeline(&n->exec, n->pipe);
        if (rc < 0)
            dp_pipeline_close(n->pipe);
    } else {
        dp_data_parallel_t *dp;
        DP_TRY(dp_data_parallel_init(&dp, n->model, n->devs, n->ndev, &po));
        rc = dp_executor_init_data_parallel(&n->exec, dp);
        if (rc < 0)
            dp_data_parallel_close(dp);
    }
    if (rc < 0) {
        n->pipe = NULL;
        return rc;
    }
    if (o->output.verbose && t->rank == 0)
        log_buckets(n);
    return 0;
}

void dp__net_close(dp__train_net *n)
{
    if (!n)
        return;
    dp__net_sync(n);
    dp_executor_close(n->exec);
    dp_model_close(n->model);
    dp__free(n->init_specs);
    dp_devices_close(n->devs, n->ndev);
    dp__free(n);
}

int dp__net_count(const dp__train_net *n)
{
    return n->ndev;
}

int dp__net_sync(const dp__train_net *n)
{
    return n ? dp_devices_sync(n->devs, n->ndev) : 0;
}

dp_device_t *dp__net_device(const dp__train_net *n, int k)
{
    return k >= 0 && k < n->ndev ? n->devs[k] : NULL;
}

const char *dp__net_devices_str(const dp__train_net *n)
{
    return n->devices;
}

const char *dp__net_where(const dp__train_net *n)
{
    return n->where;
}

dp_model_t *dp__net_model(const dp__train_net *n)
{
    return n->model;
}

dp_executor_t *dp__net_executor(const dp__train_net *n)
{
    return n->exec;
}

dp_data_parallel_t *dp__net_replicas(const dp__train_net *n)
{
    return dp_executor_replicas(n->exec);
}

dp_pipeline_t *dp__net_pipeline(const dp__train_net *n)
{
    return n->pipe;
}

int64_t dp__net_classes(const dp__train_net *n)
{
    return n->classes;
}
