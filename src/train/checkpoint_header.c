/* What a checkpoint says of itself, read from its header alone before any
 * data are loaded or model built: which model it holds, checked against the
 * run's, its samples' shape, its class names and its normalisation.
 *
 * A checkpoint is data from elsewhere. Its "dptrain.model" may name a
 * built-in model, which a run without `model` then builds; a model file it
 * names is never opened on its word (a checkpoint naming /etc/passwd would
 * have dptrain read that file and quote its first line): the run must name
 * the file itself with `model`, and the checkpoint must then be of that
 * file, by its path or by the SHA-256 it recorded ("dptrain.model_sha256",
 * written when training from a file). Every message names the checkpoint,
 * and quotes what its metadata says as Python's repr would. */
#include "train/checkpoint_header.h"

#include "core/internal.h"
#include "dp/safetensors.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "train/option_values.h"

#include <stdlib.h>
#include <string.h>

static bool is_builtin(const char *name)
{
    for (const char *const *b = dp_model_names(); *b; b++)
        if (strcmp(*b, name) == 0)
            return true;
    return false;
}

int dp__checkpoint_check_model(const dp_safetensors_t *f, const char *path, const char *model)
{
    const char *theirs = dp_safetensors_meta(f, "dptrain.model");
    if (!theirs || strcmp(theirs, model) == 0)
        return 0; /* a plain state dict says nothing; its tensors will tell */
    const char *sha = dp_safetensors_meta(f, "dptrain.model_sha256");
    char mine[65];
    if (sha && !is_builtin(model) && !is_builtin(theirs) && dp_model_sha256(model, mine) == 0 &&
        strcmp(sha, mine) == 0)
        return 0; /* the same file, moved or copied */
    DP_ERROR("%s: a checkpoint of %s, not %s%s", path, DP_REPR(theirs), model,
             sha && !is_builtin(model) ? " (nor of a file with the SHA-256 it recorded)" : "");
    return DP_EINVAL;
}

/* The model a run builds for the checkpoint: `given` (checked against
 * what the checkpoint holds), else the built-in model it names. */
static int resolve_model(const dp_safetensors_t *f, const char *path, const char *given,
                         char *model, size_t size)
{
    if (given) {
        if (strlen(given) >= size) {
            DP_ERROR("`model` is longer than %zu characters", size - 1);
            return DP_EINVAL;
        }
        DP_TRY(dp__checkpoint_check_model(f, path, given));
        snprintf(model, size, "%s", given);
        return 0;
    }
    const char *theirs = dp_safetensors_meta(f, "dptrain.model");
    if (!theirs) {
        DP_ERROR("%s: does not say which model it holds: give `model`", path);
        return DP_EINVAL;
    }
    if (!is_builtin(theirs)) {
        DP_ERROR("%s: names the model file %s; a checkpoint does not choose which files are "
                 "read: give the model file with `model`",
                 path, DP_REPR(theirs));
        return DP_EINVAL;
    }
    snprintf(model, size, "%s", theirs);
    return 0;
}

int dp_checkpoint_model_for(const char *path, const char *given, char *model, size_t size)
{
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open_header(&f, path));
    int rc = resolve_model(f, path, given, model, size);
    dp_safetensors_close(f);
    return rc;
}

