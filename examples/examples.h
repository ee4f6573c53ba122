/* The seeds' demonstrations as small programs. Each file builds alone
 * (build/examples/NAME) and is also `dptrain demo NAME`. */
#ifndef DP_EXAMPLES_H
#define DP_EXAMPLES_H

/* PyTorch's DataParallel tutorial: Linear(5, 2) over `devices` devices. */
int example_dataparallel(const char *devices);
/* d2l's allreduce check and the scatter of arange(20).reshape(4, 5). */
int example_allreduce(const char *devices, const char *algo);
/* MXNet's asynchronous engine: issuing vs waiting, wait_to_read vs waitall. */
int example_async(int ops);

#endif
