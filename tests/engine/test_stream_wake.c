/* The engine wakes a thread that waits for a command when that command has
 * run, not at every command before it: a device waiting for another's
 * gradients (dp__stream_wait_other) used to be woken, to sleep again, by
 * each of the other's commands, two futex calls and two context switches
 * each on cores the devices share. A thread waits for the last of 200
 * commands of 0.2 ms while they run, and a second stream's worker waits for
 * the same command as a device does; the worker wakes them once or twice
 * (a waiter may register after the first wake), never per command. */
#include "testutil.h"

#include "engine/stream.h"
#include "slow_command.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

enum { COMMANDS = 200 };

typedef struct waiter {
    dp__stream *s;
    uint64_t seq;
    atomic_int woke;
} waiter;

static void *wait_main(void *p)
{
    waiter *w = p;
    assert_int_equal(dp__stream_wait(w->s, w->seq), 0);
    atomic_store(&w->woke, 1);
    return NULL;
}

static void waiters_woken_once_their_command_ran(void **state)
{
    (void)state;
    dp__stream *s, *other;
    assert_int_equal(dp__stream_init(&s, "wake", NULL, NULL), 0);
    assert_int_equal(dp__stream_init(&other, "other", NULL, NULL), 0);
    slow_args slow = {.seconds = 2e-4};
    uint64_t last = 0;
    for (int i = 0; i < COMMANDS; i++)
        last = dp__stream_push(s, slow_command, &slow, sizeof slow);
    uint64_t before = dp__stream_wakeups(s);
    waiter w = {.s = s, .seq = last};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, wait_main, &w), 0);
    dp__stream_wait_other(other, s, last);
    assert_int_equal(pthread_join(thread, NULL), 0);
    assert_int_equal(dp__stream_wait(other, dp__stream_last(other)), 0);
    assert_int_equal(atomic_load(&w.woke), 1);
    uint64_t wakeups = dp__stream_wakeups(s) - before;
    printf("%d commands of 0.2 ms, two waiters for the last: %llu wakeups\n", COMMANDS,
           (unsigned long long)wakeups);
    assert_true(wakeups >= 1 && wakeups <= 3);
    dp__stream_close(other);
    dp__stream_close(s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(waiters_woken_once_their_command_ran),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