/* dptrain.classes: a JSON array of strings (absent: none). */
static int read_classes(const dp_safetensors_t *f, const char *path, dp__checkpoint_header *h)
{
    const char *v = dp_safetensors_meta(f, "dptrain.classes");
    if (!v)
        return 0;
    char *json = dp__strdup(v);
    if (!json)
        return DP_ENOMEM;
    dp__json_parser p = {.path = path, .doc = "dptrain.classes", .s = json, .len = strlen(json)};
    int cap = 0;
    int rc = dp__json_expect(&p, '[', "expected a JSON array of class names");
    dp__json_skip_ws(&p);
    bool more = rc == 0 && dp__json_peek(&p) != ']';
    if (!more && rc == 0)
        p.pos++;
    while (rc == 0 && more) {
        const char *name;
        dp__json_skip_ws(&p);
        rc = dp__json_peek(&p) == '"' ? dp__json_parse_string(&p, &name)
                                      : dp__json_error(&p, "expected a class name (a string)");
        if (rc == 0 && h->classes == DP_CHECKPOINT_MAX_CLASSES)
            rc = dp__json_error(&p, "more class names than a classifier has outputs");
        if (rc == 0 && h->classes == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = dp__calloc((size_t)cap, sizeof *grown);
            if (grown && h->classes)
                memcpy(grown, h->class_names, (size_t)h->classes * sizeof *grown);
            dp__free(h->class_names);
            h->class_names = grown;
            rc = grown ? 0 : DP_ENOMEM;
        }
        if (rc == 0 && !(h->class_names[h->classes++] = dp__strdup(name)))
            rc = DP_ENOMEM;
        if (rc == 0) {
            int next = dp__json_next_or_close(&p, ']', "expected ',' or ']'");
            rc = next < 0 ? next : 0;
            more = next == 1;
        }
    }
    dp__json_skip_ws(&p);
    if (rc == 0 && p.pos != p.len)
        rc = dp__json_error(&p, "more after the array");
    dp__free(json);
    return rc;
}

/* dptrain.input: "C,H,W" of the samples (absent: zeros). */
static int read_input_shape(const dp_safetensors_t *f, const char *path, int64_t chw[3])
{
    const char *v = dp_safetensors_meta(f, "dptrain.input");
    if (!v)
        return 0;
    long long c, h, w;
    int end = 0;
    if (sscanf(v, "%lld,%lld,%lld%n", &c, &h, &w, &end) != 3 || v[end] != '\0' || c < 1 ||
        c > 1024 || h < 1 || h > DP_IMAGE_MAX_SIDE || w < 1 || w > DP_IMAGE_MAX_SIDE) {
        DP_ERROR("%s: metadata 'dptrain.input' is %s, not C,H,W", path, DP_REPR(v));
        return DP_EFORMAT;
    }
    chw[0] = c;
    chw[1] = h;
    chw[2] = w;
    return 0;
}

/* dptrain.normalize: the run's normalisation (absent: none). */
static int read_normalisation(const dp_safetensors_t *f, const char *path, dp_augment_options *out)
{
    const char *v = dp_safetensors_meta(f, "dptrain.normalize");
    if (v && dp_normalize_parse(v, out) < 0) {
        DP_ERROR("%s: metadata 'dptrain.normalize' is %s, not a normalisation", path, DP_REPR(v));
        return DP_EFORMAT;
    }
    return 0;
}

/* The recorded options the test transform depends on, read as their
 * options read text. */
static int read_test_transform(const dp_safetensors_t *f, const char *path,
                               dp__checkpoint_header *h)
{
    static const char *const names[] = {"test_transform", "transform", "jpeg_scale"};
    dp_train_options o;
    dp_train_options_default(&o);
    for (size_t i = 0; i < DP_COUNTOF(names); i++) {
        char key[64], why[256];
        snprintf(key, sizeof key, "dptrain.%s", names[i]);
        const char *v = dp_safetensors_meta(f, key);
        if (v && dp_option_parse(dp_train_option_find(names[i]), &o, v, why, sizeof why) < 0) {
            DP_ERROR("%s: metadata '%s' is %s: %s", path, key, DP_REPR(v), why);
            return DP_EFORMAT;
        }
    }
    h->test_transform = o.data.test_transform;
    h->jpeg_scale = o.data.jpeg_scale;
    if (o.data.transform == DP__TRANSFORM_IMAGENET) {
        if (h->test_transform.n == 0)
            DP_TRY(dp_transform_parse("imagenet-test", &h->test_transform));
        if (h->normalize.norm_channels == 0)
            DP_TRY(dp_normalize_parse("0.485,0.456,0.406,0.229,0.224,0.225", &h->normalize));
    }
    return 0;
}

