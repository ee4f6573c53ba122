/* Helpers of the tests of models written as nn.Sequential bodies
 * (test_sequential.c, test_sequential_dropout.c): the group fixture (cpu:0,
 * and the library's errors captured whole) and d2l's LeNet as text. */
#ifndef DP_TESTS_SEQUENTIALUTIL_H
#define DP_TESTS_SEQUENTIALUTIL_H

#include "testutil.h"

#include "dp/core.h"
#include "dp/tensor.h"

/* The last error the library logged, whole. */
extern char last_log[512];
void capture_log(dp_log_level level, const char *msg, void *user);

/* cpu:0, opened by group_setup (which also makes capture_log the library's
 * log) and closed by group_teardown. */
extern dp_device_t *cpu;
int group_setup(void **state);
int group_teardown(void **state);

/* d2l's LeNet up to its Flatten, after the first Conv2d `conv1`. */
#define LENET_FEATURES(conv1)                                                                      \
    conv1 "Sigmoid()\n"                                                                            \
          "AvgPool2d(kernel_size=2, stride=2)\n"                                                   \
          "Conv2d(6, 16, kernel_size=5)\n"                                                         \
          "Sigmoid()\n"                                                                            \
          "AvgPool2d(kernel_size=2, stride=2)\n"                                                   \
          "Flatten()\n"

#endif
