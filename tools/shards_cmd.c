/* dptrain shards DIR OUT: an ImageFolder directory as tar shards in
 * WebDataset's convention (dp/shards.h's dp_shards_from_folder). */
#include "cli.h"

#include "dp/dp.h"
#include "dp/shards.h"

#include <stdio.h>
#include <string.h>

typedef struct shards_args {
    const char *dir, *out;
    int64_t shard_size, max_bytes, seed;
} shards_args;

static int run_shards(int argc, char **argv);

const cli_command *cli_shards(void)
{
    static dp_option flags[3];
    static const cli_arg args[] = {
        {"DIR", "the image folder: DIR/train/CLASS/*.jpg (and DIR/test/CLASS/...)"},
        {"OUT", "the directory to write (made if missing; it must hold no shards yet)"}};
    static const shards_args defaults = {.shard_size = 1000};
    static cli_command c = {
        .name = "shards",
        .summary = "an image folder as tar shards (WebDataset's convention)",
        .usage = "dptrain shards DIR OUT [options]",
        .about = "Writes the images of DIR/train and DIR/test, listed as --dataset folder\n"
                 "lists them, as OUT/train-000000.tar, ... and OUT/test-000000.tar, ...:\n"
                 "each image is KEY.jpg, .jpeg or .png (its bytes copied, not re-encoded)\n"
                 "beside KEY.cls (its class index in decimal), and OUT/classes.txt names\n"
                 "the classes, one a line. The samples are written in an order shuffled\n"
                 "by --seed (a folder lists them class by class, and the shuffle buffer\n"
                 "of --dataset tar only mixes nearby samples); KEY is the sample's place\n"
                 "in the folder's list, so keys are unique. Each shard is written under\n"
                 "a temporary name and renamed when whole; on an error no shard of the\n"
                 "run is left. Train on the shards with --dataset tar --data OUT.",
        .args = args,
        .nargs = 2,
        .options = flags,
        .defaults = &defaults,
        .run = run_shards};
    if (c.noptions == 0) {
        int n = 0;
        flags[n++] = (dp_option){CLI_FIELD(shards_args, shard_size, "shard_size"),
                                 .flag = "--shard-size",
                                 .metavar = "N",
                                 .type = DP_OPTION_I64,
                                 .imin = 1,
                                 .imax = INT64_C(1) << 40,
                                 .help = "samples per shard"};
        flags[n++] = (dp_option){CLI_FIELD(shards_args, max_bytes, "max_bytes"),
                                 .flag = "--max-bytes",
                                 .metavar = "BYTES",
                                 .type = DP_OPTION_I64,
                                 .imin = 0,
                                 .imax = INT64_C(1) << 50,
                                 .help = "also end a shard before it passes this size (a sample "
                                         "larger than it has a shard of its own) [0: no limit]"};
        flags[n++] = (dp_option){CLI_FIELD(shards_args, seed, "seed"),
                                 .flag = "--seed",
                                 .metavar = "S",
                                 .type = DP_OPTION_I64,
                                 .imin = 0,
                                 .imax = INT64_MAX,
                                 .help = "the seed of the samples' shuffled order in the shards "
                                         "(the same seed, the same shards)"};
        c.noptions = n;
    }
    return &c;
}

/* DIR, then OUT: the arguments that are not flags. */
static int positional(void *ctx, const char *arg)
{
    shards_args *a = ctx;
    if (!a->dir)
        a->dir = arg;
    else if (!a->out)
        a->out = arg;
    else {
        fprintf(stderr, "dptrain: error: shards: one folder and one output, got a third: '%s'\n",
                arg);
        return 2;
    }
    return 0;
}

static void progress(void *user, const char *shard, int64_t done, int64_t samples)
{
    (void)user;
    fprintf(stderr, "dptrain: shards: wrote %s (%lld of %lld samples)\n", shard, (long long)done,
            (long long)samples);
}

static int run_shards(int argc, char **argv)
{
    shards_args a = {.shard_size = 1000};
    bool help;
    int status = cli_parse(cli_shards(), argc, argv, &a, NULL, &help, positional, &a, NULL);
    if (status || help) {
        if (help)
            cli_print_help(cli_shards(), stdout);
        return status;
    }
    if (!a.dir || !a.out) {
        fprintf(stderr, "dptrain: error: shards needs DIR and OUT (dptrain shards DIR OUT)\n");
        return 2;
    }
    dp_shard_write_options o = {.shard_size = a.shard_size,
                                .max_bytes = a.max_bytes,
                                .seed = (uint64_t)a.seed,
                                .progress = progress};
    int rc = dp_shards_from_folder(a.dir, a.out, &o);
    if (rc < 0)
        return cli_fail(rc);
    dp_shard_set_t *train = NULL, *test = NULL;
    rc = dp_shard_set_open(&train, a.out, "train");
    char test_first[4200];
    snprintf(test_first, sizeof test_first, "%s/test-000000.tar", a.out);
    FILE *f = fopen(test_first, "rb");
    if (f) {
        fclose(f);
        if (rc == 0)
            rc = dp_shard_set_open(&test, a.out, "test");
    }
    if (rc == 0)
        printf("wrote %s: train %lld samples in %d shards, test %lld in %d, %d classes\n", a.out,
               (long long)dp_shard_set_samples(train), dp_shard_set_shards(train),
               test ? (long long)dp_shard_set_samples(test) : 0LL,
               test ? dp_shard_set_shards(test) : 0, dp_shard_set_classes(train));
    dp_shard_set_close(train);
    dp_shard_set_close(test);
    return rc < 0 ? cli_fail(rc) : 0;
}
