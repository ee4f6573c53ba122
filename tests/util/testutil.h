/* Helpers shared by the cmocka tests. */
#ifndef DP_TESTUTIL_H
#define DP_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>

/* The number of elements of array a. */
#define COUNTOF(a) (sizeof(a) / sizeof((a)[0]))

/* A fresh directory under the test's working directory; the caller frees
 * the returned string. */
char *tu_tempdir(const char *name);
/* A temp directory per test: tu_setup_tmp and tu_teardown_tmp are cmocka
 * setup and teardown functions that make tu_tmp and remove it with all it
 * holds; tu_tmp_path(name) is "<tu_tmp>/<name>" in a static buffer (one of
 * two, so two can be live at once). */
extern char *tu_tmp;
int tu_setup_tmp(void **state);
int tu_teardown_tmp(void **state);
const char *tu_tmp_path(const char *name);
/* Writes `n` bytes to `path`; returns 0 or -1. */
int tu_write_file(const char *path, const void *data, size_t n);
/* Whether Debian's Fashion-MNIST files are present (tests that need them
 * say so and skip otherwise). */
bool tu_have_fashion_mnist(void);
/* The built dptrain ($DP_BUILD_DIR/dptrain, which ctest sets): its path in
 * tu_dptrain, or -1 after saying that it is missing (a cmocka group setup
 * may return this). */
extern char tu_dptrain[512];
int tu_find_dptrain(void);
/* An IDX file of unsigned bytes: the header for dims[0..ndims) and the
 * dims' product of bytes from `data`; *out_len gets its length. The caller
 * frees it. */
uint8_t *tu_make_idx(int ndims, const uint32_t *dims, const uint8_t *data, size_t *out_len);
/* A small valid MNIST-style set in the directory `dir` (made if missing):
 * DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte, 8 training and 4 test
 * images of 28 x 28, all black, labelled 0 to 7. */
void tu_write_idx_set(const char *dir);
/* x (n * pixels floats in [0, 1)) and y (n labels below 10) drawn
 * deterministically from `seed`: a training batch of made-up data. */
void tu_make_batch(uint64_t seed, int64_t n, int64_t pixels, float *x, int32_t *y);
/* Fails the test unless the library's last error contains `what`. */
void tu_assert_error_mentions(const char *what);
/* Silences the library's log (errors are still kept for dp_last_error). */
void tu_quiet_log(void);
struct dp_data_parallel;
struct dp__tape;
struct dp_device;
/* One training step of the seeds' LeNet through DataParallel: `batch`
 * images (28x28, float) and int32 labels uploaded to `dev` (DataParallel's
 * first device), forward on `tape`, summed cross-entropy, backward, and SGD
 * with grad_scale 1 / batch. */
/* devs[0..n) = cpu:0 .. cpu:n-1, one kernel thread each. */
void tu_open_cpu_devices(struct dp_device **devs, int n);
void tu_data_parallel_step(struct dp_data_parallel *dp, struct dp__tape *tape,
                           struct dp_device *dev, const float *images, const int32_t *labels,
                           int64_t batch);
struct dp_model;
/* DataParallel's parameters after training on n devices (model: replica
 * 0): fails unless every replica holds the same bits, then returns a
 * malloc'd copy of them; *numel gets their count. */
float *tu_replica_params(struct dp_data_parallel *dp, struct dp_model *model, int n,
                         int64_t *numel);
/* The initial parameters (numel floats, malloc'd) of LeNet drawn from
 * `seed`: a test compares trained weights with them to show that they
 * moved, or an equality between two runs would prove nothing. */
float *tu_lenet_initial_params(uint64_t seed, int64_t numel);
/* Two checkpoints (safetensors files) with the same tensors: fails unless
 * every tensor is byte-identical, then prints "N tensors identical". */
void tu_assert_same_tensors(const char *a, const char *b);
/* max |a - b| / max |b| over the float tensors of two checkpoints, taken
 * per tensor (max |a - b| where b's tensor is all zeros); the largest.
 * Fails the test on a value that is not finite in either. */
double tu_max_rel_diff(const char *a, const char *b);
/* ||a - b|| / ||b|| over the model's float tensors of two checkpoints (the
 * "_state." ones aside), the weights taken as one vector. */
double tu_l2_rel_diff(const char *a, const char *b);
/* Fails unless the --metrics file `path` holds the epoch lines of epochs
 * first..last, in order, and no other: a resumed run writes only the
 * epochs it trained, so a --resume that retrained from the start (and
 * ended with the same weights) fails here. --log-steps lines are passed
 * over. */
void tu_assert_metrics_epochs(const char *path, int first, int last);

/* "Intel(R) Xeon(R) Processor (avx2 avx512f avx512_bf16 amx_bf16)": the
 * CPU's model name and which of those instruction sets it has (and
 * DNNL_MAX_CPU_ISA when set), for skips that a CPU decides. */
const char *tu_cpu_name(void);

/* Skips are skips, not passes. tu_skip("why %s", ...) prints
 * "SKIP <test>: <why>" on stdout and skips the calling cmocka test. tu_run
 * runs the group as main's return value: with no argument every test, with
 * "NAME" that test alone, with "-NAME,NAME2" all but those (tests/CMakeLists.txt
 * gives a test that cannot run everywhere a CTest entry of its own this
 * way). When no test failed and one or more were skipped it returns
 * TU_SKIP_EXIT, which CTest (SKIP_RETURN_CODE) reports as skipped: a CTest
 * pass means every test of the entry ran and passed. */
#define TU_SKIP_EXIT 77
#define tu_skip(...)                                                                               \
    do {                                                                                           \
        tu__note_skip(__func__, __VA_ARGS__);                                                      \
        skip();                                                                                    \
    } while (0)
#define tu_run(argc, argv, tests, setup, teardown)                                                 \
    tu__run(argc, argv, #tests, tests, sizeof(tests) / sizeof((tests)[0]), setup, teardown)
void tu__note_skip(const char *test, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int tu__run(int argc, char **argv, const char *group, const struct CMUnitTest *tests, size_t n,
            CMFixtureFunction setup, CMFixtureFunction teardown);

/* Differences and closeness that fail on NaN and Inf (tu_assert_close,
 * tu_max_diff, ...). */
#include "compare.h"

#endif
