/* dp/train_option_list.h - every option of a training run, once.
 *
 * Everything that names, sets, checks or records a run's option is made
 * from this list, so that adding an option is one X(...) entry here plus
 * the code that reads it:
 *   - the fields of dp_train_options, one sub-struct per group
 *     (o.data.batch_size), and dp_train_options_default (dp/train.h);
 *   - dp_train_option_list(): a dp_option per entry (dp/option.h: name,
 *     type, offset, flag, help, range), which dp_train's range checks,
 *     the ranks' agreement check under mpirun, the checkpoint metadata,
 *     `dptrain train`'s parser, its --help, docs/cli.md and the man pages,
 *     and a binding's keyword arguments all walk (src/train/options.c);
 *   - messages name an option as `name` (the second column), whatever
 *     program set it; dptrain shows its flag there instead.
 *
 * X(group, name, type, default, flag, metavar, check, traits, help):
 *   group    the sub-struct: DP_TRAIN_OPTION_GROUPS below lists them
 *   name     the field, and the option's name in messages and keywords
 *   type     its C type; an enum's values are named by its check's table
 *   default  an expression of that type (dp_train_options_default)
 *   flag     `dptrain train`'s flag, or NULL for none
 *   metavar  what the flag's value is, or NULL for a switch (no value)
 *   check    what a value may be:
 *              RANGE(lo, hi)       an integer, lo <= v <= hi
 *              FROM(lo, hi)        a number, lo <= v <= hi
 *              ABOVE(lo, hi)       a number, lo < v <= hi
 *              BETWEEN(lo, hi)     a number, lo < v < hi
 *              NAMES(table)        an enum, by the names of its dp_name_table
 *              SWITCH(on)          a bool that the flag sets to `on`
 *              SWITCH_TO(on, t)    an enum that the flag sets to `on`
 *              ANY                 a string, any
 *              TEXT(kind)          a string that dp__option_parse_<kind> checks
 *              VALUE(kind)         a value that dp__option_parse_<kind> reads
 *                                  and dp__option_format_<kind> writes
 *                                  (both in src/train/option_values.c)
 *            A value equal to the default is always taken: 0 is "off"
 *            for many options whose range starts at 1.
 *   traits   0 or DP_OPTION_AGREE (every rank of mpirun must have the same)
 *            | DP_OPTION_RECORD (checkpoints keep it as dptrain.<name>)
 *            | DP_OPTION_RESUME_WARN (a resumed run with another warns)
 *   help     --help's sentence (other options as `name`); the default
 *            follows in brackets, formatted from `default`, unless the
 *            help ends with its own [...]. Some defaults are the command
 *            line's own: --conv-algo's and --weight-decay's depend on
 *            other flags (tools/train_cmd.c says how).
 *
 * Options that are not the command line's (a program's own data, model
 * and callbacks) are plain fields of dp_train_options (dp/train.h). */
#ifndef DP_TRAIN_OPTION_LIST_H
#define DP_TRAIN_OPTION_LIST_H

/* X(group, heading): the sub-structs of dp_train_options, in --help's order. */
#define DP_TRAIN_OPTION_GROUPS(X)                                                                  \
    X(net, "the model")                                                                            \
    X(data, "the data")                                                                            \
    X(optim, "the optimizer and the loss")                                                         \
    X(schedule, "the learning-rate schedule")                                                      \
    X(run, "the run")                                                                              \
    X(parallel, "devices and parallelism")                                                         \
    X(numerics, "precision and reproducibility")                                                   \
    X(checkpoint, "checkpoints")                                                                   \
    X(output, "what the run shows and writes")

/* clang-format off */
#define DP_TRAIN_OPTIONS_net(X)                                                                    \
    X(net, model, const char *, "lenet", "--model", "NAME|FILE", TEXT(model), DP_OPTION_AGREE,     \
      "lenet, resnet18, a file of nn.Sequential modules (one a line) or an ONNX model")            \
    X(net, init_path, const char *, NULL, "--init", "FILE", ANY, 0,                                \
      "start from the weights in FILE (a checkpoint or a PyTorch state dict in safetensors) "      \
      "[the seed's init]")                                                                         \
    X(net, weight_init, dp_weight_init, DP_WEIGHTS_AS_DEFINED, "--init-xavier", NULL,              \
      SWITCH_TO(DP_WEIGHTS_XAVIER, dp__weight_init_names), DP_OPTION_AGREE,                        \
      "draw the weights Xavier-uniform, as d2l's LeNet chapter does")                              \
    X(net, init_std, float, 0, "--init-normal", "STD", ABOVE(0, 10), DP_OPTION_AGREE,              \
      "draw the weights N(0, STD^2), as the seeds do "                                             \
      "[each module's own: PyTorch's default for files]")

