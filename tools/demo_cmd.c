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
    "  pipeline       model parallelism: a model in pipeline stages, each batch\n"
    "                 in micro-batches; prints one step's timeline as the\n"
    "                 devices ran it, the idle bubble marked\n"
    "\n"
    "options (default in brackets):\n"
    "  --devices N|LIST     devices for dataparallel, allreduce and pipeline\n"
    "                       [2; pipeline: the stage count]\n"
    "  --allreduce ALGO     ring or naive, for allreduce [ring]\n"
    "  --ops N              small ops for async [10000]\n"
    "  --steps N            training steps for scratch [20] and pipeline, which\n"
    "                       shows the last [3]\n"
    "  --model NAME|FILE    the model for pipeline [resnet18]\n"
    "  --pipeline K         pipeline stages [2]\n"
    "  --micro-batches M    micro-batches per batch [4]\n"
    "  --schedule S         1f1b or gpipe [1f1b]\n"
    "  --batch-size B       batch of random 1x28x28 images, for pipeline [32]\n"
    "  --plot FILE          pipeline: also draw the timeline as a Gantt chart\n"
    "                       to FILE.png or FILE.svg [none]\n"
    "  --checkpoint FILE    scratch: write device 0's weights to FILE\n"
    "                       (safetensors) after the steps [none]\n"
    "  -h, --help           show this help\n";

int cli_demo_parse(int argc, char **argv, struct cli_demo_options *out, bool *help)
{
    *help = false;
    if (argc < 1) {
        fputs(usage_demo, stderr);
        return 2;
    }
    if (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        *help = true;
        return 0;
    }
    struct cli_demo_options o = {.name = argv[0],
                                 .devices = NULL,
                                 .algo = "ring",
                                 .ops = 10000,
                                 .steps = 0,
                                 .model = "resnet18",
                                 .pipeline = 2,
                                 .micro_batches = 4,
                                 .batch = 32};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            *help = true;
            return 0;
        }
        static const char *const with_value[] = {"--devices",       "--allreduce", "--ops",
                                                 "--steps",         "--model",     "--pipeline",
                                                 "--micro-batches", "--schedule",  "--batch-size",
                                                 "--plot",          "--checkpoint"};
        const char *v;
        if (cli_option_value("demo", with_value, sizeof with_value / sizeof *with_value, argc, argv,
                             &i, &v))
            return 2;
        if (strcmp(f, "--devices") == 0) {
            o.devices = v;
        } else if (strcmp(f, "--allreduce") == 0) {
            int a = DP_ALLREDUCE_AUTO;
            dp_name_parse(&dp_allreduce_algo_names, v, &a);
            if (a != DP_ALLREDUCE_RING && a != DP_ALLREDUCE_NAIVE)
                return cli_bad_value(f, v, "expected ring or naive");
            o.algo = v;
        } else if (strcmp(f, "--steps") == 0) {
            if (cli_parse_i64(f, v, 1, 234, &o.steps))
                return 2;
        } else if (strcmp(f, "--model") == 0) {
            if (cli_check_model(f, v))
                return 2;
            o.model = v;
        } else if (strcmp(f, "--pipeline") == 0) {
            if (cli_parse_i64(f, v, 2, DP_PIPELINE_MAX_STAGES, &o.pipeline))
                return 2;
        } else if (strcmp(f, "--micro-batches") == 0) {
            if (cli_parse_i64(f, v, 1, DP_PIPELINE_MAX_MICRO_BATCHES, &o.micro_batches))
                return 2;
        } else if (strcmp(f, "--batch-size") == 0) {
            if (cli_parse_i64(f, v, 1, 1 << 16, &o.batch))
                return 2;
        } else if (strcmp(f, "--schedule") == 0) {
            if (cli_parse_name(f, v, &dp_pipeline_schedule_names, &o.schedule))
                return 2;
        } else if (strcmp(f, "--plot") == 0) {
            if (cli_check_plot_path(f, v))
                return 2;
            o.plot = v;
        } else if (strcmp(f, "--checkpoint") == 0) {
            o.checkpoint = v;
        } else if (cli_parse_i64(f, v, 1, 100000000, &o.ops)) {
            return 2;
        }
    }
    if (strcmp(o.name, "dataparallel") && strcmp(o.name, "allreduce") && strcmp(o.name, "async") &&
        strcmp(o.name, "scratch") && strcmp(o.name, "pipeline")) {
        fprintf(stderr,
                "dptrain: error: unknown demo '%s' (dataparallel, allreduce, async, scratch, "
                "pipeline)\n",
                o.name);
        return 2;
    }
    bool pipeline = strcmp(o.name, "pipeline") == 0;
    if (!o.steps)
        o.steps = pipeline ? 3 : 20;
    if (!o.devices) {
        static char k_devices[16];
        snprintf(k_devices, sizeof k_devices, "%lld", (long long)o.pipeline);
        o.devices = pipeline ? k_devices : "2";
    }
    *out = o;
    return 0;
}

int cmd_demo(int argc, char **argv)
{
    struct cli_demo_options o;
    bool help;
    int status = cli_demo_parse(argc, argv, &o, &help);
    if (status != 0)
        return status;
    if (help) {
        fputs(usage_demo, stdout);
        return 0;
    }
    /* The Gantt chart is drawn after the steps: a file that cannot be
     * written is refused before them. */
    if (o.plot && dp_check_output_file(o.plot, "plot") < 0)
        return 1;
    if (o.checkpoint && dp_check_output_file(o.checkpoint, "checkpoint") < 0)
        return 1;
    /* cli_demo_parse accepted the name: it is one of these five. */
    int rc;
    if (strcmp(o.name, "dataparallel") == 0)
        rc = example_dataparallel(o.devices);
    else if (strcmp(o.name, "allreduce") == 0)
        rc = example_allreduce(o.devices, o.algo);
    else if (strcmp(o.name, "async") == 0)
        rc = example_async((int)o.ops);
    else if (strcmp(o.name, "pipeline") == 0)
        rc = example_pipeline(o.model, o.devices, (int)o.pipeline, (int)o.micro_batches, o.schedule,
                              o.batch, (int)o.steps, o.plot);
    else
        rc = example_lenet_scratch(o.devices, o.algo, (int)o.steps, o.checkpoint);
    return rc < 0 ? cli_fail(rc) : 0;
}
