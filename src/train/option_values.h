/* The option list's own kinds of value (dp/train_option_list.h):
 * dp__option_parse_<kind> reads text into the field (0, or DP_EINVAL with
 * what it expected in why[0..size)); for a TEXT check it only checks the
 * text, which the caller then stores. dp__option_format_<kind> writes a
 * VALUE back as its parse reads it. src/train/option_values.c. */
#ifndef DP_TRAIN_OPTION_VALUES_H
#define DP_TRAIN_OPTION_VALUES_H

#include "dp/train.h"

/* dp_weight_init's names, for --init-xavier's place in the list. */
extern const dp_name_table dp__weight_init_names;
/* --jpeg-scale's names (dp_jpeg_scale of dp/transform.h, held as an int). */
extern const dp_name_table dp__jpeg_scale_names;
/* --transform's recipes: 0 none, 1 imagenet. */
extern const dp_name_table dp__transform_recipe_names;
enum { DP__TRANSFORM_NONE = 0, DP__TRANSFORM_IMAGENET = 1 };
/* --bad-images' names (dp_bad_images). */
extern const dp_name_table dp__bad_images_names;

#define DP__OPTION_TEXT(kind)                                                                      \
    int dp__option_parse_##kind(const char *text, void *field, char *why, size_t size);
#define DP__OPTION_VALUE(kind)                                                                     \
    DP__OPTION_TEXT(kind)                                                                          \
    const char *dp__option_format_##kind(const void *field, char *buf, size_t size);

DP__OPTION_TEXT(model)
DP__OPTION_TEXT(dataset)
DP__OPTION_TEXT(plot)
DP__OPTION_TEXT(directory)
DP__OPTION_VALUE(transform)
DP__OPTION_VALUE(channels)
DP__OPTION_VALUE(betas)
DP__OPTION_VALUE(milestones)
DP__OPTION_VALUE(augment)
DP__OPTION_VALUE(normalize)
DP__OPTION_VALUE(memory_size)

#endif
