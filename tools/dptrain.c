/* dptrain - the command line. The only place that prints results to stdout
 * and turns status codes into exit statuses. */
#include "dp/dp.h"

#include "cli.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Library messages name an option as `name`; here it is the running
 * command's flag for it. Under mpirun an error names its rank, and warnings come from rank
 * 0 only (every rank would print the same). */
static void log_to_stderr(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    char with_flags[2048];
    msg = cli_with_flags(cli_running, msg, with_flags, sizeof with_flags);
    char who[64] = "";
    if (dp_dist_size() > 1)
        snprintf(who, sizeof who, "rank %d on %s: ", dp_dist_rank(), dp_dist_host());
    if (level == DP_LOG_ERROR)
        fprintf(stderr, "dptrain: %serror: %s\n", who, msg);
    else if (level == DP_LOG_WARN && dp_dist_rank() == 0)
        fprintf(stderr, "dptrain: warning: %s\n", msg);
    else if (level == DP_LOG_INFO && (cli_verbose || getenv("DP_PROFILE")))
        fprintf(stderr, "dptrain: %s%s\n", who, msg);
}

/* SIGINT and SIGTERM: a training run between its steps stops after the
 * current one and saves itself (dp_train_request_stop); anything else
 * (loading the data, building a model, measuring kernels, allocating,
 * evaluating, predicting) ends at once, exit 128 + the signal, having
 * written nothing (every file dptrain writes is renamed into place whole).
 * A second signal ends the run at once (the handler resets itself). */
static void on_stop_signal(int signo)
{
    if (dp_train_stops_between_steps()) {
        dp_train_request_stop(signo);
        return;
    }
    static const char term[] = "dptrain: stopped by SIGTERM\n", intr[] = "dptrain: stopped by "
                                                                         "SIGINT\n";
    ssize_t ignored = signo == SIGINT ? write(STDERR_FILENO, intr, sizeof intr - 1)
                                      : write(STDERR_FILENO, term, sizeof term - 1);
    (void)ignored;
    _exit(128 + signo);
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static int run_command(int argc, char **argv)
{
    if (strcmp(argv[1], "help") == 0)
        return cli_help_run(argc - 2, argv + 2);
    for (const cli_command *const *c = cli_commands(); *c; c++) {
        if (strcmp(argv[1], (*c)->name) == 0) {
            cli_running = *c;
            return (*c)->run(argc - 2, argv + 2);
        }
    }
    fprintf(stderr, "dptrain: error: unknown command '%s' (see dptrain --help)\n", argv[1]);
    return 2;
}

int main(int argc, char **argv)
{
    dp_log_set(log_to_stderr, NULL);
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        cli_print_help(NULL, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("dptrain %s\nmulti-process (MPI): %s\n", DP_VERSION_STRING,
               dp_dist_built() ? dp_dist_library() : "off (built without Open MPI)");
        if (dp_cuda_built())
            printf("GPUs (CUDA): backend built; %d GPU(s) here\n", dp_cuda_device_count());
        else
            printf("GPUs (CUDA): off (built without the CUDA toolkit)\n");
        return 0;
    }
    /* Under mpirun: every rank runs the command; a rank that fails ends
     * the whole job at once (MPI_Abort), so none waits for it forever. */
    if (dp_dist_init(&argc, &argv) < 0)
        return 1;
    catch_stop_signals();
    int status = run_command(argc, argv);
    if (status != 0 && status < 128 && dp_dist_size() > 1) {
        fprintf(stderr, "dptrain: rank %d on %s failed (exit %d): ending all %d ranks\n",
                dp_dist_rank(), dp_dist_host(), status, dp_dist_size());
        dp_dist_abort(status);
    }
    dp_dist_finalize();
    return status;
}
