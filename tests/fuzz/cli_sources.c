/* The command line's parsers for the CLI fuzz target and the regression
 * test, which have no build of tools/ of their own: the tools' sources are
 * compiled here as one unit. cmd_demo calls the examples (examples/, built
 * into dptrain); the parsers never do, so stand-ins that refuse to run take
 * their place. */
#include "../../tools/cli.c"
#include "../../tools/cli_help.c"
#include "../../tools/cli_parse.c"
#include "../../tools/data_cmd.c"
#include "../../tools/data_grid.c"
#include "../../tools/demo_cmd.c"
#include "../../tools/devices_cmd.c"
#include "../../tools/eval_cmd.c"
#include "../../tools/export_cmd.c"
#include "../../tools/model_cmd.c"
#include "../../tools/predict_cmd.c"
#include "../../tools/shards_cmd.c"
#include "../../tools/train_cmd.c"

int example_dataparallel(const char *devices)
{
    (void)devices;
    return DP_ENOTSUP;
}

int example_allreduce(const char *devices, const char *algo)
{
    (void)devices;
    (void)algo;
    return DP_ENOTSUP;
}

int example_lenet_scratch(const char *devices, const char *algo, int steps, const char *checkpoint)
{
    (void)devices;
    (void)algo;
    (void)steps;
    (void)checkpoint;
    return DP_ENOTSUP;
}

int example_async(int ops)
{
    (void)ops;
    return DP_ENOTSUP;
}

int example_pipeline(const char *model, const char *devices, int stages, int micro_batches,
                     int schedule, int64_t batch, int steps, const char *plot)
{
    (void)model;
    (void)devices;
    (void)stages;
    (void)micro_batches;
    (void)schedule;
    (void)batch;
    (void)steps;
    (void)plot;
    return DP_ENOTSUP;
}