#define DP_TRAIN_OPTIONS_data(X)                                                                   \
    X(data, dataset, const char *, "fashion-mnist", "--dataset", "NAME", TEXT(dataset),            \
      DP_OPTION_AGREE,                                                                             \
      "fashion-mnist, mnist (the four IDX files, gzipped or not), cifar10 (the binary "            \
      "version's .bin files), folder (DIR/train/CLASS/*.png|*.jpg and DIR/test/CLASS/*, as "       \
      "torchvision's ImageFolder), npy (DIR/train/images.npy, labels.npy and DIR/test/...) or "   \
      "tar (WebDataset shards: DIR/train-*.tar and test-*.tar, or the training shards' pattern; "  \
      "docs/shards.md)")                                                                           \
    X(data, data_dir, const char *, NULL, "--data", "DIR", ANY, 0,                                 \
      "directory with the dataset's files (tar: or the training shards' pattern, "                \
      "train-{000000..000099}.tar) "                                                               \
      "[fashion-mnist: /usr/share/datasets/fashion-mnist; the others: required]")                  \
    X(data, channels, int, 0, "--channels", "C", VALUE(channels), DP_OPTION_AGREE,                 \
      "`dataset` folder: read the images as 1 (grayscale) or 3 (RGB) channels, as PIL's "          \
      "convert [the first image's]")                                                               \
    X(data, batch_size, int64_t, 256, "--batch-size", "B", RANGE(1, 1 << 20),                      \
      DP_OPTION_AGREE | DP_OPTION_RECORD | DP_OPTION_RESUME_WARN, "global batch size")             \
    X(data, shuffle, bool, true, "--no-shuffle", NULL, SWITCH(false), DP_OPTION_AGREE,             \
      "take batches in file order [shuffle]")                                                      \
    X(data, limit_train, int64_t, 0, "--limit-train", "N", RANGE(0, INT64_MAX), DP_OPTION_AGREE,   \
      "use the first N training samples, 0 = all")                                                 \
    X(data, limit_test, int64_t, 0, "--limit-test", "N", RANGE(0, INT64_MAX), DP_OPTION_AGREE,     \
      "use the first N test samples, 0 = all")                                                     \
    X(data, augment, dp_augment_options, (dp_augment_options){0}, "--augment", "LIST",             \
      VALUE(augment), DP_OPTION_AGREE | DP_OPTION_RECORD,                                          \
      "training images only: crop:PAD (RandomCrop(size, padding=PAD), zero padding) and/or "      \
      "flip (RandomHorizontalFlip()), e.g. crop:4,flip")                                           \
    X(data, normalize, dp_augment_options, (dp_augment_options){0}, "--normalize", "M,..,S,..",    \
      VALUE(normalize), DP_OPTION_AGREE | DP_OPTION_RECORD,                                        \
      "(x - mean) / std per channel, training and test images: the means, then the stds, "         \
      "e.g. 0.2860,0.3530 (Fashion-MNIST)")                                                       \
    X(data, train_transform, dp_transform_list, (dp_transform_list){0}, "--train-transform",      \
      "LIST", VALUE(transform), DP_OPTION_AGREE | DP_OPTION_RECORD,                               \
      "training images: torchvision's transforms in order, e.g. random-resized-crop:224,flip "     \
      "(resize:S|HxW, center-crop:S, random-resized-crop:S, crop:PAD, flip, gray, rgb; "            \
      "docs/transforms.md) [none; `transform`'s]")                                                 \
    X(data, test_transform, dp_transform_list, (dp_transform_list){0}, "--test-transform",        \
      "LIST", VALUE(transform), DP_OPTION_AGREE | DP_OPTION_RECORD,                               \
      "test images, and predict's: e.g. resize:256,center-crop:224 [none; `transform`'s]")         \
    X(data, transform, int, 0, "--transform", "none|imagenet", NAMES(dp__transform_recipe_names),   \
      DP_OPTION_AGREE | DP_OPTION_RECORD,                                                          \
      "imagenet: `train_transform` random-resized-crop:224,flip, `test_transform` "               \
      "resize:256,center-crop:224 and, unless `normalize` is given, ImageNet's mean and std "       \
      "[none]")                                                                                    \
    X(data, jpeg_scale, int, 0, "--jpeg-scale", "auto|off", NAMES(dp__jpeg_scale_names),           \
      DP_OPTION_AGREE | DP_OPTION_RECORD,                                                          \
      "decode JPEGs at 1/2, 1/4 or 1/8 where the transforms' output allows (auto, as PIL's "       \
      "draft) or always at full size (off)")                                                       \
    X(data, cache, bool, false, "--cache", NULL, SWITCH(true), 0,                                  \
      "`dataset` folder: decode every image into memory before the first step, for sets that "     \
      "fit [streamed from disk]")                                                                  \
    X(data, workers, int, 0, "--workers", "N", RANGE(0, 256), 0,                                   \
      "threads reading and decoding samples, as DataLoader's num_workers; 0: one per core "        \
      "[0]")                                                                                       \
    X(data, prefetch, int, 2, "--prefetch", "B", RANGE(1, 64), 0,                                  \
      "batches prepared ahead of the step")                                                        \
    X(data, shuffle_buffer, int64_t, 1000, "--shuffle-buffer", "N", RANGE(1, 1 << 24),              \
      DP_OPTION_AGREE | DP_OPTION_RECORD,                                                          \
      "`dataset` tar: the shuffle buffer in samples, as WebDataset's shuffle(N), split over the "  \
      "lanes (ceil(N/L) each), so the read holds about N encoded samples whatever the lanes (1: "  \
      "the shards' own order; --no-shuffle: 1)")                                                   \
    X(data, shard_lanes, int, 0, "--shard-lanes", "L", RANGE(0, 4096),                             \
      DP_OPTION_AGREE | DP_OPTION_RECORD,                                                          \
      "`dataset` tar: shard streams read side by side, each batch batch_size/L rows of each; a "   \
      "multiple of the ranks dividing `batch_size` [0: the largest L <= 8 dividing batch_size "   \
      "and the shard count that keeps 9/10 of an epoch, else 1]")                                 \
    X(data, bad_images, dp_bad_images, DP_BAD_IMAGES_STOP, "--bad-images", "stop|skip",           \
      NAMES(dp__bad_images_names), DP_OPTION_AGREE,                                                 \
      "an image that does not decode: stop the run before its step, or skip it (its batch one "    \
      "shorter) and count it in the epoch's metrics")

