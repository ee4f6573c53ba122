/* Checkpoints: a model and its training state as safetensors. */
#include "dp/checkpoint.h"

#include "dp/safetensors.h"

#include "core/internal.h"
#include "io/safetensors.h"
#include "train/checkpoint_header.h"
#include "train/checkpoint_history.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The optimizer's state tensors are "_state.<optimizer>.<torch's name>":
 * _state.sgd.momentum_buffer, _state.adam.exp_avg, _state.adamw.exp_avg_sq.
 * Checkpoints written before Adam named SGD's momentum this: */
#define LEGACY_VELOCITY_NAME "_state.sgd.velocity"
enum { MAX_STATES = 2 };

static void state_name(char *buf, size_t size, const dp_optimizer_t *o, const char *name)
{
    snprintf(buf, size, "_state.%s.%s", dp_optimizer_kind_name(dp_optimizer_options_of(o)->kind),
             name);
}

/* Whether `name` is a model file (not a built-in name, nor a program's
 * own definition's). */
static bool is_model_file(const char *name)
{
    for (const char *const *b = dp_model_names(); *b; b++)
        if (strcmp(*b, name) == 0)
            return false;
    struct stat st;
    return stat(name, &st) == 0 && S_ISREG(st.st_mode);
}

/* Host copies of a parameter list, one tensor entry per parameter. */
static int add_params(dp_st_tensor *ts, int *n, dp_params_t *p, float **host)
{
    int64_t numel = dp_params_numel(p);
    *host = dp__malloc((size_t)(numel ? numel : 1) * sizeof(float));
    if (!*host)
        return DP_ENOMEM;
    DP_TRY(dp_params_get_all(p, *host));
    int64_t offset = 0;
    for (int i = 0; i < dp_params_count(p); i++) {
        dp_tensor_t *t = dp_params_get(p, i);
        dp_st_tensor *s = &ts[(*n)++];
        memset(s, 0, sizeof *s);
        s->name = dp_params_name(p, i);
        s->dtype = DP_ST_F32;
        s->ndim = dp_tensor_ndim(t);
        for (int d = 0; d < s->ndim; d++)
            s->shape[d] = dp_tensor_dim(t, d);
        s->data = *host + offset;
        s->bytes = (size_t)dp_tensor_numel(t) * sizeof(float);
        offset += dp_tensor_numel(t);
    }
    return 0;
}

