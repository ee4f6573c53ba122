/* PyTorch's DataParallel tutorial (seed 001) in dptrain:
 *
 *   input_size, output_size, batch_size, data_size = 5, 2, 30, 100
 *   model = nn.DataParallel(Model(input_size, output_size))
 *   for data in rand_loader:
 *       output = model(data.to(device))
 *       print("Outside: input size", input.size(), "output_size", output.size())
 *
 * The model's forward prints the size of the chunk each replica gets: with 2
 * devices a batch of 30 becomes 15 + 15, with 3 devices 10 + 10 + 10, with 8
 * devices 4 x 7 + 2 (torch.chunk), and the last batch of 10 becomes 5 + 5,
 * 4 + 4 + 2, and 2 x 5 (only five replicas work). */
#include "examples.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>

static void print_in_model(const dp_model_t *m, const dp_tensor_t *input, const dp_tensor_t *output,
                           void *user)
{
    (void)m, (void)user;
    char in[64], out[64];
    printf("\tIn Model: input size %s output size %s\n", dp_tensor_shape_str(input, in, sizeof in),
           dp_tensor_shape_str(output, out, sizeof out));
}

int example_dataparallel(const char *devices)
{
    enum { INPUT_SIZE = 5, BATCH_SIZE = 30, DATA_SIZE = 100 };
    dp_device_t *devs[DP_MAX_DEVICES];
    int n, rc;
    if ((rc = dp_devices_open(devs, &n, devices, 1)) < 0)
        return rc;
    /* RandomDataset(input_size, data_size): normal samples. */
    static float data[DATA_SIZE * INPUT_SIZE];
    dp_rng rng;
    dp_rng_init(&rng, 0, 0);
    for (int i = 0; i < DATA_SIZE * INPUT_SIZE; i++)
        data[i] = dp_rng_normal(&rng);

    dp_model_t *model = NULL;
    dp_data_parallel_t *dp = NULL;
    dp_tape_t *tape = NULL;
    rc = dp_model_init_builtin(&model, "tutorial", devs[0], 0);
    if (rc == 0) {
        dp_model_set_forward_hook(model, print_in_model, NULL);
        dp_data_parallel_options opt = {.allreduce = DP_ALLREDUCE_RING, .optimizer = {.lr = 0.1f}};
        rc = dp_data_parallel_init(&dp, model, devs, n, &opt);
    }
    if (rc == 0)
        rc = dp_tape_init(&tape, false);
    if (rc == 0)
        printf("Let's use %d devices!\n", n);
    for (int start = 0; rc == 0 && start < DATA_SIZE; start += BATCH_SIZE) {
        int64_t shape[2] = {DATA_SIZE - start < BATCH_SIZE ? DATA_SIZE - start : BATCH_SIZE,
                            INPUT_SIZE};
        dp_tensor_t *input, *output;
        dp_tape_begin(tape);
        rc = dp_tensor_from_host(&input, devs[0], DP_F32, 2, shape, data + start * INPUT_SIZE);
        if (rc == 0)
            rc = dp_data_parallel_forward(dp, input, false, &output);
        if (rc == 0) {
            char in[64], out[64];
            printf("Outside: input size %s output_size %s\n",
                   dp_tensor_shape_str(input, in, sizeof in),
                   dp_tensor_shape_str(output, out, sizeof out));
            rc = dp_tensor_wait(output);
            dp_tensor_free(input);
        }
        dp_tape_end(tape);
        dp_tape_reset(tape);
    }
    dp_tape_close(tape);
    dp_data_parallel_close(dp);
    dp_model_close(model);
    dp_devices_close(devs, n);
    return rc;
}

#ifndef DP_EXAMPLE_NO_MAIN
int main(int argc, char **argv)
{
    int rc = example_dataparallel(argc > 1 ? argv[1] : "2");
    if (rc < 0)
        fprintf(stderr, "dataparallel_tutorial: %s\n", dp_strerror(rc));
    return rc < 0;
}
#endif
