/* The command stream: a bounded ring of commands and one worker thread. */
#include "engine/stream.h"

#include "core/internal.h"

#include <errno.h>
#include <stdbool.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Commands in flight per stream. Bounded so that a front end far ahead of
 * its devices blocks instead of growing memory. */
#define RING_SLOTS 4096

typedef struct slot {
    dp__cmd_fn fn;
    const char *name;
    _Alignas(16) unsigned char args[DP__CMD_ARGS_MAX];
} slot;

struct dp__stream {
    char name[32];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t nonempty; /* worker waits: head == tail */
    pthread_cond_t done;     /* waiters on completed, and pushers on a full ring */
    slot *ring;
    uint64_t head;      /* next seq to push - 1 == pushed so far */
    uint64_t completed; /* commands run so far */
    int waiters;
    /* The least `completed` a waiter on `done` needs (UINT64_MAX: none):
     * the worker wakes the waiters when it gets there, not after every
     * command. A device waiting for another's gradients would otherwise be
     * woken, to sleep again, by each of the other's commands (two futex
     * calls and two context switches each, on the cores the devices
     * share). Every waiter that wakes short of its own sequence number
     * registers it again. */
    uint64_t wake_at;
    uint64_t wakeups; /* broadcasts on `done`, for dp__stream_wakeups */
    int stop;
    int error; /* sticky: first failure */
    void (*worker_init)(void *);
    void *ctx;
    /* DP_PROFILE: seconds and calls per command name (under mu). */
    int profile;
    struct prof {
        const char *name;
        double seconds;
        uint64_t calls;
    } prof[64];
    int nprof;
};

/* How long a waiter polls `completed` before it sleeps on `done`. A device
 * waiting for another's gradient copy, one of a loop's small per-parameter
 * ops, is usually a few microseconds from being satisfied, and a condition
 * variable's wake-up costs tens of them (a futex and a context switch): the
 * seed's allreduce, two waits a parameter, went 2.7% faster an epoch on a
 * 2-core AMD EPYC Zen 5 polling 30 us (bench/python_vs_c.sh). Bounded, so a long wait
 * costs at most this much of a core. */
#define POLL_SECONDS 30e-6

/* Polls `completed` (read atomically: the worker stores it under mu) until
 * it reaches seq or POLL_SECONDS pass; true if it did. */
static bool polled(dp__stream *s, uint64_t seq)
{
    if (__atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) >= seq)
        return true;
    double until = dp_time_seconds() + POLL_SECONDS;
    do {
        for (int i = 0; i < 32; i++) {
            if (__atomic_load_n(&s->completed, __ATOMIC_ACQUIRE) >= seq)
                return true;
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        }
    } while (dp_time_seconds() < until);
    return false;
}

/* Sleeps on `done` (under mu) until the worker has completed `seq`. */
static void wait_done(dp__stream *s, uint64_t seq)
{
    s->waiters++;
    if (seq < s->wake_at)
        s->wake_at = seq;
    pthread_cond_wait(&s->done, &s->mu);
    s->waiters--;
}

static void profile_add(dp__stream *s, const char *name, double seconds)
{
    for (int i = 0; i < s->nprof; i++) {
        if (s->prof[i].name == name) {
            s->prof[i].seconds += seconds;
            s->prof[i].calls++;
            return;
        }
    }
    if (s->nprof < (int)DP_COUNTOF(s->prof))
        s->prof[s->nprof++] = (struct prof){name, seconds, 1};
}

static int prof_cmp(const void *a, const void *b)
{
    double x = ((const struct prof *)a)->seconds, y = ((const struct prof *)b)->seconds;
    return x < y ? 1 : x > y ? -1 : 0;
}

void dp__stream_log_profile(dp__stream *s)
{
    if (!s || !s->profile)
        return;
    pthread_mutex_lock(&s->mu);
    /* The table is whole once every command pushed so far has run. */
    while (s->completed < s->head)
        wait_done(s, s->head);
    qsort(s->prof, (size_t)s->nprof, sizeof s->prof[0], prof_cmp);
    double total = 0;
    for (int i = 0; i < s->nprof; i++)
        total += s->prof[i].seconds;
    DP_INFO("profile of %s: %.3f s in commands", s->name, total);
    for (int i = 0; i < s->nprof; i++)
        DP_INFO("  %8.3f s %5.1f%% %8llu calls %8.1f us/call  %s", s->prof[i].seconds,
                total > 0 ? 100 * s->prof[i].seconds / total : 0.0,
                (unsigned long long)s->prof[i].calls,
                1e6 * s->prof[i].seconds / (double)s->prof[i].calls, s->prof[i].name);
    pthread_mutex_unlock(&s->mu);
}

