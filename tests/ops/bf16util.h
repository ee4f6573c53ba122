/* The checks of tests/ops/test_bf16.c (see its top for the bounds): an op is
 * run in float32, in the reference bf16 path and natively, on the same
 * inputs, and its outputs and the gradients of a random projection
 * L = sum_j r_j y_j compared. */
#ifndef DP_TESTS_BF16UTIL_H
#define DP_TESTS_BF16UTIL_H

#include "gradcheck.h"

/* Builds the op's output from the inputs, running its ops in precision p
 * (dp_set_precision; the checker puts FP32 back after). */
typedef int (*bf_build_fn)(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx,
                           dp_precision p);

typedef struct bf_problem {
    const char *name;
    bf_build_fn build;
    const void *ctx;
    int nin;
    gc_input in[GC_MAX_IN];
    /* For bf_check_products: the number of products in each output's sum,
     * and in each input's gradient's sum; whether that gradient is stored
     * in bf16 on the way (one more rounding); whether the output is f32. */
    int64_t out_length;
    int64_t length[GC_MAX_IN];
    bool bf16_grad[GC_MAX_IN];
    bool out_f32;
    /* For bf_check_storage, elementwise ops whose backward reads their
     * bf16-rounded output (sigmoid: dy y (1 - y), tanh: dy (1 - y^2)): the
     * rounding of y moves each dx by up to out_grad_slope u |dy| more. */
    double out_grad_slope;
} bf_problem;

/* Adds an input (v malloc'd, taken over). For bf_check_storage, 4-D
 * differentiable inputs are activations: the bf16 path rounds them. */
void bf_add_input(bf_problem *b, const char *name, int ndim, const int64_t *shape, float *v,
                  bool diff);
/* The reference path against the exact f32 op: output and gradients within
 * the product bound, and `fd` elements of each differentiable input against
 * finite differences of the f32 op. */
void bf_check_products(const bf_problem *b, int fd);
/* The native kernels against the reference path: the same products in
 * another order. */
void bf_check_native(const bf_problem *b);
/* An op that stores bf16 and computes in f32: its result against the f32
 * op on the rounded inputs. */
void bf_check_storage(const bf_problem *b);
void bf_free(bf_problem *b);

#endif
