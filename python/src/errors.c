/* errors.c - the library's failures as Python exceptions.
 *
 * The library logs one line per failure and returns a negative code. A
 * failure a command met on a device's worker is logged on that thread and
 * returned by a later wait on the caller's, so dp_last_error() (per thread)
 * does not see it: the extension's log callback keeps the newest error line
 * of any thread, numbered, and an exception takes it when one was logged
 * since the previous exception, else dp_strerror's words. Warnings go to
 * stderr as the library's default callback writes them. */
#include "dpy.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_line[1024];
static uint64_t logged_seq, raised_seq;

static void log_line(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_ERROR) {
        pthread_mutex_lock(&log_lock);
        snprintf(last_line, sizeof last_line, "%s", msg);
        logged_seq++;
        pthread_mutex_unlock(&log_lock);
    } else if (level == DP_LOG_WARN) {
        fprintf(stderr, "dptrain: warning: %s\n", msg);
    }
}

void dpy_errors_init(void)
{
    dp_log_set(log_line, NULL);
}

static PyObject *exception_of(int rc)
{
    switch (rc) {
    case DP_EINVAL:
    case DP_ESHAPE:
    case DP_ENONFINITE:
        return PyExc_ValueError;
    case DP_ENOMEM:
        return PyExc_MemoryError;
    case DP_ENOENT:
        return PyExc_FileNotFoundError;
    case DP_EINTR:
        return PyExc_KeyboardInterrupt;
    case DP_ENOTSUP:
        return PyExc_NotImplementedError;
    default:
        return PyExc_RuntimeError;
    }
}

PyObject *dpy_raise(int rc)
{
    char line[1024];
    pthread_mutex_lock(&log_lock);
    bool fresh = logged_seq != raised_seq;
    raised_seq = logged_seq;
    snprintf(line, sizeof line, "%s", fresh ? last_line : dp_strerror(rc));
    pthread_mutex_unlock(&log_lock);
    PyErr_SetString(exception_of(rc), line);
    return NULL;
}

int dpy_raise_int(int rc)
{
    dpy_raise(rc);
    return -1;
}
