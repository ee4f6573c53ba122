/* The MPI backend's part of the gradient allreduce (mpi.c), beside the
 * ranks of dp/dist.h: the sums across ranks that the mpi algorithm
 * (allreduce_mpi.c) runs on a device's worker. */
#ifndef DP_COMM_MPI_H
#define DP_COMM_MPI_H

#include "core/bf16.h"

#include <stdint.h>

/* data[0..len) summed over every rank in place, on the gradients'
 * communicator (blocking: run it on a device's worker, in stream order, as
 * every rank does in the same order); the time it takes is counted in
 * dp_dist_comm_seconds. 0 or DP_ECOMM. */
int dp__dist_sum_grads(float *data, int64_t len);
/* The same sum with half the bytes on the wire (--grad-compress bf16): each
 * rank's values rounded to bfloat16 (to nearest, ties to even:
 * dp__bf16_from_f32), gathered from every rank (MPI_Allgather), and added
 * in float32 in rank order, so that every rank gets the same bits. Each
 * value is off by at most 2^-8 of its magnitude (2^-8: 8 significant bits)
 * before the sum. */
int dp__dist_sum_grads_bf16(float *data, int64_t len);

/* v[0..len) summed over every rank in place (SyncBatchNorm's statistics,
 * on their own communicator): gathered from every rank and added pairwise
 * in rank order (core/pairwise.h), the same bits on every rank. Every
 * rank calls it for the same layers in the same order. 0, DP_ENOMEM or
 * DP_ECOMM. */
int dp__dist_sum_stats(double *v, int64_t len);

/* out[i] = the sum over r of all[r * count + i] (rank r's bfloat16 values),
 * added in float32 in rank order: the same bits on every rank. */
static inline void dp__bf16_sum_ranks(const uint16_t *all, int ranks, int64_t count, float *out)
{
    for (int64_t i = 0; i < count; i++) {
        float sum = dp__bf16_to_f32(all[i]);
        for (int r = 1; r < ranks; r++)
            sum += dp__bf16_to_f32(all[(int64_t)r * count + i]);
        out[i] = sum;
    }
}

#endif