#define DP_TRAIN_OPTIONS_optim(X)                                                                  \
    X(optim, optimizer, dp_optimizer_kind, DP_OPTIMIZER_SGD, "--optimizer", "O",                   \
      NAMES(dp_optimizer_kind_names), DP_OPTION_AGREE, "sgd, adam or adamw, as torch.optim's")     \
    X(optim, lr, float, 0.2f, "--lr", "LR", ABOVE(0, 1e6),                                         \
      DP_OPTION_AGREE | DP_OPTION_RECORD | DP_OPTION_RESUME_WARN, "learning rate")                 \
    X(optim, momentum, float, 0, "--momentum", "M", FROM(0, 0.999999),                             \
      DP_OPTION_AGREE | DP_OPTION_RECORD, "SGD momentum")                                          \
    X(optim, nesterov, bool, false, "--nesterov", NULL, SWITCH(true), DP_OPTION_AGREE,             \
      "SGD with Nesterov momentum (needs `momentum`)")                                             \
    X(optim, weight_decay, float, 0, "--weight-decay", "WD", FROM(0, 1e3),                         \
      DP_OPTION_AGREE | DP_OPTION_RECORD,                                                          \
      "weight decay: added to the gradient (SGD, Adam) or decoupled (AdamW) [0; adamw: 0.01]")     \
    X(optim, betas, dp_adam_betas, ((dp_adam_betas){0.9f, 0.999f}), "--betas", "B1,B2",            \
      VALUE(betas), DP_OPTION_AGREE, "Adam's and AdamW's betas")                                   \
    X(optim, eps, float, 1e-8f, "--eps", "EPS", FROM(0, 1), DP_OPTION_AGREE,                       \
      "Adam's and AdamW's eps [1e-8]")                                                             \
    X(optim, clip_grad_norm, float, 0, "--clip-grad-norm", "N", ABOVE(0, 1e9), DP_OPTION_AGREE,    \
      "clip the gradient's global norm to N, as clip_grad_norm_ (after the allreduce) [off]")      \
    X(optim, label_smoothing, float, 0, "--label-smoothing", "E", FROM(0, 1), DP_OPTION_AGREE,     \
      "CrossEntropyLoss(label_smoothing=E), 0 to 1")

