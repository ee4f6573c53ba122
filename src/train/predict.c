/* dp_predict's work (trainer.c opens and closes its run): the inputs read
 * as the checkpoint's samples, the forward pass in eval mode over the
 * devices (each rank of mpirun on its chunk), and the softmax of each
 * image's logits. The checkpoint says what its samples were
 * ("dptrain.input": C,H,W) and what its classes are called
 * ("dptrain.classes": a JSON array), both written by dp_train. */
#include "train/trainer.h"

#include "core/internal.h"
#include "dp/safetensors.h"
#include "io/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The checkpoint's class names into out (none: left empty). */
static int read_classes(const char *path, dp_predictions *out)
{
    char *json;
    int rc = dp_checkpoint_meta(path, "dptrain.classes", &json);
    if (rc == DP_ENOENT)
        return 0;
    DP_TRY(rc);
    dp__json_parser p = {.path = path, .doc = "dptrain.classes", .s = json, .len = strlen(json)};
    int cap = 0;
    rc = dp__json_expect(&p, '[', "expected a JSON array of class names");
    dp__json_skip_ws(&p);
    bool more = rc == 0 && dp__json_peek(&p) != ']';
    if (!more && rc == 0)
        p.pos++;
    while (rc == 0 && more) {
        const char *name;
        rc = dp__json_parse_string(&p, &name);
        if (rc == 0 && out->classes == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = dp__calloc((size_t)cap, sizeof *grown);
            if (grown && out->classes)
                memcpy(grown, out->class_names, (size_t)out->classes * sizeof *grown);
            dp__free(out->class_names);
            out->class_names = grown;
            rc = grown ? 0 : DP_ENOMEM;
        }
        if (rc == 0 && !(out->class_names[out->classes++] = dp__strdup(name)))
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

/* "C,H,W" of the checkpoint's samples into chw; zeros when it has none. */
static int read_input_shape(const char *path, int64_t chw[3])
{
    chw[0] = chw[1] = chw[2] = 0;
    char *v;
    int rc = dp_checkpoint_meta(path, "dptrain.input", &v);
    if (rc == DP_ENOENT)
        return 0;
    DP_TRY(rc);
    long long c, h, w;
    int end = 0;
    if (sscanf(v, "%lld,%lld,%lld%n", &c, &h, &w, &end) != 3 || v[end] != '\0' || c < 1 ||
        c > 1024 || h < 1 || h > DP_IMAGE_MAX_SIDE || w < 1 || w > DP_IMAGE_MAX_SIDE) {
        DP_ERROR("%s: metadata 'dptrain.input' is %s, not C,H,W", path, DP_REPR(v));
        rc = DP_EFORMAT;
    } else {
        chw[0] = c;
        chw[1] = h;
        chw[2] = w;
    }
    dp__free(v);
    return rc;
}

static bool is_npy(const char *path)
{
    size_t n = strlen(path);
    return n >= 4 && strcmp(path + n - 4, ".npy") == 0;
}

/* One .npy batch: (N, H, W) or (N, C, H, W), uint8 or float32, of the
 * checkpoint's sample shape where it has one. */
static int read_npy(const char *path, int64_t chw[3], dp_predictions *out, float **x)
{
    dp_npy a;
    DP_TRY(dp_npy_read(path, &a));
    char got[160], want[96];
    dp__shape_str(got, sizeof got, a.ndim, a.shape);
    int64_t c = a.ndim == 4 ? a.shape[1] : 1;
    int rc = 0;
    if ((a.ndim != 3 && a.ndim != 4) || a.shape[0] < 1 ||
        (a.dtype != DP_NPY_U8 && a.dtype != DP_NPY_F32)) {
        DP_ERROR("%s: %s of shape %s: expected uint8 or float32 images (N, H, W) or (N, C, H, W)",
                 path,
                 a.dtype == DP_NPY_U8    ? "uint8"
                 : a.dtype == DP_NPY_F32 ? "float32"
                                         : "integers",
                 got);
        rc = DP_EFORMAT;
    } else if (chw[0] &&
               (c != chw[0] || a.shape[a.ndim - 2] != chw[1] || a.shape[a.ndim - 1] != chw[2])) {
        DP_ERROR("%s: images of shape %s, the model takes samples %s (the checkpoint's)", path, got,
                 dp__shape_str(want, sizeof want, 3, chw));
        rc = DP_EINVAL;
    }
    int64_t n = a.shape[0];
    size_t elems = a.size / (a.dtype == DP_NPY_U8 ? 1 : 4);
    if (rc == 0) {
        chw[0] = c;
        chw[1] = a.shape[a.ndim - 2];
        chw[2] = a.shape[a.ndim - 1];
        *x = dp__malloc(elems * sizeof **x);
        out->names = dp__calloc((size_t)n, sizeof *out->names);
        rc = *x && out->names ? 0 : DP_ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < elems; i++) {
        float v = a.dtype == DP_NPY_U8 ? (float)((const uint8_t *)a.data)[i] / 255.0f
                                       : ((const float *)a.data)[i];
        if (!isfinite(v)) {
            DP_ERROR("%s: element %zu is %g: the images must be finite", path, i, (double)v);
            rc = DP_EFORMAT;
        }
        (*x)[i] = v;
    }
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        size_t len = strlen(path) + 24;
        out->names[i] = dp__malloc(len);
        if (!out->names[i])
            rc = DP_ENOMEM;
        else
            snprintf(out->names[i], len, "%s[%lld]", path, (long long)i);
        out->n = i + 1;
    }
    dp_npy_close(&a);
    return rc;
}

/* PNG and JPEG files, decoded with the checkpoint's channels and checked
 * against its size (or the first image's). */
static int read_images(const dp_predict_options *o, int64_t chw[3], dp_predictions *out, float **x)
{
    out->names = dp__calloc((size_t)o->ninputs, sizeof *out->names);
    if (!out->names)
        return DP_ENOMEM;
    size_t per = 0;
    for (int i = 0; i < o->ninputs; i++) {
        const char *path = o->inputs[i];
        if (is_npy(path)) {
            DP_ERROR("%s: a .npy batch is read alone, not among images", path);
            return DP_EINVAL;
        }
        dp_image img;
        DP_TRY(dp_image_read(path, (int)chw[0], &img));
        int rc = 0;
        if (!chw[0]) {
            chw[0] = img.channels;
            chw[1] = img.rows;
            chw[2] = img.cols;
        }
        if (img.rows != chw[1] || img.cols != chw[2]) {
            DP_ERROR("%s: %dx%d pixels (width x height), the model takes %lldx%lld (%s): "
                     "resize it first",
                     path, img.cols, img.rows, (long long)chw[2], (long long)chw[1],
                     i ? "the first image's" : "the checkpoint's samples");
            rc = DP_EINVAL;
        }
        if (rc == 0 && !*x) {
            per = (size_t)(chw[0] * chw[1] * chw[2]);
            *x = dp__malloc((size_t)o->ninputs * per * sizeof **x);
            rc = *x ? 0 : DP_ENOMEM;
        }
        for (size_t k = 0; rc == 0 && k < per; k++)
            (*x)[(size_t)i * per + k] = (float)img.pixels[k] / 255.0f;
        dp_image_close(&img);
        if (rc == 0 && !(out->names[i] = dp__strdup(path)))
            rc = DP_ENOMEM;
        DP_TRY(rc);
        out->n = i + 1;
    }
    return 0;
}

/* The normalisation the checkpoint's run trained with (none for a plain
 * state dict), so that the test set is seen as that run saw it. */
int dp__checkpoint_normalisation(const char *path, dp_augment_options *out)
{
    dp_safetensors_t *f;
    DP_TRY(dp_safetensors_open(&f, path));
    const char *v = dp_safetensors_meta(f, "dptrain.normalize");
    int rc = 0;
    if (v && dp_normalize_parse(v, out) < 0) {
        DP_ERROR("%s: metadata 'dptrain.normalize' is %s, not a normalisation", path, DP_REPR(v));
        rc = DP_EFORMAT;
    }
    dp_safetensors_close(f);
    return rc;
}

/* The images as the checkpoint's run saw its test set: normalised as it
 * says (dptrain.normalize), in place. */
static int normalise(const char *checkpoint, const int64_t *chw, int64_t n, float *x)
{
    dp_augment_options a = {0};
    DP_TRY(dp__checkpoint_normalisation(checkpoint, &a));
    if (!dp_augment_any(&a))
        return 0;
    DP_TRY(dp_augment_check(&a, (int)chw[0]));
    int64_t size = chw[0] * chw[1] * chw[2];
    float *tmp = dp__malloc((size_t)size * sizeof *tmp);
    if (!tmp)
        return DP_ENOMEM;
    for (int64_t i = 0; i < n; i++) {
        memcpy(tmp, x + i * size, (size_t)size * sizeof *tmp);
        dp_augment_apply(&a, NULL, (int)chw[0], (int)chw[1], (int)chw[2], tmp, x + i * size);
    }
    dp__free(tmp);
    return 0;
}

int dp__predict_inputs(const dp_predict_options *o, dp_predictions *out, float **x, int64_t chw[3])
{
    *x = NULL;
    if (o->ninputs < 1 || !o->inputs) {
        DP_ERROR("predict: no image given");
        return DP_EINVAL;
    }
    DP_TRY(read_classes(o->checkpoint, out));
    DP_TRY(read_input_shape(o->checkpoint, chw));
    int rc = o->ninputs == 1 && is_npy(o->inputs[0]) ? read_npy(o->inputs[0], chw, out, x)
                                                     : read_images(o, chw, out, x);
    if (rc < 0)
        return rc;
    return normalise(o->checkpoint, chw, out->n, *x);
}

/* The model's outputs per sample, from its summary on the meta device. */
static int model_outputs(const dp__trainer *t, const int64_t *chw, int *outputs)
{
    dp_layer_summary *rows;
    int n;
    /* The meta device runs float32 only: the summary is of shapes. */
    dp_precision was = dp_set_precision(DP_PRECISION_FP32);
    int rc = dp_model_summary(dp_model_definition(dp__net_model(t->net)), chw, &rows, &n);
    dp_set_precision(was);
    DP_TRY(rc);
    *outputs = n > 0 && rows[n - 1].ndim == 2 ? (int)rows[n - 1].shape[1] : 0;
    free(rows);
    if (*outputs < 1) {
        DP_ERROR("predict: the model's output is not (N, classes)");
        return DP_EINVAL;
    }
    return 0;
}

/* Rows [r0, r0 + b) of the logits into out->logits, and their softmax
 * into out->probs. */
static void softmax_rows(const float *logits, int64_t r0, int64_t b, dp_predictions *out)
{
    int k = out->outputs;
    memcpy(out->logits + r0 * k, logits, (size_t)(b * k) * sizeof *logits);
    for (int64_t r = 0; r < b; r++) {
        const float *l = logits + r * k;
        double top = l[0], sum = 0;
        for (int j = 1; j < k; j++)
            top = l[j] > top ? l[j] : top;
        for (int j = 0; j < k; j++)
            sum += exp((double)l[j] - top);
        for (int j = 0; j < k; j++)
            out->probs[(r0 + r) * k + j] = (float)(exp((double)l[j] - top) / sum);
    }
}

int dp__train_predict(dp__trainer *t, const float *x, const int64_t *chw, int64_t batch,
                      dp_predictions *out)
{
    DP_TRY(model_outputs(t, chw, &out->outputs));
    size_t total = (size_t)out->n * (size_t)out->outputs, per = (size_t)(chw[0] * chw[1] * chw[2]);
    out->probs = dp__calloc(total, sizeof *out->probs);
    out->logits = dp__calloc(total, sizeof *out->logits);
    float *logits = dp__malloc((size_t)batch * (size_t)out->outputs * sizeof *logits);
    dp_tape_t *tape = NULL;
    int rc = out->probs && out->logits && logits ? dp_tape_init(&tape, false) : DP_ENOMEM;
    int64_t first, mine = dp__train_rank_rows(t, out->n, &first);
    dp_data_parallel_t *dp = dp__net_replicas(t->net);
    for (int64_t r = first; rc == 0 && r < first + mine; r += batch) {
        int64_t b = DP_MIN(batch, first + mine - r), xs[4] = {b, chw[0], chw[1], chw[2]};
        dp_tensor_t *xt = NULL, *y;
        rc =
            dp_tensor_from_host(&xt, dp__net_device(t->net, 0), DP_F32, 4, xs, x + (size_t)r * per);
        dp_tape_begin(tape);
        if (rc == 0)
            rc = dp_data_parallel_forward(dp, xt, false, &y);
        if (rc == 0)
            rc = dp_tensor_to_host(y, logits, (size_t)b * (size_t)out->outputs * sizeof *logits);
        if (rc == 0)
            rc = dp_waitall();
        dp_tape_end(tape);
        dp_tape_reset(tape);
        dp_tensor_free(xt);
        if (rc == 0)
            softmax_rows(logits, r, b, out);
    }
    /* Every rank gets every row: the others' are zeros here. */
    for (size_t at = 0; rc == 0 && t->ranks > 1 && at < total; at += (size_t)1 << 24) {
        rc = dp_dist_sum_f32(out->probs + at, (int)DP_MIN(total - at, (size_t)1 << 24));
        if (rc == 0)
            rc = dp_dist_sum_f32(out->logits + at, (int)DP_MIN(total - at, (size_t)1 << 24));
    }
    dp_tape_close(tape);
    dp__free(logits);
    return rc;
}

void dp_predictions_close(dp_predictions *p)
{
    if (!p)
        return;
    for (int64_t i = 0; p->names && i < p->n; i++)
        dp__free(p->names[i]);
    for (int k = 0; p->class_names && k < p->classes; k++)
        dp__free(p->class_names[k]);
    dp__free(p->names);
    dp__free(p->class_names);
    dp__free(p->probs);
    dp__free(p->logits);
    memset(p, 0, sizeof *p);
}

int dp_predictions_topk(const dp_predictions *p, int64_t i, int k, int *idx)
{
    k = DP_MIN(k, p->outputs);
    const float *row = p->probs + i * p->outputs;
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int c = 0; c < p->outputs; c++) {
            bool taken = false;
            for (int q = 0; q < j && !taken; q++)
                taken = idx[q] == c;
            if (!taken && (best < 0 || row[c] > row[best]))
                best = c;
        }
        idx[j] = best;
    }
    return k;
}
