/* Internal helpers shared by every layer: logging macros, assertions,
 * checked allocation. Nothing here is part of the public API. */
#ifndef DP_CORE_INTERNAL_H
#define DP_CORE_INTERNAL_H

#include "dp/core.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define DP__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define DP__PRINTF(a, b)
#endif

void dp__log(dp_log_level level, const char *file, int line, const char *fmt, ...) DP__PRINTF(4, 5);

/* While this thread holds its errors (dp__log_hold(true), nested), an
 * error is kept as its dp_last_error() but not sent to the log callback:
 * a worker that meets a bad input hands the line to the thread that
 * reports it (the loader's decoder threads). */
void dp__log_hold(bool hold);

/* DP_ERROR logs the detail of a failure; the returned code says what kind. */
#define DP_ERROR(...) dp__log(DP_LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)
#define DP_WARN(...) dp__log(DP_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define DP_INFO(...) dp__log(DP_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)

/* Programmer errors only, never bad input: prints and aborts. */
_Noreturn void dp__abort(const char *file, int line, const char *expr);
#define DP_ASSERT(x)                                                                               \
    do {                                                                                           \
        if (!(x))                                                                                  \
            dp__abort(__FILE__, __LINE__, #x);                                                     \
    } while (0)

/* Propagate a failing status. */
#define DP_TRY(expr)                                                                               \
    do {                                                                                           \
        int dp__rc = (expr);                                                                       \
        if (dp__rc < 0)                                                                            \
            return dp__rc;                                                                         \
    } while (0)

/* Aligned (64-byte) allocation that logs on failure; free with dp__free. */
void *dp__malloc(size_t bytes);
void *dp__calloc(size_t count, size_t size);
void dp__free(void *p);
char *dp__strdup(const char *s);

/* What an error is about, where the code that logs it cannot know: the
 * ONNX graph sets "m.onnx: node 'fc' (Gemm)" around each node it runs,
 * so that an op's "linear: input [2, 784] does not fit ..." reads
 * "m.onnx: node 'fc' (Gemm): linear: ...". `describe` writes the text
 * into buf only when an error is logged (a node costs two stores); an
 * error that already begins with it is left as it is. Per thread. */
typedef struct dp__log_context {
    void (*describe)(const void *arg, char *buf, size_t size);
    const void *arg;
} dp__log_context;
/* Sets this thread's context (describe NULL: none) and returns the one
 * it replaces, which the caller puts back when done. */
dp__log_context dp__log_context_set(dp__log_context c);

/* *out = a * b for sizes (a, b >= 0): false, and *out left alone, when a
 * size is negative or the product leaves int64_t. Every size computed
 * from numbers in a file (a shape, a count) is multiplied through this. */
static inline bool dp__mul_size(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0 || (a > 0 && b > INT64_MAX / a))
        return false;
    *out = a * b;
    return true;
}
/* *out = the product of shape[0..ndim), through dp__mul_size: false when
 * a dimension is negative or the product leaves int64_t. */
bool dp__shape_numel(int ndim, const int64_t *shape, int64_t *out);

#define DP_MIN(a, b) ((a) < (b) ? (a) : (b))
#define DP_MAX(a, b) ((a) > (b) ? (a) : (b))
#define DP_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))

/* dp_repr of s into a buffer that lives to the end of the enclosing
 * block: a name from a file as a message's argument ("tensor %s",
 * DP_REPR(name)). */
#define DP__REPR_MAX 256
#define DP_REPR(s) dp_repr((s), (char[DP__REPR_MAX]){0}, DP__REPR_MAX)

/* Opens `path` for reading if it is a regular file: one line naming the
 * path and why otherwise ("no such file", DP_ENOENT; "not a regular file
 * (a FIFO)", DP_EIO), decided before anything is read, without waiting on
 * a FIFO (file.c). Returns the descriptor (O_CLOEXEC), or a negative
 * DP_E* code; *size (may be NULL) gets the file's size. */
int dp__open_regular(const char *path, uint64_t *size);

/* "[256, 1, 28, 28]": the one way a shape is written in messages. Returns
 * buf, cut short (still NUL-terminated) when `size` is too small. */
const char *dp__shape_str(char *buf, size_t size, int ndim, const int64_t *shape);

/* x in the fewest significant digits that read back as the same float
 * (single) or double: 0.2f is "0.2", not "0.200000003". Returns buf. */
const char *dp__format_real(double x, bool single, char *buf, size_t size);

/* Where dp__json_string sends its output: `n` bytes at `bytes`. */
typedef void (*dp__put_fn)(void *ctx, const char *bytes, size_t n);
/* Writes bytes [s, s + n) as a JSON string literal, quotes included, as
 * serde_json does: '"' and '\' escaped, the control characters as \b \f
 * \n \r \t or \u00xx, everything else (UTF-8 included) as it is. */
void dp__json_string(const char *s, size_t n, dp__put_fn put, void *ctx);

#endif /* DP_CORE_INTERNAL_H */
