/* dp_predict's work (trainer.c opens and closes its run): the inputs read
 * as the checkpoint's samples, the forward pass in eval mode over the
 * devices (each rank of mpirun on its chunk), and the softmax of each
 * image's logits. The checkpoint says what its samples were
 * ("dptrain.input": C,H,W) and what its classes are called
 * ("dptrain.classes": a JSON array), both written by dp_train. */
#include "train/trainer.h"

#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Image `path` through the checkpoint's test transform, decoded as the
 * run's test loader decoded it (dp_transform_decode, its jpeg_scale):
 * [chw] floats at *x + i * per (allocated for all inputs at the first). */
static int read_transformed(const dp_predict_options *o, const dp__checkpoint_header *h, int i,
                            const int64_t chw[3], float **x)
{
    const char *path = o->inputs[i];
    size_t per = (size_t)(chw[0] * chw[1] * chw[2]);
    if (!*x && !(*x = dp__malloc((size_t)o->ninputs * per * sizeof **x)))
        return DP_ENOMEM;
    FILE *f = fopen(path, "rb");
    if (!f) {
        DP_ERROR("%s: cannot open the image", path);
        return DP_ENOENT;
    }
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 1 << 16;
            unsigned char *grown = cap <= ((size_t)1 << 30) ? dp__malloc(cap) : NULL;
            if (!grown) {
                DP_ERROR("%s: too large to read as an image", path);
                rc = DP_EINVAL;
                break;
            }
            if (len)
                memcpy(grown, buf, len);
            dp__free(buf);
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    int out[3];
    if (rc == 0)
        rc = dp_transform_decode(&h->test_transform, (dp_jpeg_scale)h->jpeg_scale, buf, len, path,
                                 (int)chw[0], 0, 0, i, *x + (size_t)i * per, per, out);
    dp__free(buf);
    if (rc == 0 && (out[0] != chw[0] || out[1] != chw[1] || out[2] != chw[2])) {
        DP_ERROR("%s: %dx%d pixels after the checkpoint's test transforms, the model takes "
                 "%lldx%lld (width x height)",
                 path, out[2], out[1], (long long)chw[2], (long long)chw[1]);
        rc = DP_EINVAL;
    }
    return rc;
}

/* PNG and JPEG files, decoded with the checkpoint's channels and checked
 * against its size (or the first image's); through its test transforms
 * where it records them, so that an image of any size is taken. */
static int read_images(const dp_predict_options *o, const dp__checkpoint_header *h, int64_t chw[3],
                       dp_predictions *out, float **x)
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
        if (h->test_transform.n > 0 && chw[0]) {
            DP_TRY(read_transformed(o, h, i, chw, x));
            if (!(out->names[i] = dp__strdup(path)))
                return DP_ENOMEM;
            out->n = i + 1;
            continue;
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

/* The images as the checkpoint's run saw its test set: normalised as it
 * says (dptrain.normalize), in place. */
static int normalise(const dp_augment_options *norm, const int64_t *chw, int64_t n, float *x)
{
    dp_augment_options a = *norm;
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

int dp__predict_inputs(const dp_predict_options *o, dp__checkpoint_header *h, dp_predictions *out,
                       float **x, int64_t chw[3])
{
    *x = NULL;
    if (o->ninputs < 1 || !o->inputs) {
        DP_ERROR("predict: no image given");
        return DP_EINVAL;
    }
    /* The class names pass from the header to the predictions. */
    out->class_names = h->class_names;
    out->classes = h->classes;
    h->class_names = NULL;
    h->classes = 0;
    memcpy(chw, h->input_chw, 3 * sizeof *chw);
    int rc = o->ninputs == 1 && is_npy(o->inputs[0]) ? read_npy(o->inputs[0], chw, out, x)
                                                     : read_images(o, h, chw, out, x);
    if (rc < 0)
        return rc;
    return normalise(&h->normalize, chw, out->n, *x);
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
            rc = dp__net_sync(t->net);
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
