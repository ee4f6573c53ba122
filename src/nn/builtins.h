/* The built-in models' definitions for inputs (C, H, W) (lenet.c,
 * resnet.c, tutorial.c): filled into *def, with storage that lives as long
 * as the process (the loader, src/models/, makes each once per shape and
 * keeps it). */
#ifndef DP_NN_BUILTINS_H
#define DP_NN_BUILTINS_H

#include "dp/nn.h"

int dp__lenet_def(dp_model_def *def, const int64_t *in_chw);
int dp__resnet18_def(dp_model_def *def, const int64_t *in_chw);
int dp__tutorial_def(dp_model_def *def, const int64_t *in_chw);

#endif
