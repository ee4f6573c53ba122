/* dptrain - the command line. The only place that prints results to stdout
 * and turns status codes into exit statuses. */
#include "dp/dp.h"

#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_main[] =
    "usage: dptrain <command> [options]\n"
    "\n"
    "Trains convolutional networks data-parallel across devices.\n"
    "\n"
    "commands:\n"
    "  train     train a model on Fashion-MNIST, MNIST, CIFAR-10, a folder of\n"
    "            images or .npy files (train --help)\n"
    "  eval      test accuracy of a checkpoint's weights\n"
    "  predict   classify PNG or JPEG images (or a .npy batch) with a checkpoint\n"
    "  model     a model's layers, parameters and FLOPs (dptrain model lenet)\n"
    "  export    a checkpoint's model as an ONNX file\n"
    "  devices   list the devices, and with --bench measure them\n"
    "  demo      the seeds' demonstrations: dataparallel, allreduce, async,\n"
    "            scratch, pipeline\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help\n"
    "  --version      print the version\n";

/* Library messages name options by meaning; here they get this tool's flag
 * names. Under mpirun an error names its rank, and warnings come from rank
 * 0 only (every rank would print the same). */
static void log_to_stderr(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    char with_flags[2048];
    msg = cli_with_flags(msg, with_flags, sizeof with_flags);
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

static int run_command(int argc, char **argv)
{
    if (strcmp(argv[1], "train") == 0)
        return cmd_train(argc - 2, argv + 2);
    if (strcmp(argv[1], "eval") == 0)
        return cmd_eval(argc - 2, argv + 2);
    if (strcmp(argv[1], "predict") == 0)
        return cmd_predict(argc - 2, argv + 2);
    if (strcmp(argv[1], "demo") == 0)
        return cmd_demo(argc - 2, argv + 2);
    if (strcmp(argv[1], "devices") == 0)
        return cmd_devices(argc - 2, argv + 2);
    if (strcmp(argv[1], "model") == 0)
        return cmd_model(argc - 2, argv + 2);
    if (strcmp(argv[1], "export") == 0)
        return cmd_export(argc - 2, argv + 2);
    fprintf(stderr, "dptrain: error: unknown command '%s' (see dptrain --help)\n", argv[1]);
    return 2;
}

int main(int argc, char **argv)
{
    dp_log_set(log_to_stderr, NULL);
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(usage_main, argc < 2 ? stderr : stdout);
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
    int status = run_command(argc, argv);
    if (status != 0 && status < 128 && dp_dist_size() > 1) {
        fprintf(stderr, "dptrain: rank %d on %s failed (exit %d): ending all %d ranks\n",
                dp_dist_rank(), dp_dist_host(), status, dp_dist_size());
        dp_dist_abort(status);
    }
    dp_dist_finalize();
    return status;
}
