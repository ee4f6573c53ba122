/* A sample's draws for a transform list: the box each stage cuts from its
 * input and whether it flips, a pure function of (seed, epoch, index) and
 * the image's size.
 *
 * All stages draw, in list order, from the one stream of the sample that
 * dp_augment_draw_for uses (augment.c): crop:P draws randint(0, 2P + 1)
 * for the top, then for the left; flip one uniform (< 0.5 flips);
 * random-resized-crop draws as torchvision's RandomResizedCrop.get_params,
 * for each of up to 10 tries:
 *   1. u1, uniform in [0, 1): s = scale0 + (scale1 - scale0) u1 (uniform_(scale0, scale1)),
 *      target_area = rows * cols * s;
 *   2. u2: r = log ratio0 + (log ratio1 - log ratio0) u2, aspect = exp(r) (float32);
 *   3. w = round(sqrt(target_area aspect)), h = round(sqrt(target_area / aspect)),
 *      rounding half to even as Python's round; if 0 < w <= cols and
 *      0 < h <= rows: top = randint(0, rows - h + 1), then left =
 *      randint(0, cols - w + 1), and the box is found;
 * after 10 failed tries, the central crop clamped to the ratio range (no
 * draws). uniform is dp_rng_uniform, randint(0, n) dp_rng_below(n).
 * resize, center-crop, gray and rgb draw nothing. */
#include "data/transform_internal.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

typedef struct drawer {
    dp_rng rng;
    dp__transform_trace *trace;
    int stage;
} drawer;

static void record(drawer *dr, int64_t bound, double value)
{
    dp__transform_trace *t = dr->trace;
    if (!t)
        return;
    if (t->n < DP__TRANSFORM_TRACE_MAX) {
        t->draw[t->n].stage = dr->stage;
        t->draw[t->n].bound = bound;
        t->draw[t->n].value = value;
    }
    t->n++;
}

static float uniform(drawer *dr)
{
    float u = dp_rng_uniform(&dr->rng);
    record(dr, 0, u);
    return u;
}

static int randint(drawer *dr, int64_t n)
{
    int v = (int)dp_rng_below(&dr->rng, (uint64_t)n);
    record(dr, n, v);
    return v;
}

/* uniform_(lo, hi) of a float32 tensor given u: lo + (hi - lo) u, whose
 * product is exact in double, rounded once to float. */
static float uniform_between(float lo, float hi, float u)
{
    return (float)((double)lo + ((double)hi - (double)lo) * (double)u);
}

/* RandomResizedCrop.get_params for an input of rows x cols. */
static void random_resized_box(drawer *dr, const dp_transform *t, int rows, int cols, int box[4])
{
    double area = (double)rows * (double)cols;
    float log0 = (float)log((double)t->ratio[0]), log1 = (float)log((double)t->ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target_area = area * (double)uniform_between(t->scale[0], t->scale[1], uniform(dr));
        double aspect = (double)(float)exp((double)uniform_between(log0, log1, uniform(dr)));
        double w = rint(sqrt(target_area * aspect)), h = rint(sqrt(target_area / aspect));
        if (w > 0 && w <= cols && h > 0 && h <= rows) {
            box[0] = randint(dr, rows - (int)h + 1);
            box[1] = randint(dr, cols - (int)w + 1);
            box[2] = (int)h;
            box[3] = (int)w;
            return;
        }
    }
    /* The fallback: the whole image, cut to the nearest ratio in range. */
    double in_ratio = (double)cols / (double)rows;
    int w = cols, h = rows;
    if (in_ratio < (double)t->ratio[0])
        h = (int)rint((double)cols / (double)t->ratio[0]);
    else if (in_ratio > (double)t->ratio[1])
        w = (int)rint((double)rows * (double)t->ratio[1]);
    box[0] = (rows - h) / 2;
    box[1] = (cols - w) / 2;
    box[2] = h;
    box[3] = w;
}

/* CenterCrop's offset along one side: round-half-even((size - crop) / 2)
 * inside the image; a crop larger than the image pads it, (crop - size) //
 * 2 before and the rest after, so the offset is minus the first. */
static int center_offset(int size, int crop)
{
    if (crop > size)
        return -((crop - size) / 2);
    return (int)rint((double)(size - crop) / 2.0);
}

void dp__transform_draw_traced(const dp_transform_list *l, uint64_t seed, int64_t epoch,
                               int64_t index, int rows, int cols, dp_transform_draws *d,
                               dp__transform_trace *trace)
{
    DP_ASSERT(l && d && rows > 0 && cols > 0);
    memset(d, 0, sizeof *d);
    if (trace)
        trace->n = 0;
    drawer dr = {.trace = trace};
    dp__augment_stream(&dr.rng, seed, epoch, index);
    int size[2] = {rows, cols};
    for (int i = 0; i < l->n; i++) {
        const dp_transform *t = &l->t[i];
        int *box = d->box[i];
        dr.stage = i;
        box[0] = 0;
        box[1] = 0;
        box[2] = size[0];
        box[3] = size[1];
        switch (t->kind) {
        case DP_TRANSFORM_RANDOM_RESIZED_CROP:
            random_resized_box(&dr, t, size[0], size[1], box);
            break;
        case DP_TRANSFORM_CENTER_CROP:
            box[0] = center_offset(size[0], t->rows);
            box[1] = center_offset(size[1], t->cols);
            box[2] = t->rows;
            box[3] = t->cols;
            break;
        case DP_TRANSFORM_RANDOM_CROP: {
            int top, left;
            dp__augment_draw_crop(&dr.rng, t->padding, &top, &left);
            record(&dr, 2 * (int64_t)t->padding + 1, top);
            record(&dr, 2 * (int64_t)t->padding + 1, left);
            box[0] = top - t->padding;
            box[1] = left - t->padding;
            break;
        }
        case DP_TRANSFORM_FLIP:
            d->flip[i] = dp__augment_draw_flip(&dr.rng);
            /* The uniform itself is not kept: -1 for a flip, -2 for none. */
            record(&dr, d->flip[i] ? -1 : -2, d->flip[i]);
            break;
        default:
            break;
        }
        dp__transform_stage_size(t, size[0], size[1], size);
    }
}

void dp_transform_draw(const dp_transform_list *l, uint64_t seed, int64_t epoch, int64_t index,
                       int rows, int cols, dp_transform_draws *d)
{
    dp__transform_draw_traced(l, seed, epoch, index, rows, cols, d, NULL);
}
