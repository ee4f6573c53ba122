/* d2l's small checks of the from-scratch primitives (seeds 000, 002, 003):
 *
 *   data = [torch.ones((1, 2), device=try_gpu(i)) * (i + 1) for i in range(2)]
 *   print('before allreduce:\n', data[0], '\n', data[1])
 *   allreduce(data)
 *   print('after allreduce:\n', data[0], '\n', data[1])
 *
 *   data = torch.arange(20).reshape(4, 5)
 *   split = nn.parallel.scatter(data, devices)
 *
 * After the allreduce every device holds the sum, 1 + 2 + ... + n. (The
 * seed 000 version rebinds data[i] instead of copying into it, so devices
 * other than the first never see the sum; dp_allreduce_sum writes into each
 * device's own buffer.) */
#include "examples.h"

#include "dp/dp.h"

#include <stdio.h>
#include <string.h>

static int print_tensor(const char *indent, const dp_tensor_t *t)
{
    int64_t n = dp_tensor_numel(t), cols = dp_tensor_dim(t, dp_tensor_ndim(t) - 1);
    float v[64];
    if (n > 64)
        return DP_EINVAL;
    int rc = dp_tensor_to_host(t, v, (size_t)n * sizeof *v);
    if (rc < 0)
        return rc;
    printf("%s[", indent);
    for (int64_t i = 0; i < n; i++) {
        if (i % cols == 0)
            printf("%s[", i ? "\n  " : "");
        printf("%s%g", i % cols ? ", " : "", v[i]);
        if (i % cols == cols - 1)
            printf("]");
    }
    printf("] on %s\n", dp_device_name(dp_tensor_device(t)));
    return 0;
}

int example_allreduce(const char *devices, const char *algo_name)
{
    dp_device_t *devs[DP_MAX_DEVICES];
    dp_tensor_t *data[DP_MAX_DEVICES] = {0}, *batch = NULL, *split[DP_MAX_DEVICES] = {0};
    int n, rc, nsplit = 0, algo;
    if (dp_name_parse(&dp_allreduce_algo_names, algo_name, &algo) < 0) {
        fprintf(stderr, "allreduce: unknown algorithm '%s' (ring or naive)\n", algo_name);
        return DP_EINVAL;
    }
    if ((rc = dp_devices_open(devs, &n, devices, 1)) < 0)
        return rc;
    int64_t shape[2] = {1, 2};
    for (int i = 0; rc == 0 && i < n; i++) {
        float v[2] = {(float)(i + 1), (float)(i + 1)};
        rc = dp_tensor_from_host(&data[i], devs[i], DP_F32, 2, shape, v);
    }
    if (rc == 0)
        printf("before allreduce:\n");
    for (int i = 0; rc == 0 && i < n; i++)
        rc = print_tensor(" ", data[i]);
    if (rc == 0)
        rc = dp_allreduce_sum(data, n, (dp_allreduce_algo)algo);
    if (rc == 0)
        printf("after allreduce (%s):\n", algo_name);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = print_tensor(" ", data[i]);

    /* nn.parallel.scatter(torch.arange(20).reshape(4, 5), devices) */
    float range[20];
    for (int i = 0; i < 20; i++)
        range[i] = (float)i;
    int64_t bshape[2] = {4, 5};
    if (rc == 0)
        rc = dp_tensor_from_host(&batch, devs[0], DP_F32, 2, bshape, range);
    dp_tape_t *tape = NULL;
    if (rc == 0)
        rc = dp_tape_init(&tape, false);
    if (rc == 0) {
        dp_tape_begin(tape);
        rc = dp_scatter(split, &nsplit, batch, devs, n);
        char names[256];
        if (rc == 0) {
            printf("input:\n");
            rc = print_tensor(" ", batch);
        }
        if (rc == 0)
            printf("load into %s\noutput:\n", dp_devices_str(devs, n, names, sizeof names));
        for (int k = 0; rc == 0 && k < nsplit; k++)
            rc = print_tensor(" ", split[k]);
        dp_tape_end(tape);
    }
    dp_tape_close(tape);
    dp_tensor_free(batch);
    for (int i = 0; i < n; i++)
        dp_tensor_free(data[i]);
    dp_devices_close(devs, n);
    return rc;
}

#ifndef DP_EXAMPLE_NO_MAIN
int main(int argc, char **argv)
{
    int rc = example_allreduce(argc > 1 ? argv[1] : "2", argc > 2 ? argv[2] : "ring");
    if (rc < 0)
        fprintf(stderr, "allreduce_demo: %s\n", dp_strerror(rc));
    return rc < 0;
}
#endif