#define DP_TRAIN_OPTIONS_schedule(X)                                                               \
    X(schedule, lr_schedule, dp_lr_schedule_kind, DP_LR_CONSTANT, "--lr-schedule", "S",            \
      NAMES(dp_lr_schedule_names), DP_OPTION_AGREE,                                                \
      "constant, step, multistep, cosine or onecycle, stepped every update")                       \
    X(schedule, lr_step, int64_t, 1, "--lr-step", "E", RANGE(1, DP_MAX_EPOCHS), DP_OPTION_AGREE,   \
      "step: StepLR's step_size, in epochs")                                                       \
    X(schedule, lr_milestones, dp_lr_milestones, (dp_lr_milestones){0}, "--lr-milestones",         \
      "LIST", VALUE(milestones), DP_OPTION_AGREE,                                                  \
      "multistep: MultiStepLR's milestones, in epochs, e.g. 30,60")                                \
    X(schedule, lr_gamma, double, 0.1, "--lr-gamma", "G", ABOVE(0, 1e6), DP_OPTION_AGREE,          \
      "step, multistep: the factor at each step")                                                  \
    X(schedule, lr_min, double, 0, "--lr-min", "LR", FROM(0, 1e6), DP_OPTION_AGREE,                \
      "cosine: CosineAnnealingLR's eta_min")                                                       \
    X(schedule, warmup_steps, int64_t, 0, "--warmup-steps", "N", RANGE(0, INT64_MAX),              \
      DP_OPTION_AGREE, "LinearLR for the first N updates, before the schedule (SequentialLR)")     \
    X(schedule, warmup_epochs, double, 0, "--warmup-epochs", "E", FROM(0, DP_MAX_EPOCHS),          \
      DP_OPTION_AGREE, "the same, for E epochs' updates")                                          \
    X(schedule, warmup_start_factor, double, 1.0 / 3.0, "--warmup-start-factor", "F",              \
      ABOVE(0, 1), DP_OPTION_AGREE, "LinearLR's start_factor, in (0, 1] [0.333333]")               \
    X(schedule, max_lr, double, 0, "--max-lr", "LR", ABOVE(0, 1e6), DP_OPTION_AGREE,               \
      "onecycle: OneCycleLR's max_lr [`lr`]")                                                      \
    X(schedule, pct_start, double, 0.3, "--pct-start", "P", BETWEEN(0, 1), DP_OPTION_AGREE,        \
      "onecycle: the share of updates rising to max_lr")

#define DP_TRAIN_OPTIONS_run(X)                                                                    \
    X(run, epochs, int, 10, "--epochs", "E", RANGE(1, DP_MAX_EPOCHS), DP_OPTION_AGREE,             \
      "epochs, 1 to 1000")                                                                         \
    X(run, seed, uint64_t, 0, "--seed", "S", RANGE(0, INT64_MAX), DP_OPTION_AGREE,                 \
      "seed for weights and shuffling")                                                            \
    X(run, skip_nonfinite, bool, false, "--skip-nonfinite", NULL, SWITCH(true), DP_OPTION_AGREE,   \
      "skip a step whose gradient holds a NaN or an Inf (warn, count it in `metrics_path`) "       \
      "instead of stopping; either way a bad step is never applied [stop]")                        \
    X(run, max_steps_in_flight, int, 0, NULL, "N", RANGE(0, 16), 0,                                \
      "finished steps the front end may issue ahead of, 0 = 1")                                   \
    X(run, max_memory, int64_t, 0, "--max-memory", "SIZE", VALUE(memory_size), 0,                  \
      "refuse a run whose step needs more than SIZE bytes (K, M, G, T: powers of 1024, e.g. 8G) " \
      "[what this machine has available: MemAvailable and the cgroup's limit]")

