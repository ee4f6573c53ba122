/* dp/dist.h - many processes: one MPI rank per node (or per GPU).
 *
 * Under `mpirun -np P`, every rank runs the same program on its own local
 * devices. Each global batch is split over the ranks (rank r takes chunk r
 * of torch.chunk(batch, P)), then over the rank's devices, and gradients are
 * summed hierarchically: within the rank onto its first device, across the
 * ranks with MPI_Allreduce, then copied back to the rank's devices
 * (DP_ALLREDUCE_MPI in dp/parallel.h). Open MPI does the communication.
 *
 * Without mpirun, or in a build without MPI, there is one rank: rank 0 of 1,
 * and every call here is a no-op that succeeds. */
#ifndef DP_DIST_H
#define DP_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DP_MAX_RANKS 4096

/* Whether this build has MPI, and which ("Open MPI v4.1.4"; "none"). */
bool dp_dist_built(void);
const char *dp_dist_library(void);
/* Whether this process was started by mpirun (Open MPI's environment). */
bool dp_dist_launched(void);

/* Starts MPI when launched by mpirun (MPI_THREAD_MULTIPLE: the first device's
 * worker runs the gradient allreduce while the front end runs its own small
 * collectives, each on its own communicator). Returns DP_ENOTSUP, with a
 * message, when launched by mpirun in a build without MPI. */
int dp_dist_init(int *argc, char ***argv);
/* MPI_Finalize after a clean run. */
void dp_dist_finalize(void);
/* Ends every rank at once (MPI_Abort) after an error on this one; returns
 * only without MPI. */
void dp_dist_abort(int exit_code);

int dp_dist_rank(void);
int dp_dist_size(void);
/* "host" of this rank (MPI_Get_processor_name). */
const char *dp_dist_host(void);

/* Host-side collectives on the front end's communicator (blocking). Sums
 * v[0..n) over the ranks in place. */
int dp_dist_sum_f64(double *v, int n);
int dp_dist_sum_f32(float *v, int n);
/* Whether any rank passes true (a stop request seen by one rank stops all
 * of them at the same step). */
int dp_dist_any(bool flag, bool *any);
/* rank 0's `bytes` at p into every rank's p. */
int dp_dist_broadcast(void *p, size_t bytes);
/* Every rank's 64-bit value into all[0..size) (checks that the ranks agree). */
int dp_dist_gather_u64(uint64_t v, uint64_t *all);

/* Seconds the gradient allreduce across ranks has spent in MPI, and how
 * many times it ran, since the start (bench/mpi_scaling.sh prints it). */
double dp_dist_comm_seconds(uint64_t *calls);

#ifdef __cplusplus
}
#endif
#endif
