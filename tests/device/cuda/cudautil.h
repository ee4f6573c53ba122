/* Helpers of the tests that compare the CUDA device with the CPU device
 * (test_cuda_ops.c, test_cuda_graph_ops.c, test_cuda_devices.c): the
 * tolerances, the skip without a GPU, deterministic inputs and their
 * comparison, and an op family's case run on both devices. */
#ifndef DP_TESTS_CUDAUTIL_H
#define DP_TESTS_CUDAUTIL_H

#include "testutil.h"

#include "dp/tensor.h"

#include <stdbool.h>
#include <stdint.h>

/* Tolerances, relative to the largest magnitude of the CPU result (max
 * norm): float32 kernels that sum in another order agree to about 1e-6 of
 * that; backward passes chain several sums, hence more room. These hold in
 * full float32 only: every test that compares at them turns TF32 off first
 * (dp_set_tf32(false)), since TF32 rounding alone is near 1e-3. */
#define TOL_FORWARD 1e-5
#define TOL_GRAD 1e-4
#define TOL_TRAINING 1e-3

/* The classes of the op cases' labels and of LeNet's output. */
enum { CLASSES = 10 };

/* Why this process cannot run CUDA tests ("CPU-only build", or no GPU
 * visible to the CUDA runtime), or NULL when it can. */
const char *no_gpu_reason(void);

#define REQUIRE_GPU()                                                                              \
    do {                                                                                           \
        const char *tu_why = no_gpu_reason();                                                      \
        if (tu_why) {                                                                              \
            tu_skip("no CUDA GPU here (%s)", tu_why);                                              \
        }                                                                                          \
    } while (0)

/* Deterministic values in [-1, 1). */
void fill_random(float *v, int64_t n, uint64_t seed);
/* max |a - b| / max |b|, the relative error in the max norm. */
double rel_error(const float *a, const float *b, int64_t n);

/* ---- one op family on two devices ----------------------------------------- */

enum { MAX_LEAVES = 6 };

/* The inputs of a case: leaves[0] is x, the rest its parameters. */
typedef struct leaf_spec {
    int ndim;
    int64_t shape[4];
    bool positive; /* batch norm's running variance */
} leaf_spec;

typedef struct op_case {
    const char *name;
    int nleaves;
    leaf_spec leaves[MAX_LEAVES];
    /* y = the op on the leaves (any 4-D or 2-D output with N rows). */
    int (*op)(dp_tensor_t **y, dp_tensor_t **leaves);
} op_case;

/* Runs case c on cpu:0 and cuda:0 (each followed by a fixed head: flatten,
 * linear to CLASSES, summed cross-entropy, backward) and fails unless the
 * outputs agree within tol_forward and the loss and every leaf's gradient
 * within tol_grad (rel_error). */
void compare_case(const op_case *c, double tol_forward, double tol_grad);

#endif
