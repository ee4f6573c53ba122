/* The command line's errors and the library's messages (tools/cli.h). */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>

bool cli_verbose;
const cli_command *cli_running;

const cli_command *const *cli_commands(void)
{
    static const cli_command *commands[10];
    if (!commands[0]) {
        const cli_command *(*const all[])(void) = {cli_train,   cli_data,   cli_eval,
                                                   cli_predict, cli_model,  cli_export,
                                                   cli_devices, cli_shards, cli_demo};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++)
            commands[i] = all[i]();
    }
    return commands;
}

int cli_bad_value(const char *flag, const char *value, const char *want)
{
    fprintf(stderr, "dptrain: error: %s %s: %s\n", flag, value, want);
    return 2;
}

int cli_fail(int status)
{
    if (dp_last_error()[0] == '\0')
        fprintf(stderr, "dptrain: error: %s\n", dp_strerror(status));
    return 1;
}
