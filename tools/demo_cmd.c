/* dptrain demo: the seeds' demonstrations (examples/ holds them). */
#include "cli.h"

#include "../examples/examples.h"
#include "dp/dp.h"

#include <stdio.h>
#include <string.h>

/* The demonstrations, each also a program in examples/. */
static const cli_arg demos[] = {
    {"dataparallel", "PyTorch's DataParallel tutorial: Linear(5, 2) on a random data set of 100 "
                     "samples, batch 30; prints the chunk each replica gets"},
    {"allreduce", "d2l's allreduce check (ones * (i + 1) on device i) and the scatter of "
                  "arange(20).reshape(4, 5)"},
    {"async", "MXNet's asynchronous engine: 10000 small ops waited one by one vs issued at "
              "once, wait_to_read vs waitall"},
    {"scratch", "d2l's from-scratch LeNet step (get_params, split_batch, a backward per device, "
                "allreduce, sgd) on Fashion-MNIST"},
    {"pipeline", "model parallelism: a model in pipeline stages, each batch in micro-batches; "
                 "prints one step's timeline as the devices ran it, the idle bubble marked"},
};
enum { NDEMOS = sizeof demos / sizeof *demos };

static int ring_or_naive(const char *text, void *field, char *why, size_t size)
{
    (void)field;
    if (strcmp(text, "ring") == 0 || strcmp(text, "naive") == 0)
        return 0;
    snprintf(why, size, "expected ring or naive");
    return DP_EINVAL;
}

static int run_demo(int argc, char **argv);

const cli_command *cli_demo(void)
{
    typedef struct cli_demo_options demo;
    static dp_option flags[11];
    static const demo defaults = {.algo = "ring",
                                  .ops = 10000,
                                  .model = "resnet18",
                                  .pipeline = 2,
                                  .micro_batches = 4,
                                  .batch = 32};
    static cli_command c = {.name = "demo",
                            .summary = "the seeds' demonstrations: dataparallel, allreduce, "
                                       "async, scratch, pipeline",
                            .usage = "dptrain demo NAME [options]",
                            .about = "The seeds' demonstrations, each also a program in examples/.",
                            .args = demos,
                            .nargs = NDEMOS,
                            .options = flags,
                            .defaults = &defaults,
                            .run = run_demo};
    if (c.noptions == 0) {
        int n = 0;
        flags[n++] = CLI_LIKE(demo, devices, "devices",
                              "devices for dataparallel, allreduce and pipeline [2; pipeline: the "
                              "stage count]");
        flags[n++] = (dp_option){CLI_FIELD(demo, algo, "allreduce"),
                                 .flag = "--allreduce",
                                 .metavar = "ALGO",
                                 .type = DP_OPTION_TEXT,
                                 .parse = ring_or_naive,
                                 .help = "ring or naive, for allreduce"};
        flags[n++] = (dp_option){CLI_FIELD(demo, ops, "ops"),  .flag = "--ops", .metavar = "N",
                                 .type = DP_OPTION_I64,        .imin = 1,       .imax = 100000000,
                                 .help = "small ops for async"};
        flags[n++] = (dp_option){CLI_FIELD(demo, steps, "steps"),
                                 .flag = "--steps",
                                 .metavar = "N",
                                 .type = DP_OPTION_I64,
                                 .imin = 1,
                                 .imax = 234,
                                 .help = "training steps for scratch [20] and pipeline, which "
                                         "shows the last [3]"};
        flags[n++] = CLI_LIKE(demo, model, "model", "the model for pipeline");
        flags[n++] = (dp_option){CLI_FIELD(demo, pipeline, "pipeline"),
                                 .flag = "--pipeline",
                                 .metavar = "K",
                                 .type = DP_OPTION_I64,
                                 .imin = 2,
                                 .imax = DP_PIPELINE_MAX_STAGES,
                                 .help = "pipeline stages"};
        flags[n++] = (dp_option){CLI_FIELD(demo, micro_batches, "micro_batches"),
                                 .flag = "--micro-batches",
                                 .metavar = "M",
                                 .type = DP_OPTION_I64,
                                 .imin = 1,
                                 .imax = DP_PIPELINE_MAX_MICRO_BATCHES,
                                 .help = "micro-batches per batch"};
        flags[n++] = CLI_LIKE(demo, schedule, "pipeline_schedule", "1f1b or gpipe");
        flags[n++] = (dp_option){CLI_FIELD(demo, batch, "batch_size"),
                                 .flag = "--batch-size",
                                 .metavar = "B",
                                 .type = DP_OPTION_I64,
                                 .imin = 1,
                                 .imax = 1 << 16,
                                 .help = "batch of random 1x28x28 images, for pipeline"};
        flags[n++] = CLI_LIKE(demo, plot, "plot_path",
                              "pipeline: also draw the timeline as a Gantt chart to FILE.png or "
                              "FILE.svg");
        flags[n++] = (dp_option){CLI_FIELD(demo, checkpoint, "checkpoint"), .flag = "--checkpoint",
                                 .metavar = "FILE", .type = DP_OPTION_TEXT,
                                 .help = "scratch: write device 0's weights to FILE "
                                         "(safetensors) after the steps"};
        c.noptions = n;
    }
    return &c;
}

int cli_demo_parse(int argc, char **argv, struct cli_demo_options *out, bool *help)
{
    const cli_command *c = cli_demo();
    *help = false;
    if (argc < 1) {
        cli_print_help(c, stderr);
        return 2;
    }
    if (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "--help") == 0) {
        *help = true;
        return 0;
    }
    struct cli_demo_options o = *(const struct cli_demo_options *)c->defaults;
    o.name = argv[0];
    int rc = cli_parse(c, argc - 1, argv + 1, &o, NULL, help, NULL, NULL, NULL);
    if (rc || *help)
        return rc;
    int k = 0;
    while (k < NDEMOS && strcmp(o.name, demos[k].name) != 0)
        k++;
    if (k == NDEMOS) {
        fprintf(stderr, "dptrain: error: unknown demo '%s' (", o.name);
        for (int i = 0; i < NDEMOS; i++)
            fprintf(stderr, "%s%s", i ? ", " : "", demos[i].name);
        fprintf(stderr, ")\n");
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

static int run_demo(int argc, char **argv)

{
    struct cli_demo_options o;
    bool help;
    int status = cli_demo_parse(argc, argv, &o, &help);
    if (status != 0)
        return status;
    if (help) {
        cli_print_help(cli_demo(), stdout);
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
