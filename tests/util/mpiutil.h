/* Helpers of the tests that run the built dptrain under Open MPI's mpirun
 * (test_mpi, test_mpi_claims): starting and timing processes, their logs,
 * the common small training run, and the ranks among mpirun's children. */
#ifndef DP_MPIUTIL_H
#define DP_MPIUTIL_H

#include "testutil.h"

#include "dp/dist.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The mpirun found on PATH by mu_skip_without_mpi(). */
extern char mu_mpirun[512];

/* The group setup: finds dptrain (tu_dptrain) and lets mpirun run as root,
 * oversubscribe the cores and do without cross-memory attach (CI
 * containers). */
int mu_setup(void **state);

/* Whether `name` is an executable in a directory of PATH (or /usr/bin); its
 * path in `out`. */
bool mu_find_in_path(const char *name, char *out, size_t size);

/* Skips the calling test, saying why, in a build without MPI, without
 * mpirun or without Fashion-MNIST. A macro, so that the SKIP line names the
 * test. */
#define mu_skip_without_mpi()                                                                      \
    do {                                                                                           \
        if (!dp_dist_built())                                                                      \
            tu_skip("this build has no MPI (install libopenmpi-dev and rebuild)");                 \
        if (!mu_find_in_path("mpirun", mu_mpirun, sizeof mu_mpirun))                               \
            tu_skip("no mpirun on PATH (apt-get install openmpi-bin)");                            \
        if (!tu_have_fashion_mnist())                                                              \
            tu_skip("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)");     \
    } while (0)

/* How far a run of many ranks or devices may be from one process on one
 * device (max |difference| / max |param| of the checkpoints, and the
 * relative difference of the mean loss): the README says ~3e-6 after 20
 * steps of the common run, as summation order allows. */
#define MU_VS_ONE_PROCESS 1e-5

/* Starts argv (NULL-terminated) in a process group of its own, stdout and
 * stderr into `log`; under mpirun without leak checks (see mpiutil.c). */
pid_t mu_start(const char *const *argv, const char *log);
/* Waits up to `seconds` for pid: its exit status (128 + signal if killed
 * by one), or -1 if it is still running then (its group is killed). */
int mu_wait_for(pid_t pid, double seconds);
/* The whole file, NUL-terminated ("" if it cannot be read); the caller
 * frees it. */
char *mu_slurp(const char *path);
/* How many times `needle` occurs in `s`. */
int mu_count(const char *s, const char *needle);
/* The number after "KEY": in the file's first line that has it; NaN if
 * none does. */
double mu_json_number(const char *path, const char *key);
/* The number after "KEY": at its (n+1)-th occurrence in the file (n from
 * 0): in a --metrics file, epoch n + 1's; NaN if there are fewer. */
double mu_json_nth(const char *path, const char *key, int n);
/* A shell command (printf-style); its exit status, -1 if it did not exit. */
int mu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Seconds on a monotonic clock. */
double mu_now(void);

/* The common small run: LeNet, 20 steps of a global batch of 64 (the last
 * one a single sample: fewer than ranks x devices), momentum, shuffled;
 * the direct kernels (runs of separate processes are compared, and a
 * measured choice may differ between them). */
#define MU_COMMON                                                                                  \
    "train", "--epochs", "1", "--limit-train", "1217", "--limit-test", "500", "--batch-size",      \
        "64", "--lr", "0.1", "--momentum", "0.9", "--threads", "1", "--seed", "3", "--progress",   \
        "never", "--conv-algo", "direct"

/* dptrain MU_COMMON --devices DEVICES --checkpoint CK [--metrics METRICS]
 * EXTRA... (EXTRA NULL-terminated, may be NULL, later flags win) under
 * `mpirun -np RANKS`, or alone if RANKS is 0; its exit status. Its output
 * goes to `log`, and is printed if it failed. */
int mu_run(int ranks, const char *devices, const char *ck, const char *metrics,
           const char *const *extra, const char *log);

/* How far the checkpoint `ck`'s weights have moved from the initial ones
 * that dptrain draws for `model` with `seed` (the same dp_model_init_builtin a
 * one-process run uses): max |ck - init| / max |ck| over all its
 * parameters (not per tensor: the biases start at 0). A run that did not
 * train gives 0. Fails the test on a weight that is not finite. */
double mu_moved_from_init(const char *ck, const char *model, uint64_t seed);

/* max |a - b| / max |b| over all the parameters of two checkpoints
 * together (the float tensors: weights and running statistics), not per
 * tensor as tu_max_rel_diff: a bias that started at 0 and is still small
 * weighs as much as the largest weight; and likewise over the optimizer's
 * state ("_state.": momentum, Adam's moments) together; the larger of the
 * two. max |a - b| where b is all zeros; fails the test on a value that is
 * not finite in either. */
double mu_max_param_diff(const char *a, const char *b);
/* The same without batch norm's running statistics (the weights and the
 * optimizer's state). */
double mu_max_weight_diff(const char *a, const char *b);

/* Fails unless the tensors of two checkpoints that are not float32 (batch
 * norm's I64 num_batches_tracked, which the float differences above pass
 * over) hold the same bytes; returns how many there are. */
int mu_assert_same_non_float(const char *a, const char *b);

/* The pid of MPI rank `rank` among the children of `parent` (mpirun), or
 * -1. */
pid_t mu_find_rank(pid_t parent, int rank);
/* Whether pid has ended (gone, or a zombie) within `seconds`. */
bool mu_gone(pid_t pid, double seconds);

#endif
