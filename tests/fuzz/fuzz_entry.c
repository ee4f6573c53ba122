/* The entry points of the safetensors and checkpoint targets, and what
 * every entry shares (fuzz_entry.h says what each input means).
 *
 * The readers take paths, so an input is written to a memfd first and read
 * back through /proc/self/fd/N: a regular file that never touches a disk and
 * needs no cleaning up after a crash. Errors the library logs while a reader
 * runs are captured (nothing is printed) so that a failure can be checked to
 * have said, in one line that begins with the file's name, what is wrong. */
#include "fuzz_entry.h"

#include "dp/dp.h"
#include "train/checkpoint_header.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- shared: the input file, captured errors, failed checks --------------- */

static int fz_input_fd = -1;
static char fz_input_path[64];
/* A directory for files the library writes itself (dp_safetensors_write
 * renames a temporary file beside its target, which a memfd cannot do). */
static char fz_scratch_dir[256];

/* Errors logged by the thread that runs an entry, while it runs a reader;
 * device worker threads have their own (false) flag. */
static _Thread_local bool fz_capturing;
_Thread_local int fz_errors;
_Thread_local char fz_last_error[FZ_ERROR_MAX];

static void fz_log(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level != DP_LOG_ERROR || !fz_capturing)
        return;
    fz_errors++;
    snprintf(fz_last_error, sizeof fz_last_error, "%s", msg);
}

void fz_capture_begin(void)
{
    dp_log_set(fz_log, NULL);
    fz_capturing = true;
    fz_errors = 0;
    fz_last_error[0] = '\0';
}

void fz_capture_end(void)
{
    fz_capturing = false;
}

/* A broken promise of a reader: said on stderr, returned as -1. */
int fz_bad(const char *target, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz %s: ", target);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return -1;
}

/* A call that returned rc < 0 must have logged an error beginning with
 * "<path>: ". */
int fz_check_failure(const char *target, const char *call, int rc, const char *path)
{
    size_t n = strlen(path);
    if (fz_errors == 0)
        return fz_bad(target, "%s returned %d (%s) and logged no error", call, rc, dp_strerror(rc));
    if (strncmp(fz_last_error, path, n) != 0 || strncmp(fz_last_error + n, ": ", 2) != 0)
        return fz_bad(target, "%s: the error does not begin with the file's name: %s", call,
                      fz_last_error);
    return 0;
}

/* The input's bytes in the memfd; its path, or NULL (said on stderr). */
const char *fz_input_file(const char *target, const uint8_t *data, size_t size)
{
    if (fz_input_fd < 0) {
        fz_input_fd = memfd_create("dptrain-fuzz-input", MFD_CLOEXEC);
        if (fz_input_fd < 0) {
            fz_bad(target, "memfd_create: %s", strerror(errno));
            return NULL;
        }
        snprintf(fz_input_path, sizeof fz_input_path, "/proc/self/fd/%d", fz_input_fd);
    }
    if (ftruncate(fz_input_fd, 0) < 0) {
        fz_bad(target, "ftruncate: %s", strerror(errno));
        return NULL;
    }
    for (size_t done = 0; done < size;) {
        ssize_t w = pwrite(fz_input_fd, data + done, size - done, (off_t)done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fz_bad(target, "writing the input: %s", strerror(errno));
            return NULL;
        }
        done += (size_t)w;
    }
    return fz_input_path;
}

static void fz_scratch_remove(void)
{
    if (fz_scratch_dir[0])
        rmdir(fz_scratch_dir);
    fz_scratch_dir[0] = '\0';
}

/* The scratch directory, made on first use; removed at exit (libFuzzer ends
 * with exit(), never through fuzz_teardown). */