#define DP_TRAIN_OPTIONS_parallel(X)                                                               \
    X(parallel, devices, const char *, "1", "--devices", "N|LIST", ANY, 0,                         \
      "N devices (the first N GPUs, else N CPU devices), a list like cpu:0,cpu:1, or auto "        \
      "(every core, in the split that trains fastest here)")                                       \
    X(parallel, threads, int, 0, "--threads", "N", RANGE(0, 1024), 0,                              \
      "kernel threads per device, 0 = all cores divided among the devices")                        \
    X(parallel, allreduce, dp_allreduce_algo, DP_ALLREDUCE_AUTO, "--allreduce", "ALGO",            \
      NAMES(dp_allreduce_algo_names), 0,                                                           \
      "how gradients are summed across devices: ring, naive (sum on the first device, copy "       \
      "back), nccl, or mpi (across the ranks of mpirun) [nccl across GPUs, else ring; naive "      \
      "for 3 or more devices with `split_invariant`]")                                             \
    X(parallel, bucket_mb, double, 25, "--bucket-mb", "MB", FROM(0, 1e6), DP_OPTION_AGREE,         \
      "sum the gradients in buckets of MB MiB (the first 1 MiB) while the backward pass runs, "    \
      "as PyTorch's DDP; 0 = one allreduce after the backward")                                    \
    X(parallel, grad_compress, dp_grad_compress, DP_GRAD_COMPRESS_NONE, "--grad-compress", "C",    \
      NAMES(dp_grad_compress_names), DP_OPTION_AGREE,                                              \
      "none, or bf16: gradients cross process boundaries (MPI ranks) as bfloat16, summed in "      \
      "float32")                                                                                   \
    X(parallel, sync_bn, bool, false, "--sync-bn", NULL, SWITCH(true), DP_OPTION_AGREE,            \
      "batch norm statistics over all devices together (SyncBatchNorm), not each device's "        \
      "shard")                                                                                     \
    X(parallel, pipeline, int, 0, "--pipeline", "K", RANGE(1, DP_PIPELINE_MAX_STAGES),             \
      DP_OPTION_AGREE,                                                                             \
      "model parallelism: split the model into K stages of about equal FLOPs on K devices; "       \
      "`devices` D*K runs D such pipelines data-parallel; 1 stage with `micro_batches` M is "      \
      "gradient accumulation [off]")                                                               \
    X(parallel, stages, const char *, NULL, "--stages", "LIST", ANY, DP_OPTION_AGREE,              \
      "the stages' layers as `dptrain model` numbers them, e.g. 0-3,4-7 [balanced by FLOPs]")      \
    X(parallel, micro_batches, int, 0, "--micro-batches", "M",                                     \
      RANGE(1, DP_PIPELINE_MAX_MICRO_BATCHES), DP_OPTION_AGREE,                                    \
      "with `pipeline`, split each batch (each pipeline's share) into M micro-batches [1]")        \
    X(parallel, pipeline_schedule, dp_pipeline_schedule, DP_PIPELINE_1F1B, "--schedule", "S",      \
      NAMES(dp_pipeline_schedule_names), DP_OPTION_AGREE,                                          \
      "with `pipeline`: 1f1b (at most K micro-batches' activations alive per stage) or gpipe "     \
      "(all forwards, then all backwards)")

#define DP_TRAIN_OPTIONS_numerics(X)                                                               \
    X(numerics, precision, dp_precision, DP_PRECISION_FP32, "--precision", "P",                    \
      NAMES(dp_precision_names), DP_OPTION_AGREE | DP_OPTION_RECORD,                               \
      "fp32; bf16 (convolutions and matrix products on bf16 operands, f32 sums, as "               \
      "torch.autocast on the CPU: needs avx512_bf16 or amx_bf16); or bf16-reference (the same "    \
      "arithmetic on f32 kernels, slower: to check bf16's accuracy on any CPU)")                   \
    X(numerics, conv_algo, dp_conv_algo, DP_CONV_ALGO_DIRECT, "--conv-algo", "A",                  \
      NAMES(dp_conv_algo_names), DP_OPTION_AGREE,                                                  \
      "convolution kernels: auto (each shape's fastest, timed once before the first step and "     \
      "kept in the checkpoint), direct, or winograd (f32 3x3 where the CPU has it) [auto; "        \
      "direct with `deterministic`; the environment's DPTRAIN_CONV_ALGO where set]")               \
    X(numerics, conv_algo_cache, const char *, NULL, "--conv-algo-cache", "FILE", ANY, 0,          \
      "with `conv_algo` auto: the file of kernel choices measured on this machine (per CPU, "      \
      "oneDNN and dptrain version), read before measuring and added to atomically, so that the "   \
      "same command runs the same kernels (the same bits) again; off: measure afresh "            \
      "[DPTRAIN_CONV_ALGO_CACHE, else $XDG_CACHE_HOME/dptrain/conv-algos.txt]")                    \
    X(numerics, tf32, bool, true, "--no-tf32", NULL, SWITCH(false), 0,                             \
      "GPU convolutions in full float32; by default cuDNN may use TF32, as PyTorch allows "        \
      "(matrix products are float32 either way) [TF32 allowed]")                                  \
    X(numerics, deterministic, bool, false, "--deterministic", NULL, SWITCH(true), 0,              \
      "bit-identical weights from runs with the same seed, devices and `threads` (CPU devices "    \
      "are; another device count changes the summation order)")                                   \
    X(numerics, split_invariant, int64_t, 0, "--split-invariant", "R", RANGE(1, 1 << 20),          \
      DP_OPTION_AGREE,                                                                             \
      "sum every gradient over the batch in blocks of R samples added pairwise in a fixed tree "   \
      "(batch norm's statistics too), so that 1 device, 2 or 4 devices, mpirun -np 2 and a "       \
      "pipeline's micro-batches give the same bits (with `sync_bn` where the model has batch "     \
      "norm, and the same `threads` per device); the batch must be R times a power of two; "       \
      "implies `deterministic` [off]")

