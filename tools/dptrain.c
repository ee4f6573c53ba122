/* dptrain - the command line. The only place that prints results to stdout
 * and turns status codes into exit statuses. */
#include "dp/dp.h"

#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_main[] =
    "usage: dptrain <command> [options]\n"
    "\n"
    "Trains convolutional networks data-parallel across devices.\n"
    "\n"
    "commands:\n"
    "  train     train a model on Fashion-MNIST (dptrain train --help)\n"
    "  eval      test accuracy of a checkpoint's weights\n"
    "  devices   list the devices, and with --bench measure them\n"
    "  demo      the seeds' demonstrations: dataparallel, allreduce, async\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help\n"
    "  --version      print the version\n";

static void log_to_stderr(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level >= DP_LOG_WARN)
        fprintf(stderr, "dptrain: %s: %s\n", level == DP_LOG_ERROR ? "error" : "warning", msg);
    else if (level == DP_LOG_INFO && getenv("DP_PROFILE"))
        fprintf(stderr, "dptrain: %s\n", msg);
}

int cli_bad_value(const char *flag, const char *value, const char *want)
{
    fprintf(stderr, "dptrain: error: %s %s: %s\n", flag, value, want);
    return 2;
}

int cli_parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected an integer from %lld to %lld", (long long)lo,
                 (long long)hi);
        return cli_bad_value(flag, s, want);
    }
    *out = v;
    return 0;
}

int cli_parse_float(const char *flag, const char *s, double lo, double hi, bool lo_open, float *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < lo || (lo_open && v == lo) ||
        v > hi) {
        char want[96];
        snprintf(want, sizeof want, "expected a number %s %g and <= %g", lo_open ? ">" : ">=", lo,
                 hi);
        return cli_bad_value(flag, s, want);
    }
    *out = (float)v;
    return 0;
}

int cli_option_value(const char *command, const char *const *names, size_t n, int argc, char **argv,
                     int *i, const char **value)
{
    const char *f = argv[*i];
    bool known = false;
    for (size_t k = 0; k < n; k++)
        known |= strcmp(f, names[k]) == 0;
    if (!known) {
        fprintf(stderr, "dptrain: error: unknown option '%s' for %s (see dptrain %s --help)\n", f,
                command, command);
        return 2;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "dptrain: error: %s needs a value\n", f);
        return 2;
    }
    *value = argv[++*i];
    return 0;
}

int cli_fail(int status)
{
    if (dp_last_error()[0] == '\0')
        fprintf(stderr, "dptrain: error: %s\n", dp_strerror(status));
    return 1;
}

int main(int argc, char **argv)
{
    dp_log_set(log_to_stderr, NULL);
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(usage_main, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("dptrain %s\n", DP_VERSION_STRING);
        return 0;
    }
    if (strcmp(argv[1], "train") == 0)
        return cmd_train(argc - 2, argv + 2);
    if (strcmp(argv[1], "eval") == 0)
        return cmd_eval(argc - 2, argv + 2);
    if (strcmp(argv[1], "demo") == 0)
        return cmd_demo(argc - 2, argv + 2);
    if (strcmp(argv[1], "devices") == 0)
        return cmd_devices(argc - 2, argv + 2);
    fprintf(stderr, "dptrain: error: unknown command '%s' (see dptrain --help)\n", argv[1]);
    return 2;
}
