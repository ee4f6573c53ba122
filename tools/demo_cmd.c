/* dptrain demo: the seeds' demonstrations (examples/ holds them). */
#include "cli.h"

#include "../examples/examples.h"
#include "dp/dp.h"

#include <stdio.h>
#include <string.h>

static const char usage_demo[] =
    "usage: dptrain demo NAME [options]\n"
    "\n"
    "The seeds' demonstrations, each also a program in examples/:\n"
    "  dataparallel   PyTorch's DataParallel tutorial: Linear(5, 2) on a random\n"
    "                 data set of 100 samples, batch 30; prints the chunk each\n"
    "                 replica gets\n"
    "  allreduce      d2l's allreduce check (ones * (i + 1) on device i) and the\n"
    "                 scatter of arange(20).reshape(4, 5)\n"
    "  async          MXNet's asynchronous engine: 10000 small ops waited one by\n"
    "                 one vs issued at once, wait_to_read vs waitall\n"
    "  scratch        d2l's from-scratch LeNet step (get_params, split_batch, a\n"
    "                 backward per device, allreduce, sgd) on Fashion-MNIST\n"
    "\n"
    "options (default in brackets):\n"
    "  --devices N|LIST     devices for dataparallel and allreduce [2]\n"
    "  --allreduce ALGO     ring or naive, for allreduce [ring]\n"
    "  --ops N              small ops for async [10000]\n"
    "  --steps N            training steps for scratch [20]\n"
    "  -h, --help           show this help\n";

int cmd_demo(int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        fputs(usage_demo, argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    const char *name = argv[0], *devices = "2", *algo = "ring";
    int64_t ops = 10000, steps = 20;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            fputs(usage_demo, stdout);
            return 0;
        }
        static const char *const with_value[] = {"--devices", "--allreduce", "--ops", "--steps"};
        const char *v;
        if (cli_option_value("demo", with_value, sizeof with_value / sizeof *with_value, argc, argv,
                             &i, &v))
            return 2;
        if (strcmp(f, "--devices") == 0) {
            devices = v;
        } else if (strcmp(f, "--allreduce") == 0) {
            int a = dp_allreduce_algo_parse(v);
            if (a != DP_ALLREDUCE_RING && a != DP_ALLREDUCE_NAIVE)
                return cli_bad_value(f, v, "expected ring or naive");
            algo = v;
        } else if (strcmp(f, "--steps") == 0) {
            if (cli_parse_i64(f, v, 1, 234, &steps))
                return 2;
        } else if (cli_parse_i64(f, v, 1, 100000000, &ops)) {
            return 2;
        }
    }
    int rc;
    if (strcmp(name, "dataparallel") == 0)
        rc = example_dataparallel(devices);
    else if (strcmp(name, "allreduce") == 0)
        rc = example_allreduce(devices, algo);
    else if (strcmp(name, "async") == 0)
        rc = example_async((int)ops);
    else if (strcmp(name, "scratch") == 0)
        rc = example_lenet_scratch(devices, algo, (int)steps);
    else {
        fprintf(stderr,
                "dptrain: error: unknown demo '%s' (dataparallel, allreduce, async, scratch)\n",
                name);
        return 2;
    }
    return rc < 0 ? cli_fail(rc) : 0;
}
