/* dptrain train: the seed's train() on Fashion-MNIST, MNIST, CIFAR-10 or
 * your own data (a folder of images, .npy files). */
#include "cli.h"

#include "dp/dp.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char about[] =
    "Trains a model on a dataset (Fashion-MNIST by default), evaluates on its\n"
    "test set after every epoch, and ends with the line\n"
    "'test acc: A, S sec/epoch on [DEVICES]'.";

static int run_train(int argc, char **argv);

const cli_command *cli_train(void)
{
    static cli_command c;
    static dp_train_options defaults;
    if (!c.name) {
        dp_train_options_default(&defaults);
        c = (cli_command){.name = "train",
                          .summary = "train a model on Fashion-MNIST, MNIST, CIFAR-10, a folder "
                                     "of images or .npy files (train --help)",
                          .usage = "dptrain train [options]",
                          .about = about,
                          .defaults = &defaults,
                          .run = run_train};
        c.options = dp_train_option_list(&c.noptions);
    }
    return &c;
}

/* Whether option `name` was on the command line. */
static bool was_given(const bool *given, const char *name)
{
    int count;
    const dp_option *list = dp_train_option_list(&count);
    return given[dp_train_option_find(name) - list];
}

/* The command line's own defaults, which depend on other flags. */
static int front_end_defaults(dp_train_options *o, const bool *given)
{
    /* --split-invariant's sums are deterministic. */
    if (o->numerics.split_invariant)
        o->numerics.deterministic = true;
    /* --init-normal STD draws the weights N(0, STD^2). */
    if (was_given(given, "init_std"))
        o->net.weight_init = DP_WEIGHTS_NORMAL;
    /* AdamW's weight decay default is PyTorch's, 0.01. */
    if (o->optim.optimizer == DP_OPTIMIZER_ADAMW && !was_given(given, "weight_decay"))
        o->optim.weight_decay = 0.01f;
    if (was_given(given, "conv_algo"))
        return 0;
    /* Measuring kernels picks by timing: two fresh runs could pick
     * differently, so --deterministic runs the direct ones unless asked. */
    o->numerics.conv_algo = o->numerics.deterministic ? DP_CONV_ALGO_DIRECT : DP_CONV_ALGO_AUTO;
    /* The environment's default, for a machine (or a test suite) that runs
     * many short trainings and would rather not time the kernels in each. */
    const char *env_algo = getenv("DPTRAIN_CONV_ALGO");
    int algo;
    if (!env_algo || !*env_algo)
        return 0;
    if (dp_name_parse(&dp_conv_algo_names, env_algo, &algo) < 0) {
        char names[128];
        fprintf(stderr, "dptrain: error: DPTRAIN_CONV_ALGO=%s: expected %s\n", env_algo,
                dp_name_choices(&dp_conv_algo_names, names, sizeof names));
        return 2;
    }
    o->numerics.conv_algo = (dp_conv_algo)algo;
    return 0;
}

int cli_train_parse(int argc, char **argv, dp_train_options *out, bool *help)
{
    dp_train_options o;
    dp_train_options_default(&o);
    bool given[DP_TRAIN_OPTION_COUNT] = {false};
    int rc = cli_parse(cli_train(), argc, argv, &o, given, help, NULL, NULL, NULL);
    if (rc || *help)
        return rc;
    if (front_end_defaults(&o, given))
        return 2;
    cli_verbose = cli_verbose || o.output.verbose;
    /* Each bad combination is one line naming the flags (cli.c). */
    if (dp_train_options_check(&o) < 0)
        return 2;
    *out = o;
    return 0;
}

static int run_train(int argc, char **argv)

{
    dp_train_options o;
    bool help;
    int status = cli_train_parse(argc, argv, &o, &help);
    if (status != 0)
        return status;
    if (help) {
        cli_print_help(cli_train(), stdout);
        return 0;
    }
    dp_train_result r;
    int rc = dp_train(&o, &r);
    if (rc == DP_EINTR && dp_dist_rank() != 0)
        return 128 + (dp_train_stop_signal() > 0 ? dp_train_stop_signal() : SIGTERM);
    if (rc == DP_EINTR) {
        int signo = dp_train_stop_signal();
        fprintf(stderr,
                "dptrain: stopped by %s before epoch %d batch %lld; saved %s; go on with the same "
                "command and --resume %s\n",
                signo == SIGINT ? "SIGINT" : "SIGTERM", r.stopped_epoch, (long long)r.stopped_batch,
                r.checkpoint, r.checkpoint);
        return 128 + (signo > 0 ? signo : SIGTERM);
    }
    if (rc < 0)
        return cli_fail(rc);
    for (int k = 0; dp_dist_rank() == 0 && k < r.pipeline_stages; k++)
        printf("stage %d (layers %d-%d): %lld parameters (%.2f MB), activations at most %.2f MB\n",
               k, r.stage_first[k], r.stage_first[k + 1] - 1, (long long)r.stage_params[k],
               (double)r.stage_params[k] * 4 / 1e6, (double)r.stage_activation_bytes[k] / 1e6);
    if (dp_dist_rank() == 0 && r.early_stopped)
        printf("stopped early after epoch %d: no better test accuracy for %d epochs\n",
               r.epochs_done, o.checkpoint.early_stop);
    const char *best = o.checkpoint.save_best_path;
    if (dp_dist_rank() == 0 && (best || o.checkpoint.early_stop))
        printf("best test acc: %.4f after epoch %d%s%s\n", r.best_test_acc, r.best_epoch,
               best ? ", kept in " : "", best ? best : "");
    if (dp_dist_rank() == 0)
        printf("test acc: %.2f, %.1f sec/epoch on %s\n", r.test_acc, r.sec_per_epoch, r.devices);
    return 0;
}