static void *worker_main(void *arg)
{
    dp__stream *s = arg;
    if (s->worker_init)
        s->worker_init(s->ctx);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->completed == s->head && !s->stop)
            pthread_cond_wait(&s->nonempty, &s->mu);
        if (s->completed == s->head && s->stop)
            break;
        slot *sl = &s->ring[s->completed % RING_SLOTS];
        pthread_mutex_unlock(&s->mu);
        /* The slot is not reused until `completed` moves past it. */
        double t0 = s->profile ? dp_time_seconds() : 0;
        int rc = sl->fn(sl->args, s->ctx);
        double seconds = s->profile ? dp_time_seconds() - t0 : 0;
        pthread_mutex_lock(&s->mu);
        /* Under the lock: dp__stream_log_profile may read the table while
         * commands still run (a device closing pushes one and logs). */
        if (s->profile)
            profile_add(s, sl->name, seconds);
        if (rc < 0 && s->error == 0)
            s->error = rc;
        __atomic_store_n(&s->completed, s->completed + 1, __ATOMIC_RELEASE);
        if (s->waiters && s->completed >= s->wake_at) {
            s->wake_at = UINT64_MAX;
            s->wakeups++;
            pthread_cond_broadcast(&s->done);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int dp__stream_init(dp__stream **out, const char *name, void (*worker_init)(void *ctx), void *ctx)
{
    dp__stream *s = dp__calloc(1, sizeof *s);
    if (!s)
        return DP_ENOMEM;
    s->ring = dp__calloc(RING_SLOTS, sizeof *s->ring);
    if (!s->ring) {
        dp__free(s);
        return DP_ENOMEM;
    }
    snprintf(s->name, sizeof s->name, "%s", name);
    s->worker_init = worker_init;
    const char *prof = getenv("DP_PROFILE");
    s->profile = prof && *prof && strcmp(prof, "0") != 0;
    s->ctx = ctx;
    s->wake_at = UINT64_MAX;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->nonempty, NULL);
    /* `done` times its waits on the monotonic clock (dp__stream_wait_for),
     * which a change of the wall clock does not move. */
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->done, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&s->thread, NULL, worker_main, s) != 0) {
        DP_ERROR("%s: cannot start worker thread", name);
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->nonempty);
        pthread_mutex_destroy(&s->mu);
        dp__free(s->ring);
        dp__free(s);
        return DP_EDEVICE;
    }
    *out = s;
    return 0;
}

void dp__stream_close(dp__stream *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->nonempty);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->nonempty);
    pthread_mutex_destroy(&s->mu);
    dp__free(s->ring);
    dp__free(s);
}

uint64_t dp__stream_push_named(dp__stream *s, dp__cmd_fn fn, const char *name, const void *args,
                               size_t size)
{
    DP_ASSERT(size <= DP__CMD_ARGS_MAX);
    DP_ASSERT(!dp__stream_is_worker(s));
    pthread_mutex_lock(&s->mu);
    while (s->head - s->completed >= RING_SLOTS)
        wait_done(s, s->head - RING_SLOTS + 1);
    slot *sl = &s->ring[s->head % RING_SLOTS];
    sl->fn = fn;
    sl->name = name;
    if (size)
        memcpy(sl->args, args, size);
    uint64_t seq = ++s->head;
    pthread_cond_signal(&s->nonempty);
    pthread_mutex_unlock(&s->mu);
    return seq;
}

uint64_t dp__stream_wakeups(dp__stream *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->wakeups;
    pthread_mutex_unlock(&s->mu);
    return n;
}

uint64_t dp__stream_last(dp__stream *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->head;
    pthread_mutex_unlock(&s->mu);
    return seq;
}

int dp__stream_wait(dp__stream *s, uint64_t seq)
{
    polled(s, seq);
    pthread_mutex_lock(&s->mu);
    while (s->completed < seq)
        wait_done(s, seq);
    int rc = s->error;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int dp__stream_take_error(dp__stream *s)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->error;
    s->error = 0;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int dp__stream_wait_for(dp__stream *s, uint64_t seq, double seconds)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = floor(seconds);
    /* Past 2^31 s (or INFINITY) the deadline is 2^31 s away: never, here. */
    if (whole > 2147483647.0)
        whole = 2147483647.0, seconds = whole;
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((seconds - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    int timed_out = 0;
    while (s->completed < seq && !timed_out) {
        s->waiters++;
        if (seq < s->wake_at)
            s->wake_at = seq;
        timed_out = pthread_cond_timedwait(&s->done, &s->mu, &deadline) == ETIMEDOUT;
        s->waiters--;
    }
    int rc = s->completed < seq ? DP_ETIMEDOUT : s->error;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

typedef struct wait_other_args {
    dp__stream *other;
    uint64_t seq;
} wait_other_args;

static int run_wait_other(void *p, void *ctx)
{
    wait_other_args *a = p;
    (void)ctx;
    return dp__stream_wait(a->other, a->seq);
}

void dp__stream_wait_other(dp__stream *s, dp__stream *other, uint64_t seq)
{
    if (s == other || seq == 0)
        return;
    wait_other_args a = {other, seq};
    dp__stream_push(s, run_wait_other, &a, sizeof a);
}

int dp__stream_is_worker(const dp__stream *s)
{
    return pthread_equal(pthread_self(), s->thread);
}
