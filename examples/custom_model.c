/* A model of your own, trained data-parallel by the installed library.
 *
 * The network is defined here, outside the library, with the public API
 * alone: its parameters as dp_param_specs named as PyTorch's state_dict of
 *
 *   nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
 *                 nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
 *
 * (so PyTorch loads its checkpoints), and a forward written with the ops of
 * dp/ops.h. dp_train trains it on 2 devices for one epoch and writes a
 * checkpoint, then goes on from that checkpoint for a second epoch; a run of
 * two epochs straight must end with the same weights, bit for bit.
 *
 * Build against an installed dptrain (docs/c-library.md):
 *   cc custom_model.c $(pkg-config --cflags --libs dptrain) -o custom_model
 * or with CMake's find_package(dptrain CONFIG): examples/cmake/.
 * Run: ./custom_model [FASHION_MNIST_DIR]
 * With a directory it trains on 512 Fashion-MNIST images and tests on 256;
 * without, on a small synthetic dataset held in memory. It writes its
 * checkpoints, custom_cnn-*.safetensors, in the current directory. */
#include <dp/dp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the model ------------------------------------------------------------ */

/* Trained parameters, in state_dict order; the forward finds them by index.
 * Weights and biases are drawn as PyTorch draws them by default:
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in 1*3*3 = 9 and 8*14*14 = 1568. */
enum { CONV_W, CONV_B, BN_W, BN_B, FC_W, FC_B, NPARAMS };
static const dp_param_spec params[NPARAMS] = {
    [CONV_W] = {"0.weight", 4, {8, 1, 3, 3}, DP_INIT_UNIFORM, 0.3333f}, /* (K, C, R, S) */
    [CONV_B] = {"0.bias", 1, {8}, DP_INIT_UNIFORM, 0.3333f},
    [BN_W] = {"1.weight", 1, {8}, DP_INIT_ONES, 0},
    [BN_B] = {"1.bias", 1, {8}, DP_INIT_ZEROS, 0},
    [FC_W] = {"5.weight", 2, {10, 8 * 14 * 14}, DP_INIT_UNIFORM, 0.02525f}, /* (out, in) */
    [FC_B] = {"5.bias", 1, {10}, DP_INIT_UNIFORM, 0.02525f},
};
/* Not trained: batch norm's running statistics. */
enum { BN_MEAN, BN_VAR, NBUFFERS };
static const dp_param_spec buffers[NBUFFERS] = {
    [BN_MEAN] = {"1.running_mean", 1, {8}, DP_INIT_ZEROS, 0},
    [BN_VAR] = {"1.running_var", 1, {8}, DP_INIT_ONES, 0},
};
/* The one batch norm layer, for its "1.num_batches_tracked" entry. */
static const char *const bn_names[] = {"1"};

/* logits (N, 10) from x (N, 1, 28, 28). Each op returns at once (the device
 * runs it later) and records itself for the backward. */
static int custom_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    dp_params_t *p = dp_model_params(m), *b = dp_model_buffers(m);
    dp_tensor_t *y;
    /* (N, 1, 28, 28) -> (N, 8, 28, 28) */
    dp_conv2d_params conv = {.pad_h = 1, .pad_w = 1};
    int rc = dp_conv2d(&y, x, dp_params_get(p, CONV_W), dp_params_get(p, CONV_B), &conv);
    /* Batch statistics while training (and the running ones updated), the
     * running ones in evaluation; dp_model_bn_params says which, and joins
     * the devices' statistics when sync batch norm is on. */
    dp_batch_norm_params bn;
    dp_model_bn_params(m, 0, train, &bn);
    if (rc == 0)
        rc = dp_batch_norm2d(&y, y, dp_params_get(p, BN_W), dp_params_get(p, BN_B),
                             dp_params_get(b, BN_MEAN), dp_params_get(b, BN_VAR), &bn);
    if (rc == 0)
        rc = dp_relu(&y, y);
    /* (N, 8, 28, 28) -> (N, 8, 14, 14) -> (N, 1568) -> (N, 10) */
    dp_pool2d_params pool = {.kernel_h = 2, .kernel_w = 2};
    if (rc == 0)
        rc = dp_max_pool2d(&y, y, &pool);
    if (rc == 0)
        rc = dp_flatten(&y, y);
    if (rc == 0)
        rc = dp_linear(logits, y, dp_params_get(p, FC_W), dp_params_get(p, FC_B), DP_WEIGHT_OUT_IN);
    return rc;
}

/* What dp_train builds on each device: the specs, the forward and the name
 * its checkpoints carry. */
static const dp_model_def custom_cnn = {
    .name = "custom_cnn",
    .params = params,
    .nparams = NPARAMS,
    .buffers = buffers,
    .nbuffers = NBUFFERS,
    .bn_names = bn_names,
    .nbn = 1,
    .forward = custom_forward,
};

/* ---- data without files ------------------------------------------------------ */

/* n images (1, 28, 28) of 10 classes: class k is a bright 8x8 square at its
 * own place on faint noise, so that a short run learns something. */
