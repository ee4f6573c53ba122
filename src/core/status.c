/* Status messages, the log callback and checked allocation. */
#include "core/internal.h"

#include <stdarg.h>
#include <string.h>
#include <time.h>

const char *dp_strerror(int status)
{
    switch (status) {
#define DP__STATUS_CASE(name, value, msg)                                                          \
    case value:                                                                                    \
        return msg;
        DP_STATUS_MAP(DP__STATUS_CASE)
#undef DP__STATUS_CASE
    default:
        return "unknown error";
    }
}

static void default_log(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level >= DP_LOG_WARN)
        fprintf(stderr, "dptrain: %s: %s\n", level == DP_LOG_ERROR ? "error" : "warning", msg);
}

static dp_log_fn log_fn = default_log;
static void *log_user;
static _Thread_local char last_error[1024];

void dp_log_set(dp_log_fn fn, void *user)
{
    log_fn = fn ? fn : default_log;
    log_user = fn ? user : NULL;
}

const char *dp_last_error(void)
{
    return last_error;
}

/* An error or a warning is one line, whatever it quotes: a device list, a
 * stage list or a tensor name from a file may hold control characters,
 * which are written as C escapes ("\n", "\x09"). */
static void one_line(char *msg, size_t size)
{
    char out[1024];
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)msg; *p && o + 5 < sizeof out; p++) {
        if (*p >= 0x20 && *p != 0x7f)
            out[o++] = (char)*p;
        else if (*p == '\n')
            o += (size_t)snprintf(out + o, sizeof out - o, "\\n");
        else
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", *p);
    }
    out[o] = '\0';
    snprintf(msg, size, "%s", out);
}

static _Thread_local dp__log_context context;
static _Thread_local int held;

void dp__log_hold(bool hold)
{
    held += hold ? 1 : -1;
}

dp__log_context dp__log_context_set(dp__log_context c)
{
    dp__log_context was = context;
    context = c;
    return was;
}

/* An error under a context begins with the context's text (once). */
static void put_context(char *msg, size_t size)
{
    char where[512];
    context.describe(context.arg, where, sizeof where);
    size_t n = strlen(where);
    if (n == 0 || (strncmp(msg, where, n) == 0 && msg[n] == ':'))
        return;
    /* where, ": ", then as much of msg as fits */
    char both[1024];
    size_t keep = DP_MIN(n, sizeof both - 3);
    memcpy(both, where, keep);
    memcpy(both + keep, ": ", 2);
    size_t rest = DP_MIN(strlen(msg), sizeof both - keep - 3);
    memcpy(both + keep + 2, msg, rest);
    both[keep + 2 + rest] = '\0';
    snprintf(msg, size, "%s", both);
}

void dp__log(dp_log_level level, const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (level == DP_LOG_ERROR && context.describe)
        put_context(msg, sizeof msg);
    if (level == DP_LOG_ERROR || level == DP_LOG_WARN)
        one_line(msg, sizeof msg);
    if (level == DP_LOG_ERROR)
        memcpy(last_error, msg, sizeof msg);
    if (level == DP_LOG_ERROR && held > 0)
        return;
    if (level == DP_LOG_DEBUG) {
        char full[1200];
        snprintf(full, sizeof full, "%s:%d: %s", file, line, msg);
        log_fn(level, full, log_user);
        return;
    }
    log_fn(level, msg, log_user);
}

void dp__abort(const char *file, int line, const char *expr)
{
    fprintf(stderr, "dptrain: internal error: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}

bool dp__shape_numel(int ndim, const int64_t *shape, int64_t *out)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (!dp__mul_size(n, shape[i], &n))
            return false;
    *out = n;
    return true;
}

void *dp__malloc(size_t bytes)
{
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded == 0)
        rounded = 64;
    if (posix_memalign(&p, 64, rounded) != 0) {
        DP_ERROR("out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    return p;
}

void *dp__calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        DP_ERROR("allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    void *p = dp__malloc(count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

void dp__free(void *p)
{
    free(p);
}

char *dp__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = dp__malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

double dp_time_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
