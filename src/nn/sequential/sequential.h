/* Models written as the body of PyTorch's nn.Sequential, one module a line
 * (sequential_parse.c reads the text, sequential_modules.c checks shapes
 * and names the parameters as nn.Sequential's state_dict does,
 * sequential.c makes the definition and runs the forward). */
#ifndef DP_NN_SEQUENTIAL_H
#define DP_NN_SEQUENTIAL_H

#include "dp/nn.h"

/* Loads a file (its path becomes the definition's name). */
int dp_sequential_load(dp_model_def **out, const char *path, const int64_t *in_chw);

#endif