static int synthetic_dataset(dp_dataset *out, int64_t n, uint64_t seed)
{
    uint8_t *bytes = calloc((size_t)n, 28 * 28);
    int32_t *labels = calloc((size_t)n, sizeof *labels);
    int rc = bytes && labels ? 0 : DP_ENOMEM;
    dp_rng rng;
    dp_rng_init(&rng, seed, 0);
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        int k = (int)(i % 10), top = 2 + (k / 4) * 8, left = 2 + (k % 4) * 6;
        uint8_t *img = bytes + i * 28 * 28;
        for (int px = 0; px < 28 * 28; px++)
            img[px] = (uint8_t)(dp_rng_u64(&rng) % 64);
        for (int r = top; r < top + 8; r++)
            memset(img + r * 28 + left, 255, 8);
        labels[i] = k;
    }
    if (rc == 0)
        rc = dp_dataset_from_memory(out, n, 1, 28, 28, NULL, bytes, labels, 10);
    free(bytes);
    free(labels);
    return rc;
}

/* ---- training, resuming, comparing ----------------------------------------- */

/* The model's parameters and buffers as written in checkpoint `path`, into
 * a new array of *n floats (spec order: parameters, then buffers). */
static int checkpoint_weights(const char *path, dp_device_t *dev, float **out, int64_t *n)
{
    dp_model_t *m;
    int rc = dp_model_init(&m, &custom_cnn, dev, 0);
    if (rc < 0)
        return rc;
    rc = dp_checkpoint_load_weights(path, m);
    int64_t np = dp_params_numel(dp_model_params(m)), nb = dp_params_numel(dp_model_buffers(m));
    *n = np + nb;
    *out = malloc((size_t)*n * sizeof **out);
    if (rc == 0 && !*out)
        rc = DP_ENOMEM;
    if (rc == 0)
        rc = dp_params_get_all(dp_model_params(m), *out);
    if (rc == 0)
        rc = dp_params_get_all(dp_model_buffers(m), *out + np);
    dp_model_close(m);
    return rc;
}

/* 0 when the checkpoints a and b hold the same weights bit for bit, 1 when
 * they differ, or a negative DP_E* code. */
static int compare_checkpoints(const char *a, const char *b, int64_t *n)
{
    dp_device_t *cpu;
    float *wa = NULL, *wb = NULL;
    int64_t nb = 0;
    int rc = dp_device_open(&cpu, "cpu:0", 1);
    if (rc < 0)
        return rc;
    rc = checkpoint_weights(a, cpu, &wa, n);
    if (rc == 0)
        rc = checkpoint_weights(b, cpu, &wb, &nb);
    if (rc == 0)
        rc = memcmp(wa, wb, (size_t)*n * sizeof *wa) != 0;
    free(wa);
    free(wb);
    dp_device_close(cpu);
    return rc;
}

static void print_epoch(const char *how, const dp_train_result *r)
{
    printf("epoch %d%s: loss %.4f, train acc %.3f, test acc %.3f, %.2f sec on %s\n", r->epochs_done,
           how, r->train_loss, r->train_acc, r->test_acc, r->sec_per_epoch, r->devices);
}

int main(int argc, char **argv)
{
    const char *data_dir = argc > 1 ? argv[1] : NULL;
    dp_dataset train = {0}, test = {0};

    dp_train_options o;
    dp_train_options_default(&o);
    o.model_def = &custom_cnn; /* instead of a built-in's name */
    o.parallel.devices = "2";  /* two GPUs, or two CPU devices where there are fewer */
    o.data.batch_size = 64;    /* global: 32 samples per device and step */
    o.optim.lr = 0.1f;
    o.run.seed = 42;
    o.numerics.deterministic = true;
    int rc = 0;
    if (data_dir) {
        o.data.data_dir = data_dir; /* Fashion-MNIST's four IDX files */
        o.data.limit_train = 512;
        o.data.limit_test = 256;
    } else {
        rc = synthetic_dataset(&train, 512, 1);
        if (rc == 0)
            rc = synthetic_dataset(&test, 256, 2);
        o.train_set = &train;
        o.test_set = &test;
    }

    /* Epoch 1, then a checkpoint: weights, momentum, position, history. */
    dp_train_result r1, r2, straight;
    o.run.epochs = 1;
    o.checkpoint.checkpoint_path = "custom_cnn-epoch1.safetensors";
    if (rc == 0)
        rc = dp_train(&o, &r1);
    if (rc == 0)
        print_epoch("", &r1);

    /* Epoch 2, going on from that checkpoint as a new process would. */
    o.run.epochs = 2;
    o.checkpoint.resume_path = "custom_cnn-epoch1.safetensors";
    o.checkpoint.checkpoint_path = "custom_cnn-resumed.safetensors";
    if (rc == 0)
        rc = dp_train(&o, &r2);
    if (rc == 0)
        print_epoch(" (resumed)", &r2);

    /* The same two epochs without a break, to compare with. */
    o.checkpoint.resume_path = NULL;
    o.checkpoint.checkpoint_path = "custom_cnn-straight.safetensors";
    if (rc == 0)
        rc = dp_train(&o, &straight);

    int64_t n = 0;
    if (rc == 0)
        rc = compare_checkpoints("custom_cnn-resumed.safetensors",
                                 "custom_cnn-straight.safetensors", &n);
    if (rc == 0 && (r2.train_loss != straight.train_loss || r2.test_acc != straight.test_acc))
        rc = 1;
    if (rc == 0)
        printf("resume matched: epoch 2 from the checkpoint gives the %lld weights of 2 epochs "
               "straight, bit for bit\n",
               (long long)n);
    else if (rc == 1)
        fprintf(stderr, "custom_model: the resumed run differs from 2 epochs straight\n");
    else
        fprintf(stderr, "custom_model: %s\n", dp_strerror(rc));
    dp_dataset_close(&train);
    dp_dataset_close(&test);
    return rc != 0;
}
