/* The finite-difference gradient checker shared by the op tests, the
 * host-data helpers it needs, and what else several op tests share (input
 * arrays, the naive convolution, a forward run in either layout). A check
 * turns an op's output y into a scalar with a fixed random projection,
 * L = sum_i r_i y_i: analytically (reshape y to (1, n), linear with r,
 * backward) and numerically (y read back in logical order and summed in
 * double, for x[i] +- eps). Every check also verifies that the analytic
 * values scaled by 1.1 would fail, so none passes vacuously. */
#ifndef DP_TESTS_GRADCHECK_H
#define DP_TESTS_GRADCHECK_H

#include "testutil.h"

#include "device/conv_choice.h"

#include "dp/autograd.h"
#include "dp/core.h"
#include "dp/dp.h"
#include "dp/ops.h"
#include "dp/tensor.h"

#define OK(expr)                                                                                   \
    do {                                                                                           \
        int ok_rc_ = (expr);                                                                       \
        if (ok_rc_ != 0)                                                                           \
            fail_msg("%s: %s (%s)", #expr, dp_strerror(ok_rc_), dp_last_error());                  \
    } while (0)

/* The device the checks run on: each test opens its own (gc_open_device and
 * gc_close_device as cmocka setup and teardown), so that a sticky device
 * error stays in the test that caused it. */
extern dp_device_t *gc_dev;
int gc_open_device(void **state);
/* Its kernel threads: 1, or $DP_GRADCHECK_THREADS. */
int gc_threads(void);
int gc_close_device(void **state);
/* Both and a temp directory (testutil.h's tu_tmp), as a group's setup and
 * teardown. */
int gc_open_device_and_tmp(void **state);
int gc_close_device_and_tmp(void **state);

int64_t count(int ndim, const int64_t *shape);
float *normal_array(dp_rng *rng, int64_t n, float scale);
dp_tensor_t *upload(int ndim, const int64_t *shape, const float *v);
float *download(const dp_tensor_t *t);
/* Trains m on (x, labels y) for `steps` steps of the optimizer `o` (cross
 * entropy, one tape), prints "what: loss A -> B in N steps" and fails
 * unless the last loss is finite and below fall times the first: a model
 * file whose layers really learn. */
void gc_train_falls(dp_model_t *m, dp_tensor_t *x, dp_tensor_t *y, const dp_optimizer_options *o,
                    int steps, float fall, const char *what);

/* Fails unless |got[i] - want[i]| <= atol + rtol max(|got[i]|, |want[i]|)
 * for every i, naming `what` and the first bad element. */
void assert_values(const char *what, const float *got, const double *want, int64_t n, double rtol,
                   double atol);
/* A malloc'd copy of v[0..n) in double. */
double *to_double(const float *v, int64_t n);
/* The C x C identity as a 1x1 convolution's weight (C, C, 1, 1), calloc'd:
 * a convolution with it stores its input's values in the NHWC layout. */
float *identity_1x1(int64_t C);

/* A random permutation of (i - n/2) * step: values at least `step` apart, so
 * that an argmax does not move under a perturbation below step / 2
 * (malloc'd). */
float *distinct_array(dp_rng *rng, int64_t n, float step);
/* labels[0..n) as an int32 tensor (n) on gc_dev. */
dp_tensor_t *upload_labels(int64_t n, const int32_t *labels);

/* A convolution's sizes: x (N, C, H, W), w (K, C, R, S), strides sh, sw,
 * padding ph, pw, and the output's P x Q that make_geom computes. */
typedef struct conv_geom {
    int64_t N, C, H, W, K, R, S;
    int sh, sw, ph, pw;
    int64_t P, Q;
} conv_geom;
conv_geom make_geom(int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, int64_t R, int64_t S,
                    int sh, int sw, int ph, int pw);
/* The naive convolution in double, logical NCHW: y (N, K, P, Q) of x and w
 * (OIHW), plus b (K) when not NULL, then ReLU when `relu` (malloc'd). */
double *conv_ref(const conv_geom *g, const float *x, const float *w, const float *b, bool relu);
/* x itself (NCHW) or, for nhwc, the same values stored NHWC: x through the
 * 1x1 convolution with `identity` (C, C, 1, 1). */
dp_tensor_t *in_layout(dp_tensor_t *x, dp_tensor_t *identity, bool nhwc);

#define GC_MAX_IN 6

typedef int (*build_fn)(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx);

typedef struct gc_input {
    const char *name;
    int ndim;
    int64_t shape[4];
    float *v; /* the base values; freed by gc_run */
    bool diff;
} gc_input;

typedef struct gc_problem {
    const char *name;
    build_fn build;
    const void *ctx;
    int nin;
    gc_input in[GC_MAX_IN];
    double eps;  /* 0: 2e-2 */
    double rtol; /* 0: 1e-2 */
    double atol; /* 0: 1e-3 */
    /* The output is piecewise linear (ReLU): when a perturbation changes
     * which outputs are positive, retry with eps / 4 and eps / 16, then skip
     * the point (a check with over 10% skipped fails as vacuous). */
    bool kink;
    int checks; /* elements checked per input; 0: 100 (all when fewer) */
    uint64_t seed;
} gc_problem;

/* Runs the check and frees the problem's arrays. */
void gc_run(gc_problem *p);
/* The analytic gradient of L = sum_i r_i y_i (r of the output's n values)
 * with respect to each differentiable input of p; grads[i] is malloc'd
 * (NULL for the others). */
void gc_analytic(const gc_problem *p, const double *r, int64_t n, float **grads);
gc_input input(const char *name, int ndim, const int64_t *shape, float *v, bool diff);

/* Runs `build` on x uploaded with shape xs, without a tape recording, and
 * returns y in logical order (y's element count in *n_out). With nhwc, x
 * first goes through an identity 1x1 convolution, whose output is stored
 * NHWC and holds exactly x. */
float *run_forward(build_fn build, const void *ctx, int ndim, const int64_t *xs, const float *xv,
                   bool nhwc, int64_t *n_out);

/* The choice table's key of a convolution of x (xs) by w (ws). */
dp__conv_shape gc_conv_shape(const int64_t *xs, const int64_t *ws, const dp_conv2d_params *p,
                             dp_precision precision);
/* Replaces the choice table by one that runs `impl` for every pass of s,
 * and direct for the 1x1 identity convolution (C to C channels) that puts
 * a test's input in NHWC in front of it; under DP_CONV_ALGO_AUTO that is
 * what runs. */
void gc_force_conv_impl(const dp__conv_shape *s, dp__conv_impl impl);
/* Whether every pass of s ran `impl` on gc_dev, and nothing else, while
 * dp__conv_trace was on. */
bool gc_conv_ran(const dp__conv_shape *s, dp__conv_impl impl);

#endif
