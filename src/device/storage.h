/* How a tensor is stored, for the layers that otherwise see tensors only
 * through dp/tensor.h (src/comm/, src/parallel/'s scatter, gather and
 * pipeline): they never read struct dp_tensor (tensor.c). */
#ifndef DP_DEVICE_STORAGE_H
#define DP_DEVICE_STORAGE_H

#include "dp/tensor.h"

#include <stdbool.h>
#include <stddef.h>

/* Bytes of the whole tensor, and of one index of its first dimension (a
 * row of a batch); whether it is stored channels-last (dp_scatter and
 * dp_gather split and join the logical layout only). The owned bytes are
 * 0 for a view of another tensor's memory (what a tape holds for it). */
size_t dp__tensor_bytes(const dp_tensor_t *t);
size_t dp__tensor_owned_bytes(const dp_tensor_t *t);
size_t dp__tensor_row_bytes(const dp_tensor_t *t);
bool dp__tensor_nhwc(const dp_tensor_t *t);

#endif