int dp__checkpoint_header_read(const char *path, const char *given, dp__checkpoint_header *h)
{
    memset(h, 0, sizeof *h);
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open_header(&f, path));
    int rc = resolve_model(f, path, given, h->model, sizeof h->model);
    if (rc == 0)
        rc = read_classes(f, path, h);
    if (rc == 0)
        rc = read_input_shape(f, path, h->input_chw);
    if (rc == 0)
        rc = read_normalisation(f, path, &h->normalize);
    if (rc == 0)
        rc = read_test_transform(f, path, h);
    dp_safetensors_close(f);
    if (rc < 0)
        dp__checkpoint_header_free(h);
    return rc;
}

/* Whether `name` is one of the n specs' names. */
static bool in_specs(const dp_param_spec *specs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0)
            return true;
    return false;
}

static bool is_def_tensor(const dp_model_def *def, const char *name)
{
    if (in_specs(def->params, def->nparams, name) ||
        (def->buffers && in_specs(def->buffers, def->nbuffers, name)))
        return true;
    static const char suffix[] = ".num_batches_tracked";
    size_t len = strlen(name);
    for (int i = 0; i < def->nbn; i++) {
        size_t bn = strlen(def->bn_names[i]);
        if (len == bn + sizeof suffix - 1 && strncmp(name, def->bn_names[i], bn) == 0 &&
            strcmp(name + bn, suffix) == 0)
            return true;
    }
    return strncmp(name, "_state.", 7) == 0;
}

/* Every spec of specs[0..n) in f, F32 of its shape. */
static int check_specs(const dp_safetensors_t *f, const char *path, const char *model,
                       const dp_param_spec *specs, int n)
{
    for (int i = 0; i < n; i++) {
        dp_st_tensor s;
        if (dp_safetensors_find(f, specs[i].name, &s) < 0) {
            DP_ERROR("%s: no tensor %s (not a checkpoint of %s?)", path, DP_REPR(specs[i].name),
                     model);
            return DP_EFORMAT;
        }
        bool same = s.dtype == DP_ST_F32 && s.ndim == specs[i].ndim;
        for (int d = 0; same && d < s.ndim; d++)
            same = s.shape[d] == specs[i].shape[d];
        if (!same) {
            char got[96], want[96];
            const char *dtype = dp__st_dtype_name(s.dtype);
            DP_ERROR("%s: tensor %s is %s %s, %s expects F32 %s", path, DP_REPR(specs[i].name),
                     dtype ? dtype : "of an unknown dtype",
                     dp__shape_str(got, sizeof got, s.ndim, s.shape), model,
                     dp__shape_str(want, sizeof want, specs[i].ndim, specs[i].shape));
            return DP_EFORMAT;
        }
    }
    return 0;
}

int dp__checkpoint_check_start(const char *path, const dp_model_def *def, dp_checkpoint_state *st)
{
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open_header(&f, path));
    int rc = dp__checkpoint_check_model(f, path, def->name);
    for (int i = 0; rc == 0 && i < dp_safetensors_count(f); i++) {
        dp_st_tensor s;
        rc = dp_safetensors_get(f, i, &s);
        if (rc == 0 && !is_def_tensor(def, s.name)) {
            DP_ERROR("%s: tensor %s is not part of %s", path, DP_REPR(s.name), def->name);
            rc = DP_EFORMAT;
        }
    }
    if (rc == 0)
        rc = check_specs(f, path, def->name, def->params, def->nparams);
    if (rc == 0 && def->buffers)
        rc = check_specs(f, path, def->name, def->buffers, def->nbuffers);
    if (rc == 0 && st)
        rc = dp__checkpoint_read_state(f, path, st);
    dp_safetensors_close(f);
    return rc;
}

void dp__checkpoint_header_free(dp__checkpoint_header *h)
{
    for (int k = 0; h->class_names && k < h->classes; k++)
        dp__free(h->class_names[k]);
    dp__free(h->class_names);
    h->class_names = NULL;
    h->classes = 0;
}
