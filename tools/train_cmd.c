/* dptrain train: the seed's train() on Fashion-MNIST, MNIST, CIFAR-10 or
 * your own data (a folder of images, .npy files). */
#include "cli.h"

#include "dp/dp.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* SIGINT and SIGTERM ask the run to stop after its current step and save
 * itself; a second signal ends it at once (the handler resets itself). */
static void on_stop_signal(int signo)
{
    dp_train_request_stop(signo);
}

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static const char usage_train[] =
    "usage: dptrain train [options]\n"
    "\n"
    "Trains a model on a dataset (Fashion-MNIST by default), evaluates on its\n"
    "test set after every epoch, and ends with the line\n"
    "'test acc: A, S sec/epoch on [DEVICES]'.\n"
    "\n"
    "options (default in brackets):\n"
    "  --model NAME|FILE    model: lenet, resnet18, or a file of nn.Sequential\n"
    "                       modules, one a line [lenet]\n"
    "  --devices N|LIST     N devices (the first N GPUs, else N CPU devices),\n"
    "                       a list like cpu:0,cpu:1, or auto (every core, in\n"
    "                       the split that trains fastest here) [1]\n"
    "  --allreduce ALGO     how gradients are summed across devices: ring,\n"
    "                       naive (sum on the first device, copy back) or nccl\n"
    "                       [nccl across GPUs, else ring; naive for 3 or more\n"
    "                       devices with --split-invariant]\n"
    "  --threads N          kernel threads per device, 0 = all cores divided\n"
    "                       among the devices [0]\n"
    "  --batch-size B       global batch size [256]\n"
    "  --lr LR              learning rate [0.2]\n"
    "  --momentum M         SGD momentum [0]\n"
    "  --weight-decay WD    weight decay: added to the gradient (SGD, Adam) or\n"
    "                       decoupled (AdamW) [0; adamw: 0.01]\n";