const char *fz_scratch(const char *target)
{
    if (fz_scratch_dir[0])
        return fz_scratch_dir;
    const char *bases[] = {"/dev/shm", getenv("TMPDIR"), "/tmp"};
    for (size_t i = 0; i < sizeof bases / sizeof *bases; i++) {
        if (!bases[i])
            continue;
        snprintf(fz_scratch_dir, sizeof fz_scratch_dir, "%s/dptrain-fuzz-XXXXXX", bases[i]);
        if (mkdtemp(fz_scratch_dir)) {
            static bool registered;
            if (!registered)
                registered = atexit(fz_scratch_remove) == 0;
            return fz_scratch_dir;
        }
    }
    fz_scratch_dir[0] = '\0';
    fz_bad(target, "cannot make a scratch directory: %s", strerror(errno));
    return NULL;
}

/* ---- safetensors ----------------------------------------------------------- */

/* The bytes of shape x dtype, or false on overflow. */
static bool fz_st_bytes(const dp_st_tensor *t, uint64_t *out)
{
    uint64_t n = dp_st_dtype_size(t->dtype);
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0)
            return false;
        uint64_t s = (uint64_t)t->shape[d];
        if (s && n > UINT64_MAX / s)
            return false;
        n *= s;
    }
    *out = n;
    return true;
}

/* Everything an opened file hands out is consistent and readable; its
 * tensors go to ts[0..n). */
static int fz_st_check(const char *target, const dp_safetensors_t *f, int n, dp_st_tensor *ts)
{
    for (int i = 0; i < n; i++) {
        dp_st_tensor *t = &ts[i], u;
        if (dp_safetensors_get(f, i, t) != 0)
            return fz_bad(target, "dp_safetensors_get(%d) failed", i);
        uint64_t bytes;
        if (!t->name || !t->name[0] || t->ndim < 0 || t->ndim > DP_ST_MAX_DIMS ||
            dp_st_dtype_size(t->dtype) == 0 || !fz_st_bytes(t, &bytes) || bytes != t->bytes ||
            (t->bytes && !t->data))
            return fz_bad(target, "tensor %d is inconsistent", i);
        if (dp_safetensors_find(f, t->name, &u) != 0 || u.data != t->data || u.bytes != t->bytes)
            return fz_bad(target, "tensor %d ('%s') is not found by its name", i, t->name);
        volatile unsigned sum = 0;
        for (size_t b = 0; b < t->bytes; b++)
            sum += ((const uint8_t *)t->data)[b];
        (void)sum;
    }
    dp_st_tensor none;
    if (dp_safetensors_find(f, "__metadata__", &none) != DP_ENOENT ||
        dp_safetensors_find(f, "", &none) != DP_ENOENT)
        return fz_bad(target, "found a tensor that cannot be there");
    static const char *const keys[] = {"format", "dptrain.model", "dptrain.history", ""};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        const char *v = dp_safetensors_meta(f, keys[k]);
        if (v)
            (void)strlen(v);
    }
    return 0;
}

/* ts (n tensors, from an opened file) written with dp_safetensors_write and
 * read back must be the same tensors. Names longer than the writer takes are
 * skipped: the reader is more lenient there on purpose. */
static int fz_st_round_trip(const char *target, const dp_st_tensor *ts, int n)
{
    for (int i = 0; i < n; i++)
        if (strlen(ts[i].name) > DP_ST_MAX_NAME)
            return 0;
    const char *dir = fz_scratch(target);
    if (!dir)
        return -1;
    char path[300];
    snprintf(path, sizeof path, "%s/round-trip.safetensors", dir);
    fz_capture_begin();
    int rc = dp_safetensors_write(path, ts, n, NULL, 0);
    dp_safetensors_t *g = NULL;
    if (rc == 0)
        rc = dp_safetensors_open(&g, path);
    fz_capture_end();
    unlink(path);
    if (rc < 0)
        return fz_bad(target, "an opened file does not write back: %s", fz_last_error);
    int result = 0;
    if (dp_safetensors_count(g) != n)
        result = fz_bad(target, "wrote %d tensors, read back %d", n, dp_safetensors_count(g));
    for (int i = 0; result == 0 && i < n; i++) {
        dp_st_tensor u;
        const dp_st_tensor *t = &ts[i];
        if (dp_safetensors_get(g, i, &u) != 0 || strcmp(u.name, t->name) != 0 ||
            u.dtype != t->dtype || u.ndim != t->ndim ||
            memcmp(u.shape, t->shape, (size_t)t->ndim * sizeof *t->shape) != 0 ||
            u.bytes != t->bytes || (t->bytes && memcmp(u.data, t->data, t->bytes) != 0))
            result = fz_bad(target, "tensor %d ('%s') reads back different", i, t->name);
    }
    dp_safetensors_close(g);
    return result;
}