#define DP_TRAIN_OPTIONS_checkpoint(X)                                                             \
    X(checkpoint, checkpoint_path, const char *, NULL, "--checkpoint", "FILE", ANY, 0,             \
      "write weights and training state to FILE (safetensors, PyTorch's state_dict names) after "  \
      "every epoch, and on SIGINT/SIGTERM after the current step "                                 \
      "[none; a stopped run writes dptrain-interrupted.safetensors]")                              \
    X(checkpoint, resume_path, const char *, NULL, "--resume", "FILE", ANY, 0,                     \
      "go on from a checkpoint: same weights, momentum, seed and data order as if never "          \
      "stopped")                                                                                   \
    X(checkpoint, save_best_path, const char *, NULL, "--save-best", "FILE", ANY, 0,               \
      "also keep the checkpoint of the best test accuracy so far in FILE, written after each "     \
      "epoch that beats it")                                                                       \
    X(checkpoint, early_stop, int, 0, "--early-stop", "N", RANGE(1, DP_MAX_EPOCHS), 0,             \
      "end the run after N epochs without a better test accuracy [off]")                           \
    X(checkpoint, on_checkpoint_error, dp_on_error, DP_ON_ERROR_STOP, "--on-checkpoint-error",     \
      "stop|continue", NAMES(dp_on_error_names), 0,                                                \
      "when writing a checkpoint fails (disk full, I/O error; the previous one stays intact): "     \
      "stop, or warn and train on, trying again next epoch")

#define DP_TRAIN_OPTIONS_output(X)                                                                 \
    X(output, progress, dp_progress_mode, DP_PROGRESS_AUTO, "--progress", "MODE",                  \
      NAMES(dp_progress_mode_names), 0,                                                            \
      "progress bar on stderr: auto (on a terminal), always, never")                               \
    X(output, verbose, bool, false, "--verbose", NULL, SWITCH(true), 0,                            \
      "print the gradient buckets, the convolution kernels chosen and the library's notes")        \
    X(output, metrics_path, const char *, NULL, "--metrics", "FILE", ANY, 0,                       \
      "write one JSON object per epoch to FILE")                                                   \
    X(output, log_steps, bool, false, "--log-steps", NULL, SWITCH(true), 0,                        \
      "with `metrics_path`, also one JSON object per step")                                        \
    X(output, log_every, int64_t, 1, "--log-every", "N", RANGE(1, INT64_MAX), 0,                   \
      "keep every Nth step (counted over the run) in `log_steps`' lines and TensorBoard's "        \
      "train/loss and train/lr, as Lightning's log_every_n_steps")                                 \
    X(output, plot_path, const char *, NULL, "--plot", "FILE", TEXT(plot), 0,                      \
      "draw the curves to FILE.png or FILE.svg")                                                   \
    X(output, tensorboard_dir, const char *, NULL, "--tensorboard", "DIR", TEXT(directory), 0,     \
      "write TensorBoard event files to DIR (made if missing): train/loss and train/lr every "     \
      "step, the epoch's train loss and accuracy, samples/s and test/accuracy at its last step")
/* clang-format on */

#endif /* DP_TRAIN_OPTION_LIST_H */
