/* dptrain devices: lists the devices (filled in by the next change). */
#include "cli.h"

#include <stdio.h>

int cmd_devices(int argc, char **argv)
{
    (void)argc, (void)argv;
    fprintf(stderr, "dptrain: error: the devices command is not in this build yet\n");
    return 2;
}