static const char usage_train_rest[] =
    "  --epochs E           epochs, 1 to 1000 [10]\n"
    "  --seed S             seed for weights and shuffling [0]\n"
    "  --init-normal STD    draw the weights N(0, STD^2), as the seeds do\n"
    "                       [each module's own: PyTorch's default for files]\n"
    "  --init-xavier        draw the weights Xavier-uniform, as d2l's LeNet\n"
    "                       chapter does [off]\n"
    "  --dataset NAME       fashion-mnist, mnist (the four IDX files, gzipped\n"
    "                       or not), cifar10 (the binary version's .bin\n"
    "                       files), folder (DIR/train/CLASS/*.png|*.jpg and\n"
    "                       DIR/test/CLASS/*, as torchvision's ImageFolder)\n"
    "                       or npy (DIR/train/images.npy, labels.npy and\n"
    "                       DIR/test/...) [fashion-mnist]\n"
    "  --data DIR           directory with the dataset's files [fashion-mnist:\n"
    "                       /usr/share/datasets/fashion-mnist; the others:\n"
    "                       required]\n"
    "  --metrics FILE       write one JSON object per epoch to FILE [none]\n"
    "  --log-steps          with --metrics, also one JSON object per step [off]\n"
    "  --plot FILE          draw the curves to FILE.png or FILE.svg [none]\n"
    "  --no-shuffle         take batches in file order [shuffle]\n"
    "  --limit-train N      use the first N training samples, 0 = all [0]\n"
    "  --limit-test N       use the first N test samples, 0 = all [0]\n"
    "  --sync-bn            batch norm statistics over all devices together\n"
    "                       (SyncBatchNorm), not each device's shard [off]\n"
    "  --bucket-mb MB       sum the gradients in buckets of MB MiB (the first\n"
    "                       1 MiB) while the backward pass runs, as PyTorch's\n"
    "                       DDP; 0 = one allreduce after the backward [25]\n"
    "  --grad-compress C    none, or bf16: gradients cross process boundaries\n"
    "                       (MPI ranks) as bfloat16, summed in float32 [none]\n"
    "  --pipeline K         model parallelism: split the model into K stages of\n"
    "                       about equal FLOPs on K devices; --devices D*K runs\n"
    "                       D such pipelines data-parallel; 1 stage with\n"
    "                       --micro-batches M is gradient accumulation [off]\n"
    "  --stages LIST        the stages' layers as `dptrain model` numbers them,\n"
    "                       e.g. 0-3,4-7 [balanced by FLOPs]\n"
    "  --micro-batches M    with --pipeline, split each batch (each pipeline's\n"
    "                       share) into M micro-batches [1]\n"
    "  --schedule S         with --pipeline: 1f1b (at most K micro-batches'\n"
    "                       activations alive per stage) or gpipe (all\n"
    "                       forwards, then all backwards) [1f1b]\n"
    "  --verbose            print the gradient buckets, the convolution kernels\n"
    "                       chosen and the library's notes [off]\n"
    "  --checkpoint FILE    write weights and training state to FILE (safetensors,\n"
    "                       PyTorch's state_dict names) after every epoch, and on\n"
    "                       SIGINT/SIGTERM after the current step [none; a\n"
    "                       stopped run writes dptrain-interrupted.safetensors]\n"
    "  --save-best FILE     also keep the checkpoint of the best test accuracy so\n"
    "                       far in FILE, written after each epoch that beats it\n"
    "                       [none]\n"
    "  --early-stop N       end the run after N epochs without a better test\n"
    "                       accuracy [off]\n"
    "  --resume FILE        go on from a checkpoint: same weights, momentum, seed\n"
    "                       and data order as if never stopped [none]\n"
    "  --init FILE          start from the weights in FILE (a checkpoint or a\n"
    "                       PyTorch state dict in safetensors) [the seed's init]\n"
    "  --on-checkpoint-error stop|continue\n"
    "                       when writing a checkpoint fails (disk full, I/O\n"
    "                       error; the previous one stays intact): stop, or\n"
    "                       warn and train on, trying again next epoch [stop]\n"
    "  --skip-nonfinite     skip a step whose gradient holds a NaN or an Inf\n"
    "                       (warn, count it in --metrics) instead of stopping;\n"
    "                       either way a bad step is never applied [stop]\n"
    "  --deterministic      bit-identical weights from runs with the same seed,\n"
    "                       devices and --threads (CPU devices are; another\n"
    "                       device count changes the summation order) [off]\n"
    "  --split-invariant R  sum every gradient over the batch in blocks of R\n"
    "                       samples added pairwise in a fixed tree (batch norm's\n"
    "                       statistics too), so that 1 device, 2 or 4 devices,\n"
    "                       mpirun -np 2 and a pipeline's micro-batches give the\n"
    "                       same bits (with --sync-bn where the model has batch\n"
    "                       norm, and the same --threads per device); the batch\n"
    "                       must be R times a power of two; implies\n"
    "                       --deterministic [off]\n"
    "  --progress MODE      progress bar on stderr: auto, always, never [auto]\n"
    "  --precision P        fp32; bf16 (convolutions and matrix products on bf16\n"
    "                       operands, f32 sums, as torch.autocast on the CPU:\n"
    "                       needs avx512_bf16 or amx_bf16); or bf16-reference\n"
    "                       (the same arithmetic on f32 kernels, slower: to\n"
    "                       check bf16's accuracy on any CPU) [fp32]\n"
    "  --conv-algo A        convolution kernels: auto (each shape's fastest,\n"
    "                       timed once before the first step and kept in the\n"
    "                       checkpoint), direct, or winograd (f32 3x3 where the\n"
    "                       CPU has it) [auto; direct with --deterministic;\n"
    "                       the environment's DPTRAIN_CONV_ALGO where set]\n"
    "  --no-tf32            GPU convolutions in full float32; by default cuDNN\n"
    "                       may use TF32, as PyTorch allows (matrix products\n"
    "                       are float32 either way) [TF32 allowed]\n"
    "  -h, --help           show this help\n";