int dp_checkpoint_save(const char *path, dp_model_t *m, dp_optimizer_t *optim,
                       const dp_checkpoint_state *st)
{
    dp_params_t *params = dp_model_params(m), *buffers = dp_model_buffers(m);
    int nbn;
    const char *const *bn = dp_model_bn_names(m, &nbn);
    int cap = dp_params_count(params) + (buffers ? dp_params_count(buffers) : 0) + nbn + MAX_STATES;
    dp_st_tensor *ts = dp__calloc((size_t)cap, sizeof *ts);
    char(*bn_names)[DP_ST_MAX_NAME + 1] = dp__calloc((size_t)(nbn ? nbn : 1), sizeof *bn_names);
    float *hp = NULL, *hb = NULL, *hv[MAX_STATES] = {NULL, NULL};
    char state_names[MAX_STATES][96];
    char *history = NULL;
    int n = 0, rc = ts && bn_names ? 0 : DP_ENOMEM;
    int64_t tracked = dp_model_batches_tracked(m);
    if (rc == 0)
        rc = add_params(ts, &n, params, &hp);
    if (rc == 0 && buffers)
        rc = add_params(ts, &n, buffers, &hb);
    for (int i = 0; rc == 0 && i < nbn; i++) {
        snprintf(bn_names[i], sizeof bn_names[i], "%s.num_batches_tracked", bn[i]);
        ts[n++] = (dp_st_tensor){.name = bn_names[i],
                                 .dtype = DP_ST_I64,
                                 .ndim = 0,
                                 .data = &tracked,
                                 .bytes = sizeof tracked};
    }
    const char *sname;
    dp_tensor_t *state;
    for (int i = 0;
         rc == 0 && optim && i < MAX_STATES && (state = dp_optimizer_state(optim, i, &sname));
         i++) {
        int64_t numel = dp_tensor_numel(state);
        hv[i] = dp__malloc((size_t)numel * sizeof *hv[i]);
        rc = hv[i] ? dp_tensor_to_host(state, hv[i], (size_t)numel * sizeof *hv[i]) : DP_ENOMEM;
        state_name(state_names[i], sizeof state_names[i], optim, sname);
        if (rc == 0)
            ts[n++] = (dp_st_tensor){.name = state_names[i],
                                     .dtype = DP_ST_F32,
                                     .ndim = 1,
                                     .shape = {numel},
                                     .data = hv[i],
                                     .bytes = (size_t)numel * sizeof *hv[i]};
    }
    char vals[5][96], input[96];
    char recorded[DP_TRAIN_OPTION_COUNT][64], recorded_values[DP_TRAIN_OPTION_COUNT][512];
    const char *meta[2 * (24 + DP_TRAIN_OPTION_COUNT)];
    char steps[32], best[64], sha[65];
    int nmeta = 0;
    meta[nmeta++] = "format";
    meta[nmeta++] = "pt";
    meta[nmeta++] = "dptrain.model";
    meta[nmeta++] = dp_model_name(m);
    /* A model file's SHA-256 as it was loaded: a run that names the same
     * file elsewhere (moved, copied) may load this checkpoint. */
    if (is_model_file(dp_model_name(m)) && dp_model_sha256(dp_model_name(m), sha) == 0) {
        meta[nmeta++] = "dptrain.model_sha256";
        meta[nmeta++] = sha;
    }
    if (rc == 0 && st) {
        history = dp__checkpoint_history_str(st);
        if (!history)
            rc = DP_ENOMEM;
        snprintf(vals[0], 96, "%d", st->epochs_done);
        snprintf(vals[1], 96, "%" PRId64, st->step);
        snprintf(vals[2], 96, "%" PRIu64, st->seed);
        snprintf(vals[3], 96, "%" PRId64, st->batch);
        snprintf(vals[4], 96, "%.17g %.17g %.17g", st->partial_loss, st->partial_correct,
                 st->partial_seconds);
        const char *keys[] = {"dptrain.epochs_done", "dptrain.step", "dptrain.seed",
                              "dptrain.batch", "dptrain.partial"};
        for (int i = 0; i < 5; i++) {
            meta[nmeta++] = keys[i];
            meta[nmeta++] = vals[i];
        }
        /* The options the list records, by their names. */
        int count;
        const dp_option *opts = dp_train_option_list(&count);
        for (int i = 0; i < count; i++) {
            if (!(opts[i].traits & DP_OPTION_RECORD))
                continue;
            snprintf(recorded[i], sizeof recorded[i], "dptrain.%s", opts[i].name);
            meta[nmeta++] = recorded[i];
            meta[nmeta++] = dp_option_format(&opts[i], &st->options, recorded_values[i],
                                             sizeof recorded_values[i]);
        }
        meta[nmeta++] = "dptrain.devices";
        meta[nmeta++] = st->devices;
        meta[nmeta++] = "dptrain.history";
        meta[nmeta++] = history ? history : "";
        if (st->conv_algos[0]) {
            meta[nmeta++] = "dptrain.conv_algos";
            meta[nmeta++] = st->conv_algos;
        }
        if (st->lr_schedule[0]) {
            meta[nmeta++] = "dptrain.lr_schedule";
            meta[nmeta++] = st->lr_schedule;
        }
        if (st->best_epoch > 0) {
            snprintf(best, sizeof best, "%.17g %d", st->best_acc, st->best_epoch);
            meta[nmeta++] = "dptrain.best";
            meta[nmeta++] = best;
        }
        if (st->input_chw[0] > 0) {
            snprintf(input, sizeof input, "%" PRId64 ",%" PRId64 ",%" PRId64, st->input_chw[0],
                     st->input_chw[1], st->input_chw[2]);
            meta[nmeta++] = "dptrain.input";
            meta[nmeta++] = input;
        }
        if (st->classes) {
            meta[nmeta++] = "dptrain.classes";
            meta[nmeta++] = st->classes;
        }
    }
    if (rc == 0 && optim) {
        meta[nmeta++] = "dptrain.optimizer";
        meta[nmeta++] = dp_optimizer_kind_name(dp_optimizer_options_of(optim)->kind);
        snprintf(steps, sizeof steps, "%" PRId64, dp_optimizer_steps(optim));
        meta[nmeta++] = "dptrain.optimizer_steps";
        meta[nmeta++] = steps;
    }
    if (rc == 0)
        rc = dp_safetensors_write(path, ts, n, meta, nmeta / 2);
    dp__free(history);
    dp__free(hv[0]);
    dp__free(hv[1]);
    dp__free(hb);
    dp__free(hp);
    dp__free(bn_names);
    dp__free(ts);
    return rc;
}

