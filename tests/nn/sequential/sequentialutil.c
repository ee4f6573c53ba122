/* Helpers of the nn.Sequential tests (see sequentialutil.h). */
#include "sequentialutil.h"

#include <stdio.h>

/* The last error the library logged, whole. */
char last_log[512];

void capture_log(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_ERROR)
        snprintf(last_log, sizeof last_log, "%s", msg);
}

dp_device_t *cpu;

int group_setup(void **state)
{
    (void)state;
    dp_log_set(capture_log, NULL);
    return dp_device_open(&cpu, "cpu:0", 1);
}

int group_teardown(void **state)
{
    (void)state;
    dp_device_close(cpu);
    return 0;
}
