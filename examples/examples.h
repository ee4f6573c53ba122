/* The seeds' demonstrations as small programs. Each file builds alone
 * (build/examples/NAME) and is also `dptrain demo NAME`. */
#ifndef DP_EXAMPLES_H
#define DP_EXAMPLES_H

#include <stdint.h>

/* Examples return 0 or a negative DP_E* code; this returns early on one. */
#define DP_TRY_EXAMPLE(expr)                                                                       \
    do {                                                                                           \
        int ex_rc_ = (expr);                                                                       \
        if (ex_rc_ < 0)                                                                            \
            return ex_rc_;                                                                         \
    } while (0)

/* PyTorch's DataParallel tutorial: Linear(5, 2) over `devices` devices. */
int example_dataparallel(const char *devices);
/* d2l's allreduce check and the scatter of arange(20).reshape(4, 5). */
int example_allreduce(const char *devices, const char *algo);
/* d2l's from-scratch LeNet: get_params, split_batch, a loss and a backward
 * per device, allreduce, sgd; `steps` batches of 256 in file order. With
 * `checkpoint` (NULL: none), device 0's weights are written there
 * (safetensors), so that runs can be compared weight by weight. */
int example_lenet_scratch(const char *devices, const char *algo, int steps, const char *checkpoint);
/* MXNet's asynchronous engine: issuing vs waiting, wait_to_read vs waitall. */
int example_async(int ops);
/* Model parallelism: `model` in `stages` pipeline stages over `devices`,
 * batches of `batch` random images in `micro_batches`, `steps` steps; the
 * last step's timeline as the devices ran it, and with `plot` (.png, .svg)
 * as a Gantt chart. */
int example_pipeline(const char *model, const char *devices, int stages, int micro_batches,
                     int schedule, int64_t batch, int steps, const char *plot);

#endif