/* Copies every tensor of `p` from the file, checking dtype and shape. */
static int load_params(const dp_safetensors_t *f, const char *path, const char *model,
                       dp_params_t *p)
{
    int64_t numel = dp_params_numel(p), offset = 0;
    float *host = dp__malloc((size_t)(numel ? numel : 1) * sizeof *host);
    if (!host)
        return DP_ENOMEM;
    int rc = 0;
    for (int i = 0; rc == 0 && i < dp_params_count(p); i++) {
        dp_tensor_t *t = dp_params_get(p, i);
        const char *name = dp_params_name(p, i);
        dp_st_tensor s;
        if (dp_safetensors_find(f, name, &s) < 0) {
            DP_ERROR("%s: no tensor %s (not a checkpoint of %s?)", path, DP_REPR(name), model);
            rc = DP_EFORMAT;
            break;
        }
        int same = s.dtype == DP_ST_F32 && s.ndim == dp_tensor_ndim(t);
        for (int d = 0; same && d < s.ndim; d++)
            same = s.shape[d] == dp_tensor_dim(t, d);
        if (!same) {
            char got[96], want[96];
            int64_t ws[DP_MAX_DIMS];
            for (int d = 0; d < dp_tensor_ndim(t); d++)
                ws[d] = dp_tensor_dim(t, d);
            dp__shape_str(got, sizeof got, s.ndim, s.shape);
            dp__shape_str(want, sizeof want, dp_tensor_ndim(t), ws);
            const char *dtype = dp__st_dtype_name(s.dtype);
            DP_ERROR("%s: tensor %s is %s %s, %s expects F32 %s", path, DP_REPR(name),
                     dtype ? dtype : "of an unknown dtype", got, model, want);
            rc = DP_EFORMAT;
            break;
        }
        memcpy(host + offset, s.data, s.bytes);
        /* NaN or Inf weights would give an accuracy (or a run) that means
         * nothing: say so instead. */
        for (int64_t k = 0; k < dp_tensor_numel(t); k++) {
            if (!isfinite(host[offset + k])) {
                DP_ERROR("%s: tensor %s holds %g at element %" PRId64
                         ": the weights are not finite",
                         path, DP_REPR(name), (double)host[offset + k], k);
                rc = DP_EFORMAT;
                break;
            }
        }
        offset += dp_tensor_numel(t);
    }
    if (rc == 0)
        rc = dp_params_set(p, host);
    dp__free(host);
    return rc;
}

static int is_model_tensor(dp_model_t *m, const char *name)
{
    dp_params_t *b = dp_model_buffers(m);
    if (dp_params_find(dp_model_params(m), name) >= 0 || (b && dp_params_find(b, name) >= 0))
        return 1;
    int nbn;
    const char *const *bn = dp_model_bn_names(m, &nbn);
    size_t len = strlen(name);
    static const char suffix[] = ".num_batches_tracked";
    for (int i = 0; i < nbn; i++)
        if (len == strlen(bn[i]) + sizeof suffix - 1 && strncmp(name, bn[i], strlen(bn[i])) == 0 &&
            strcmp(name + strlen(bn[i]), suffix) == 0)
            return 1;
    return strncmp(name, "_state.", 7) == 0;
}

