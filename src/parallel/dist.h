/* What the allreduce needs of the ranks (mpi.c), beside dp/dist.h. */
#ifndef DP_PARALLEL_DIST_H
#define DP_PARALLEL_DIST_H

#include <stdint.h>

/* data[0..len) summed over every rank in place, on the gradients'
 * communicator (blocking: run it on a device's worker, in stream order, as
 * every rank does in the same order); the time it takes is counted in
 * dp_dist_comm_seconds. 0 or DP_ECOMM. */
int dp__dist_sum_grads(float *data, int64_t len);

#endif
