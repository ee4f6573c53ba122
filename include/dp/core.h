/* dp/core.h - status codes, logging, the counter-based RNG.
 *
 * Every fallible function of the library returns an int: 0 (DP_OK) or one of
 * the negative DP_E* codes below. The detail of a failure (the file, the
 * offset, the foreign library's own message) goes to the log callback, so a
 * program decides itself where messages go; the library never prints to
 * stdout and never exits.
 */
#ifndef DP_CORE_H
#define DP_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, message): the one list that makes the enum and dp_strerror. */
#define DP_STATUS_MAP(X)                                                                           \
    X(OK, 0, "success")                                                                            \
    X(EINVAL, -1, "invalid argument")                                                              \
    X(ENOMEM, -2, "out of memory")                                                                 \
    X(ENOENT, -3, "no such file or directory")                                                     \
    X(EIO, -4, "input/output error")                                                               \
    X(EFORMAT, -5, "bad file format")                                                              \
    X(ETRUNC, -6, "truncated file")                                                                \
    X(ESHAPE, -7, "shape mismatch")                                                                \
    X(EDEVICE, -8, "device error")                                                                 \
    X(ENOTSUP, -9, "not supported in this build")                                                  \
    X(ENONFINITE, -10, "non-finite value")                                                         \
    X(EINTR, -11, "interrupted")                                                                   \
    X(ECOMM, -12, "communication between processes failed")                                        \
    X(ETIMEDOUT, -13, "timed out")

typedef enum dp_status {
#define DP__STATUS_ENUM(name, value, msg) DP_##name = value,
    DP_STATUS_MAP(DP__STATUS_ENUM)
#undef DP__STATUS_ENUM
} dp_status;

/* The message of a status code; never NULL. */
const char *dp_strerror(int status);

typedef enum dp_log_level {
    DP_LOG_DEBUG = 0,
    DP_LOG_INFO = 1,
    DP_LOG_WARN = 2,
    DP_LOG_ERROR = 3,
} dp_log_level;

/* The log callback: `msg` is one line without a trailing newline. */
typedef void (*dp_log_fn)(dp_log_level level, const char *msg, void *user);

/* Replaces the log callback (NULL restores the default, which writes
 * warnings and errors to stderr). Not thread-safe against concurrent logging:
 * set it once at start. */
void dp_log_set(dp_log_fn fn, void *user);

/* The last message logged at DP_LOG_ERROR by the calling thread ("" if none). */
const char *dp_last_error(void);

/* ---- counter-based random numbers ------------------------------------
 * The value for (seed, stream, index) is a pure function of the three, so
 * every device and every rank draws the same numbers for the same seed,
 * whatever order they ask in. */
typedef struct dp_rng {
    uint64_t seed;
    uint64_t stream;
    uint64_t counter; /* next index */
} dp_rng;

void dp_rng_init(dp_rng *rng, uint64_t seed, uint64_t stream);
uint64_t dp_rng_u64(dp_rng *rng);
/* Uniform in [0, 1). */
float dp_rng_uniform(dp_rng *rng);
/* Standard normal (Box-Muller). */
float dp_rng_normal(dp_rng *rng);
/* Uniform integer in [0, n). */
uint64_t dp_rng_below(dp_rng *rng, uint64_t n);

/* Monotonic time in seconds. */
double dp_time_seconds(void);

/* A name from a file (a class directory, a tensor, a metadata value, an
 * image's path) as it reaches a line of output or a message, so that no
 * name can split a line or pass for another: dp_repr writes it as Python's
 * repr() writes a str ('cat', 'a\nb', "it's"): quotes, \\ \n \r \t, other
 * control characters and the characters Python does not print (C1
 * controls, no-break and other spaces, bidirectional and zero-width
 * marks) as \xNN or \uNNNN, and bytes that are not UTF-8 as \xNN. A name
 * longer than `size` allows is cut, ending in "...". Returns buf.
 * dp_name_str gives the name itself where it reads the same either way
 * (printable UTF-8, no quote or backslash, no space at either end, not
 * empty), else dp_repr's text: predict's 'cat.png: dark 0.91, light 0.09'
 * stays as it was, a class named "a\nb" prints as 'a\nb'. */
const char *dp_repr(const char *s, char *buf, size_t size);
const char *dp_name_str(const char *s, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* DP_CORE_H */