static int load_weights(const dp_safetensors_t *f, const char *path, dp_model_t *m)
{
    const char *model = dp_model_name(m);
    DP_TRY(dp__checkpoint_check_model(f, path, model));
    for (int i = 0; i < dp_safetensors_count(f); i++) {
        dp_st_tensor s;
        DP_TRY(dp_safetensors_get(f, i, &s));
        if (!is_model_tensor(m, s.name)) {
            DP_ERROR("%s: tensor %s is not part of %s", path, DP_REPR(s.name), model);
            return DP_EFORMAT;
        }
    }
    DP_TRY(load_params(f, path, model, dp_model_params(m)));
    if (dp_model_buffers(m))
        DP_TRY(load_params(f, path, model, dp_model_buffers(m)));
    int nbn;
    const char *const *bn = dp_model_bn_names(m, &nbn);
    if (nbn > 0) {
        char name[DP_ST_MAX_NAME + 1];
        snprintf(name, sizeof name, "%s.num_batches_tracked", bn[0]);
        dp_st_tensor s;
        if (dp_safetensors_find(f, name, &s) == 0 && s.dtype == DP_ST_I64 && s.bytes == 8) {
            int64_t v;
            memcpy(&v, s.data, sizeof v);
            dp_model_set_batches_tracked(m, v);
        }
    }
    return 0;
}

int dp_checkpoint_load_weights(const char *path, dp_model_t *m)
{
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open(&f, path));
    int rc = load_weights(f, path, m);
    dp_safetensors_close(f);
    return rc;
}

/* The optimizer's state and step count, for a run with the same optimizer
 * (a checkpoint without its name was written by SGD). */
static int load_optimizer(const dp_safetensors_t *f, const char *path, dp_optimizer_t *o,
                          int64_t step)
{
    const char *mine = dp_optimizer_kind_name(dp_optimizer_options_of(o)->kind);
    const char *theirs = dp_safetensors_meta(f, "dptrain.optimizer");
    if (strcmp(theirs ? theirs : "sgd", mine) != 0) {
        DP_ERROR("%s was trained with the optimizer %s; this run's is %s: resume with the same "
                 "optimizer",
                 path, theirs ? DP_REPR(theirs) : "sgd", mine);
        return DP_EINVAL;
    }
    int64_t steps = step;
    if (dp_safetensors_meta(f, "dptrain.optimizer_steps"))
        DP_TRY(dp__checkpoint_meta_i64(f, path, "dptrain.optimizer_steps", 0, INT64_MAX, &steps));
    dp_optimizer_set_steps(o, steps);
    const char *sname;
    dp_tensor_t *state;
    for (int i = 0; (state = dp_optimizer_state(o, i, &sname)); i++) {
        char name[96];
        state_name(name, sizeof name, o, sname);
        dp_st_tensor s;
        int64_t numel = dp_tensor_numel(state);
        int found = dp_safetensors_find(f, name, &s) == 0 ||
                    (strcmp(sname, "momentum_buffer") == 0 &&
                     dp_safetensors_find(f, LEGACY_VELOCITY_NAME, &s) == 0);
        if (!found || s.dtype != DP_ST_F32 || s.bytes != (size_t)numel * sizeof(float)) {
            DP_ERROR("%s: no optimizer state '%s' of %" PRId64 " floats (trained with other "
                     "optimizer options?)",
                     path, name, numel);
            return DP_EFORMAT;
        }
        DP_TRY(dp_tensor_copy_from_host(state, s.data, s.bytes));
        DP_TRY(dp_tensor_wait(state));
    }
    return 0;
}

int dp_checkpoint_load(const char *path, dp_model_t *m, dp_optimizer_t *optim,
                       dp_checkpoint_state *st)
{
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open(&f, path));
    int rc = dp__checkpoint_read_state(f, path, st);
    if (rc == 0) {
        snprintf(st->model, sizeof st->model, "%s", dp_model_name(m));
        rc = load_weights(f, path, m);
    }
    if (rc == 0 && optim)
        rc = load_optimizer(f, path, optim, st->step);
    dp_safetensors_close(f);
    return rc;
}

int dp_checkpoint_model(const char *path, char *buf, size_t size)
{
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open_header(&f, path));
    const char *model = dp_safetensors_meta(f, "dptrain.model");
    int rc = model ? 0 : DP_ENOENT;
    if (model)
        snprintf(buf, size, "%s", model);
    dp_safetensors_close(f);
    return rc;
}

int dp_checkpoint_meta(const char *path, const char *key, char **value)
{
    *value = NULL;
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open_header(&f, path));
    const char *v = dp_safetensors_meta(f, key);
    int rc = v ? 0 : DP_ENOENT;
    if (v && !(*value = dp__strdup(v)))
        rc = DP_ENOMEM;
    dp_safetensors_close(f);
    return rc;
}