_Static_assert(DP_MAX_EPOCHS == 1000, "--help says 1 to 1000 epochs");

int cli_train_parse(int argc, char **argv, dp_train_options *out, bool *help)
{
    dp_train_options o;
    dp_train_options_default(&o);
    const char *progress = "auto";
    bool conv_algo_given = false, wd_given = false;
    *help = false;
    for (int i = 0; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            *help = true;
            return 0;
        }
        if (strcmp(f, "--log-steps") == 0) {
            o.log_steps = true;
            continue;
        }
        if (strcmp(f, "--sync-bn") == 0) {
            o.sync_bn = true;
            continue;
        }
        if (strcmp(f, "--no-shuffle") == 0) {
            o.shuffle = false;
            continue;
        }
        if (strcmp(f, "--skip-nonfinite") == 0) {
            o.skip_nonfinite = true;
            continue;
        }
        if (strcmp(f, "--deterministic") == 0) {
            o.deterministic = true;
            continue;
        }
        if (strcmp(f, "--init-xavier") == 0) {
            o.weight_init = DP_WEIGHTS_XAVIER;
            continue;
        }
        if (strcmp(f, "--no-tf32") == 0) {
            o.no_tf32 = true;
            continue;
        }
        if (strcmp(f, "--nesterov") == 0) {
            o.nesterov = true;
            continue;
        }
        if (strcmp(f, "--verbose") == 0) {
            o.verbose = true;
            cli_verbose = true;
            continue;
        }
        /* clang-format off */
        static const char *const own[] = {
            "--model",       "--devices",     "--threads",       "--batch-size",
            "--lr",          "--epochs",      "--seed",          "--data",
            "--metrics",     "--plot",        "--momentum",      "--weight-decay",
            "--limit-train", "--limit-test",  "--progress",      "--allreduce",
            "--checkpoint",  "--resume",      "--init",          "--on-checkpoint-error",
            "--dataset",     "--init-normal", "--bucket-mb",     "--grad-compress",
            "--pipeline",    "--stages",      "--micro-batches", "--schedule",
            "--precision",   "--conv-algo",   "--save-best",     "--early-stop",
            "--split-invariant"};
        /* clang-format on */
        const char *with_value[sizeof own / sizeof *own + 32];
        size_t nv = 0;
        for (size_t k = 0; k < sizeof own / sizeof *own; k++)
            with_value[nv++] = own[k];
        for (size_t k = 0; cli_train_recipe_flags[k]; k++)
            with_value[nv++] = cli_train_recipe_flags[k];
        for (size_t k = 0; cli_train_tensorboard_flags[k]; k++)
            with_value[nv++] = cli_train_tensorboard_flags[k];
        for (size_t k = 0; cli_train_data_flags[k]; k++)
            with_value[nv++] = cli_train_data_flags[k];
        for (size_t k = 0; cli_train_augment_flags[k]; k++)
            with_value[nv++] = cli_train_augment_flags[k];
        const char *v;
        if (cli_option_value("train", with_value, nv, argc, argv, &i, &v))
            return 2;
        int recipe = cli_train_recipe_flag(f, v, &o);
        if (recipe < 0)
            recipe = cli_train_tensorboard_flag(f, v, &o);
        if (recipe < 0)
            recipe = cli_train_data_flag(f, v, &o);
        if (recipe < 0)
            recipe = cli_train_augment_flag(f, v, &o);
        if (recipe >= 0) {
            if (recipe)
                return recipe;
            continue;
        }
        int64_t n;
        int rc = 0;
        if (strcmp(f, "--model") == 0) {
            if (cli_check_model(f, v))
                return 2;
            o.model = v;
        } else if (strcmp(f, "--devices") == 0) {
            o.devices = v;
        } else if (strcmp(f, "--threads") == 0) {
            if (!(rc = cli_parse_i64(f, v, 0, 1024, &n)))
                o.threads = (int)n;
        } else if (strcmp(f, "--batch-size") == 0) {
            if (!(rc = cli_parse_i64(f, v, 1, 1 << 20, &n)))
                o.batch_size = n;
        } else if (strcmp(f, "--lr") == 0) {
            rc = cli_parse_float(f, v, 0, 1e6, true, &o.lr);
        } else if (strcmp(f, "--init-normal") == 0) {
            rc = cli_parse_float(f, v, 0, 10, true, &o.init_std);
            o.weight_init = DP_WEIGHTS_NORMAL;
        } else if (strcmp(f, "--momentum") == 0) {
            rc = cli_parse_float(f, v, 0, 0.999999, false, &o.momentum);
        } else if (strcmp(f, "--weight-decay") == 0) {
            rc = cli_parse_float(f, v, 0, 1e3, false, &o.weight_decay);
            wd_given = true;
        } else if (strcmp(f, "--epochs") == 0) {
            if (!(rc = cli_parse_i64(f, v, 1, DP_MAX_EPOCHS, &n)))
                o.epochs = (int)n;
        } else if (strcmp(f, "--seed") == 0) {
            if (!(rc = cli_parse_i64(f, v, 0, INT64_MAX, &n)))
                o.seed = (uint64_t)n;
        } else if (strcmp(f, "--dataset") == 0) {
            rc = cli_parse_dataset(f, v, &o.dataset);
        } else if (strcmp(f, "--data") == 0) {
            o.data_dir = v;
        } else if (strcmp(f, "--metrics") == 0) {
            o.metrics_path = v;
        } else if (strcmp(f, "--plot") == 0) {
            if (cli_check_plot_path(f, v))
                return 2;
            o.plot_path = v;
        } else if (strcmp(f, "--limit-train") == 0) {
            if (!(rc = cli_parse_i64(f, v, 0, INT64_MAX, &n)))
                o.limit_train = n;
        } else if (strcmp(f, "--limit-test") == 0) {
            if (!(rc = cli_parse_i64(f, v, 0, INT64_MAX, &n)))
                o.limit_test = n;
        } else if (strcmp(f, "--checkpoint") == 0) {
            o.checkpoint_path = v;
        } else if (strcmp(f, "--resume") == 0) {
            o.resume_path = v;
        } else if (strcmp(f, "--save-best") == 0) {
            o.save_best_path = v;
        } else if (strcmp(f, "--early-stop") == 0) {
            if (!(rc = cli_parse_i64(f, v, 1, DP_MAX_EPOCHS, &n)))
                o.early_stop = (int)n;
        } else if (strcmp(f, "--init") == 0) {
            o.init_path = v;
        } else if (strcmp(f, "--allreduce") == 0) {
            rc = cli_parse_name(f, v, &dp_allreduce_algo_names, &o.allreduce);
        } else if (strcmp(f, "--bucket-mb") == 0) {
            float mb;
            if (!(rc = cli_parse_float(f, v, 0, 1e6, false, &mb)))
                o.bucket_mb = mb;
        } else if (strcmp(f, "--pipeline") == 0) {
            if (!(rc = cli_parse_i64(f, v, 1, DP_PIPELINE_MAX_STAGES, &n)))
                o.pipeline = (int)n;
        } else if (strcmp(f, "--stages") == 0) {
            o.stages = v;
        } else if (strcmp(f, "--split-invariant") == 0) {
            if (!(rc = cli_parse_i64(f, v, 1, 1 << 20, &n))) {
                o.split_invariant = n;
                o.deterministic = true;
            }
        } else if (strcmp(f, "--micro-batches") == 0) {
            if (!(rc = cli_parse_i64(f, v, 1, DP_PIPELINE_MAX_MICRO_BATCHES, &n)))
                o.micro_batches = (int)n;
        } else if (strcmp(f, "--schedule") == 0) {
            rc = cli_parse_name(f, v, &dp_pipeline_schedule_names, &o.schedule);
        } else if (strcmp(f, "--precision") == 0) {
            rc = cli_parse_name(f, v, &dp_precision_names, &o.precision);
        } else if (strcmp(f, "--conv-algo") == 0) {
            rc = cli_parse_name(f, v, &dp_conv_algo_names, &o.conv_algo);
            conv_algo_given = true;
        } else if (strcmp(f, "--grad-compress") == 0) {
            rc = cli_parse_name(f, v, &dp_grad_compress_names, &o.grad_compress);
        } else if (strcmp(f, "--on-checkpoint-error") == 0) {
            if (strcmp(v, "stop") == 0)
                o.on_checkpoint_error = DP_ON_ERROR_STOP;
            else if (strcmp(v, "continue") == 0)
                o.on_checkpoint_error = DP_ON_ERROR_CONTINUE;
            else
                return cli_bad_value(f, v, "expected stop or continue");
        } else if (strcmp(f, "--progress") == 0) {
            if (strcmp(v, "auto") && strcmp(v, "always") && strcmp(v, "never"))
                return cli_bad_value(f, v, "expected auto, always or never");
            progress = v;
        }
        if (rc)
            return rc;
    }
    /* Measuring kernels picks by timing: two fresh runs could pick
     * differently, so --deterministic runs the direct ones unless asked. */
    if (!conv_algo_given)
        o.conv_algo = o.deterministic ? DP_CONV_ALGO_DIRECT : DP_CONV_ALGO_AUTO;
    /* The environment's default, for a machine (or a test suite) that runs
     * many short trainings and would rather not time the kernels in each. */
    const char *env_algo = getenv("DPTRAIN_CONV_ALGO");
    if (!conv_algo_given && env_algo && *env_algo) {
        int a;
        if (dp_name_parse(&dp_conv_algo_names, env_algo, &a) < 0) {
            fprintf(stderr,
                    "dptrain: error: DPTRAIN_CONV_ALGO=%s: expected auto, direct or winograd\n",
                    env_algo);
            return 2;
        }
        o.conv_algo = a;
    }
    if (cli_train_recipe_check(&o, wd_given))
        return 2;
    if (o.resume_path && o.init_path) {
        fprintf(stderr, "dptrain: error: --resume and --init exclude each other\n");
        return 2;
    }
    if (!o.pipeline && (o.stages || o.micro_batches || o.schedule)) {
        fprintf(stderr, "dptrain: error: --stages, --micro-batches and --schedule need "
                        "--pipeline K\n");
        return 2;
    }
    if (o.log_steps && !o.metrics_path) {
        fprintf(stderr, "dptrain: error: --log-steps needs --metrics FILE\n");
        return 2;
    }
    /* Rank 0 speaks for all ranks: progress, metrics, plots, checkpoints. */
    o.progress = dp_dist_rank() == 0 &&
                 (strcmp(progress, "always") == 0 || (strcmp(progress, "auto") == 0 && isatty(2)));
    *out = o;
    return 0;
}

int cmd_train(int argc, char **argv)
{
    dp_train_options o;
    bool help;
    int status = cli_train_parse(argc, argv, &o, &help);
    if (status != 0)
        return status;
    if (help) {
        fputs(usage_train, stdout);
        fputs(cli_train_recipe_help, stdout);
        fputs(cli_train_tensorboard_help, stdout);
        fputs(cli_train_data_help, stdout);
        fputs(cli_train_augment_help, stdout);
        fputs(usage_train_rest, stdout);
        return 0;
    }
    dp_train_result r;
    catch_stop_signals();
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
               r.epochs_done, o.early_stop);
    if (dp_dist_rank() == 0 && (o.save_best_path || o.early_stop))
        printf("best test acc: %.4f after epoch %d%s%s\n", r.best_test_acc, r.best_epoch,
               o.save_best_path ? ", kept in " : "", o.save_best_path ? o.save_best_path : "");
    if (dp_dist_rank() == 0)
        printf("test acc: %.2f, %.1f sec/epoch on %s\n", r.test_acc, r.sec_per_epoch, r.devices);
    return 0;
}