int fuzz_safetensors_input(const uint8_t *data, size_t size)
{
    const char *path = fz_input_file("safetensors", data, size);
    if (!path)
        return -1;
    dp_safetensors_t *f;
    fz_capture_begin();
    int rc = dp_safetensors_open(&f, path);
    fz_capture_end();
    if (rc < 0)
        return fz_check_failure("safetensors", "dp_safetensors_open", rc, path);
    int n = dp_safetensors_count(f);
    dp_st_tensor *ts = calloc(n > 0 ? (size_t)n : 1, sizeof *ts);
    int result = ts ? fz_st_check("safetensors", f, n, ts) : -1;
    if (result == 0)
        result = fz_st_round_trip("safetensors", ts, n);
    free(ts);
    dp_safetensors_close(f);
    return result;
}

/* ---- checkpoint ------------------------------------------------------------ */

/* The models a checkpoint is loaded into: LeNet, and the DataParallel
 * tutorial's Linear(5, 2), whose checkpoints are small enough for the fuzzer
 * to reach every check of a resumable one (weights, momentum, state) with
 * inputs of a few hundred bytes. Each has an SGD with momentum. */
enum { FZ_LENET, FZ_TUTORIAL, FZ_MODELS };
static const char *const fz_model_names[FZ_MODELS] = {"lenet", "tutorial"};
static dp_device_t *fz_dev;
static dp_model_t *fz_models[FZ_MODELS];
static dp_optimizer_t *fz_sgds[FZ_MODELS];
static dp_checkpoint_state *fz_state; /* large: on the heap */

/* Made on first use and kept: making models per input would dominate the
 * time. One kernel thread: cpu:0 only copies weights here. */
static int fz_models_make(void)
{
    if (fz_state)
        return 0;
    dp_optimizer_options opt = {.lr = 0.1f, .momentum = 0.9f};
    int rc = dp_device_open(&fz_dev, "cpu:0", 1);
    for (int i = 0; rc == 0 && i < FZ_MODELS; i++) {
        rc = dp_model_init_builtin(&fz_models[i], fz_model_names[i], fz_dev, 0);
        if (rc == 0)
            rc = dp_optimizer_init(&fz_sgds[i], dp_model_params(fz_models[i]), &opt);
    }
    if (rc == 0 && !(fz_state = malloc(sizeof *fz_state)))
        rc = DP_ENOMEM;
    if (rc < 0) {
        fuzz_teardown();
        return fz_bad("checkpoint", "cannot make the models on cpu:0: %s", dp_strerror(rc));
    }
    return 0;
}

/* What eval and predict read first, from the header alone: the model
 * (a checkpoint never names a file to open: without a model given, only a
 * built-in name comes back), the class names, the input shape and the
 * normalisation; and --init's and --resume's check against a definition. */
