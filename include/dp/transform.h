/* dp/transform.h - torchvision's image transforms on decoded images of any
 * size, and the decoding that feeds them (JPEG with DCT scaling and partial
 * decoding where the transforms allow).
 *
 * A transform list is what torchvision's transforms.Compose holds, in its
 * order: "random-resized-crop:224,flip" for the ImageNet training recipe,
 * "resize:256,center-crop:224" for its evaluation. It takes an image of any
 * size ([channels, rows, cols] bytes, dp_image) to floats in [0, 1]
 * ([channels, out rows, out cols], ToTensor's scaling); Normalize stays the
 * loader's (dp_augment_options' mean and std), applied after.
 *
 * A sample's random draws are a pure function of (seed, epoch, the sample's
 * index in the dataset), as dp_augment_draw_for's: any thread, device, rank
 * or resumed run that prepares the sample gets the same image. */
#ifndef DP_TRANSFORM_H
#define DP_TRANSFORM_H

#include "dp/data.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dp_transform_kind {
    /* Resize(size): one number scales the shorter side to it (the longer
     * side int(size * long / short), as torchvision); "resize:HxW" gives
     * both. Bilinear with antialias, as torchvision's tensor Resize(...,
     * antialias=True) and PIL's resize(BILINEAR). */
    DP_TRANSFORM_RESIZE,
    /* CenterCrop(size): "center-crop:S" or "center-crop:HxW"; an image
     * smaller than the crop is zero-padded first, as torchvision does. */
    DP_TRANSFORM_CENTER_CROP,
    /* RandomResizedCrop(size, scale=(0.08, 1.0), ratio=(3/4, 4/3)):
     * "random-resized-crop:S" (or :HxW), with torchvision's 10 tries and
     * its central-crop fallback, then the bilinear antialiased resize. */
    DP_TRANSFORM_RANDOM_RESIZED_CROP,
    /* RandomCrop(size=the input's, padding=P): "crop:P" (dp_augment's). */
    DP_TRANSFORM_RANDOM_CROP,
    /* RandomHorizontalFlip(p=0.5): "flip". */
    DP_TRANSFORM_FLIP,
    /* Grayscale(1) / convert("RGB"): "gray", "rgb". */
    DP_TRANSFORM_GRAY,
    DP_TRANSFORM_RGB,
} dp_transform_kind;

typedef struct dp_transform {
    dp_transform_kind kind;
    int rows, cols;      /* the size; cols 0 with RESIZE: the shorter side to rows */
    float scale[2];      /* RANDOM_RESIZED_CROP: area fraction range */
    float ratio[2];      /* RANDOM_RESIZED_CROP: aspect ratio range (w / h) */
    int padding;         /* RANDOM_CROP */
} dp_transform;

#define DP_TRANSFORM_MAX 16

typedef struct dp_transform_list {
    int n;
    dp_transform t[DP_TRANSFORM_MAX];
} dp_transform_list;

/* "none" or stages separated by commas (see dp_transform_kind), and the
 * shorthands "imagenet" (train: "random-resized-crop:224,flip") and
 * "imagenet-test" ("resize:256,center-crop:224"). DP_EINVAL with one line
 * naming the stage that is wrong (and *out unchanged) otherwise. */
int dp_transform_parse(const char *spec, dp_transform_list *out);
/* The list in dp_transform_parse's syntax ("none" when empty): parsed, it
 * gives the same list. */
const char *dp_transform_str(const dp_transform_list *l, char *buf, size_t size);
/* Whether every input size gives one output size (the list ends in a stage
 * that fixes it, with only size-keeping stages after); then *rows, *cols
 * are that size. */
bool dp_transform_fixed_size(const dp_transform_list *l, int *rows, int *cols);
/* The output [channels, rows, cols] for an input of `channels` x rows x
 * cols (channels after any gray/rgb stage). */
void dp_transform_output_shape(const dp_transform_list *l, int channels, int rows, int cols,
                               int out_chw[3]);

/* One sample's draws for an input of rows x cols: for each stage, the box
 * it cuts from its input (top, left, height, width, in that input's pixels;
 * the whole input for stages that do not cut) and whether it flips. */
typedef struct dp_transform_draws {
    int box[DP_TRANSFORM_MAX][4];
    bool flip[DP_TRANSFORM_MAX];
} dp_transform_draws;

/* Sample `index`'s draws in epoch `epoch` of a run seeded with `seed`, for
 * an image of rows x cols, from the counter-based RNG's stream that
 * dp_augment_draw_for uses for that sample. RandomResizedCrop draws as
 * torchvision's get_params: for each of 10 tries, area * uniform(scale),
 * exp(uniform(log ratio)), then randint for top and left; the fallback. */
void dp_transform_draw(const dp_transform_list *l, uint64_t seed, int64_t epoch, int64_t index,
                       int rows, int cols, dp_transform_draws *d);
/* Applies the list with draws d to img, writing floats in [0, 1] to out
 * (dp_transform_output_shape's size). 0, or DP_ENOMEM. */
int dp_transform_apply(const dp_transform_list *l, const dp_transform_draws *d,
                       const dp_image *img, float *out);

/* How JPEGs are decoded for a transform list: at full size ("off"), or
 * ("auto") at the smallest of libjpeg-turbo's DCT scales 1/1, 1/2, 1/4,
 * 1/8 that keeps the region the list needs at least as large as the size
 * it is resized to, and only the scanlines that region covers. */
typedef enum dp_jpeg_scale {
    DP_JPEG_SCALE_AUTO = 0,
    DP_JPEG_SCALE_OFF = 1,
} dp_jpeg_scale;

/* Decodes one image file's bytes buf[0..len) (PNG or JPEG, `name` naming it
 * in messages, `channels` as dp_image_decode) and applies the list with
 * sample `index`'s draws: out gets dp_transform_output_shape's floats, its
 * shape in out_chw. `cap` is how many floats out holds: a larger output is
 * DP_EINVAL naming the file and both sizes. Errors as dp_image_decode's. */
int dp_transform_decode(const dp_transform_list *l, dp_jpeg_scale scale, const void *buf,
                        size_t len, const char *name, int channels, uint64_t seed, int64_t epoch,
                        int64_t index, float *out, size_t cap, int out_chw[3]);

#ifdef __cplusplus
}
#endif
#endif /* DP_TRANSFORM_H */
