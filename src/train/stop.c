/* Stopping a run between steps. A signal handler (the CLI's SIGINT and
 * SIGTERM) only sets a flag; the loop reads it after each step it issues,
 * and under mpirun the ranks agree on it, so a signal that reaches one
 * rank first still stops all of them after the same step. Before the run
 * opens its output files (while it loads the data, builds the model,
 * measures kernels, allocates) nothing is saved by waiting for a step:
 * dp_train_stops_between_steps says so, and the CLI's handler then ends
 * the process at once. */
#include "train/trainer.h"

#include "core/internal.h"

#include <signal.h>

static volatile sig_atomic_t stop_signal;
/* Whether a run returned with stop_signal set (served it): the next run
 * starts without it, unless a request came after that return. */
static volatile sig_atomic_t stop_served;
/* Whether a run of this process is where a stop is served after its
 * current step: from the moment it opens its output files to its end. */
static volatile sig_atomic_t between_steps;

bool dp_train_stops_between_steps(void)
{
    return between_steps != 0;
}

void dp__train_set_between_steps(bool on)
{
    between_steps = on;
}

void dp_train_request_stop(int signo)
{
    stop_served = 0;
    stop_signal = signo ? signo : -1;
}

void dp__train_stop_begin_run(void)
{
    if (stop_served) {
        stop_served = 0;
        stop_signal = 0;
    }
}

void dp__train_stop_end_run(void)
{
    if (stop_signal)
        stop_served = 1;
}

int dp_train_stop_signal(void)
{
    return stop_signal;
}

int dp__train_should_stop(const dp__trainer *t, bool *stop)
{
    *stop = stop_signal != 0 || dp__book_stop_requested(t->book);
    if (t->ranks > 1)
        DP_TRY(dp_dist_any(*stop, stop));
    if (*stop && !stop_signal && !dp__book_stop_requested(t->book))
        stop_signal = SIGTERM; /* another rank's signal or callback */
    return 0;
}