static int fz_checkpoint_header(const char *path)
{
    char model[64];
    fz_capture_begin();
    int rc = dp_checkpoint_model_for(path, NULL, model, sizeof model);
    fz_capture_end();
    if (rc < 0 && fz_check_failure("checkpoint", "dp_checkpoint_model_for", rc, path) < 0)
        return -1;
    bool builtin = false;
    for (const char *const *b = dp_model_names(); rc == 0 && *b; b++)
        builtin = builtin || strcmp(*b, model) == 0;
    if (rc == 0 && !builtin)
        return fz_bad("checkpoint", "the checkpoint chose the model file '%s'", model);
    dp__checkpoint_header h;
    fz_capture_begin();
    rc = dp__checkpoint_header_read(path, "lenet", &h);
    fz_capture_end();
    if (rc < 0)
        return fz_check_failure("checkpoint", "dp__checkpoint_header_read", rc, path);
    int result = strcmp(h.model, "lenet") == 0 ? 0 : fz_bad("checkpoint", "model %s", h.model);
    for (int k = 0; result == 0 && k < h.classes; k++)
        if (!h.class_names[k])
            result = fz_bad("checkpoint", "class %d of %d has no name", k, h.classes);
    for (int d = 0; result == 0 && d < 3; d++)
        if (h.input_chw[d] < 0 || h.input_chw[d] > DP_IMAGE_MAX_SIDE)
            result = fz_bad("checkpoint", "input dimension %lld", (long long)h.input_chw[d]);
    dp__checkpoint_header_free(&h);
    for (int i = 0; result == 0 && i < FZ_MODELS; i++) {
        fz_capture_begin();
        rc = dp__checkpoint_check_start(path, dp_model_definition(fz_models[i]), fz_state);
        fz_capture_end();
        if (rc < 0 && fz_check_failure("checkpoint", "dp__checkpoint_check_start", rc, path) < 0)
            result = -1;
    }
    return result;
}

int fuzz_checkpoint_input(const uint8_t *data, size_t size)
{
    if (fz_models_make() < 0)
        return -1;
    const char *path = fz_input_file("checkpoint", data, size);
    if (!path)
        return -1;
    if (fz_checkpoint_header(path) < 0)
        return -1;

    /* As dptrain eval does: the model the file names, else LeNet. */
    char name[32] = "";
    fz_capture_begin();
    int rc = dp_checkpoint_model(path, name, sizeof name);
    fz_capture_end();
    /* DP_ENOENT is a plain state dict (no model named), not an error. */
    if (rc < 0 && rc != DP_ENOENT &&
        fz_check_failure("checkpoint", "dp_checkpoint_model", rc, path) < 0)
        return -1;
    int which = rc == 0 && strcmp(name, "tutorial") == 0 ? FZ_TUTORIAL : FZ_LENET;
    dp_model_t *m = fz_models[which];

    fz_capture_begin();
    rc = dp_checkpoint_load_weights(path, m);
    fz_capture_end();
    if (rc < 0 && fz_check_failure("checkpoint", "dp_checkpoint_load_weights", rc, path) < 0)
        return -1;

    fz_capture_begin();
    rc = dp_checkpoint_load(path, m, fz_sgds[which], fz_state);
    fz_capture_end();
    if (rc < 0)
        return fz_check_failure("checkpoint", "dp_checkpoint_load", rc, path);
    const dp_checkpoint_state *st = fz_state;
    if (st->epochs_done < 0 || st->step < 0 || st->batch < 0 || st->options.data.batch_size < 1 ||
        st->nhistory < 0 || st->nhistory > DP_CHECKPOINT_MAX_HISTORY ||
        strcmp(st->model, fz_model_names[which]) != 0)
        return fz_bad("checkpoint",
                      "resumable state out of range: epochs_done %d, step %lld, batch %lld, "
                      "batch_size %lld, %d history entries",
                      st->epochs_done, (long long)st->step, (long long)st->batch,
                      (long long)st->options.data.batch_size, st->nhistory);
    return 0;
}

void fuzz_teardown(void)
{
    free(fz_state);
    fz_state = NULL;
    for (int i = 0; i < FZ_MODELS; i++) {
        dp_optimizer_close(fz_sgds[i]);
        fz_sgds[i] = NULL;
        dp_model_close(fz_models[i]);
        fz_models[i] = NULL;
    }
    dp_device_close(fz_dev);
    fz_dev = NULL;
    if (fz_input_fd >= 0)
        close(fz_input_fd);
    fz_input_fd = -1;
    fz_scratch_remove();
    dp_log_set(NULL, NULL);
}
