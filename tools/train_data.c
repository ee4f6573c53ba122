/* dptrain train's flags for your own data: --channels, for --dataset
 * folder (the folder and npy datasets themselves are --dataset names). */
#include "cli.h"

#include "dp/dp.h"

#include <string.h>

const char cli_train_data_help[] =
    "  --channels C         --dataset folder: read the images as 1 (grayscale)\n"
    "                       or 3 (RGB) channels, as PIL's convert [the first\n"
    "                       image's]\n";

const char *const cli_train_data_flags[] = {"--channels", NULL};

int cli_train_data_flag(const char *f, const char *v, dp_train_options *o)
{
    if (strcmp(f, "--channels") == 0) {
        if (strcmp(v, "1") != 0 && strcmp(v, "3") != 0)
            return cli_bad_value(f, v, "expected 1 (grayscale) or 3 (RGB)");
        o->channels = v[0] - '0';
        return 0;
    }
    return -1;
}
