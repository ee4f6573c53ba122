/* Many processes through Open MPI: the ranks, the hierarchical allreduce
 * (DP_ALLREDUCE_MPI) and the front end's small collectives.
 *
 * Two communicators, both duplicates of MPI_COMM_WORLD: `grad` for the
 * gradient allreduce that the first device's worker runs in stream order,
 * `ctl` for the front end (stop requests, epoch totals, evaluation counts).
 * Collectives on one communicator must be issued in the same order on every
 * rank; with one communicator per thread they are, while both threads run
 * at once (MPI_THREAD_MULTIPLE).
 *
 * Errors return (MPI_ERRORS_RETURN) as DP_ECOMM with MPI's message, so the
 * command line can name this rank and end the job with MPI_Abort; a rank
 * that dies outright is seen by mpirun, which ends the others. */
#include "dp/dist.h"

#include "core/internal.h"
#include "parallel/comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

bool dp_dist_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") != NULL || getenv("PMIX_RANK") != NULL;
}

static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static double comm_seconds;
static uint64_t comm_calls;

double dp_dist_comm_seconds(uint64_t *calls)
{
    pthread_mutex_lock(&stats_mu);
    double s = comm_seconds;
    if (calls)
        *calls = comm_calls;
    pthread_mutex_unlock(&stats_mu);
    return s;
}

#ifdef DP_HAVE_MPI
#include <mpi.h>

static bool active;
static int world_rank, world_size = 1;
static MPI_Comm comm_grad = MPI_COMM_NULL, comm_ctl = MPI_COMM_NULL;
static char host[MPI_MAX_PROCESSOR_NAME + 1] = "localhost";

bool dp_dist_built(void)
{
    return true;
}

static char library[MPI_MAX_LIBRARY_VERSION_STRING];
static pthread_once_t library_once = PTHREAD_ONCE_INIT;

/* "Open MPI v4.1.4, package: ..." up to the first comma. */
static void read_library(void)
{
    int len = 0;
    if (MPI_Get_library_version(library, &len) != MPI_SUCCESS)
        len = 0;
    library[len] = '\0';
    library[strcspn(library, ",\n")] = '\0';
}

const char *dp_dist_library(void)
{
    pthread_once(&library_once, read_library);
    return library;
}

/* An MPI error as DP_ECOMM, with MPI's own words. */
static int mpi_fail(int err, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    msg[len] = '\0';
    DP_ERROR("rank %d of %d: %s failed: %s", world_rank, world_size, what, msg);
    return DP_ECOMM;
}

#define MPI_TRY(call, what)                                                                        \
    do {                                                                                           \
        int e_ = (call);                                                                           \
        if (e_ != MPI_SUCCESS)                                                                     \
            return mpi_fail(e_, what);                                                             \
    } while (0)

int dp_dist_init(int *argc, char ***argv)
{
    if (active || !dp_dist_launched())
        return 0;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        DP_ERROR("MPI_Init_thread failed");
        return DP_ECOMM;
    }
    active = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    int len = 0;
    MPI_Get_processor_name(host, &len);
    host[len] = '\0';
    if (provided < MPI_THREAD_MULTIPLE) {
        DP_ERROR("this MPI library gives thread level %d, dptrain needs MPI_THREAD_MULTIPLE (%d)",
                 provided, MPI_THREAD_MULTIPLE);
        return DP_ENOTSUP;
    }
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &comm_grad), "MPI_Comm_dup");
    MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &comm_ctl), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_grad, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(comm_ctl, MPI_ERRORS_RETURN);
    return 0;
}

void dp_dist_finalize(void)
{
    if (!active)
        return;
    MPI_Comm_free(&comm_grad);
    MPI_Comm_free(&comm_ctl);
    MPI_Finalize();
    active = false;
}

void dp_dist_abort(int exit_code)
{
    if (active)
        MPI_Abort(MPI_COMM_WORLD, exit_code);
}

int dp_dist_rank(void)
{
    return world_rank;
}

int dp_dist_size(void)
{
    return world_size;
}

const char *dp_dist_host(void)
{
    return host;
}

int dp_dist_sum_f64(double *v, int n)
{
    if (world_size == 1)
        return 0;
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, comm_ctl), "MPI_Allreduce");
    return 0;
}

int dp_dist_sum_f32(float *v, int n)
{
    if (world_size == 1)
        return 0;
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, comm_ctl), "MPI_Allreduce");
    return 0;
}

int dp_dist_any(bool flag, bool *any)
{
    int v = flag;
    if (world_size > 1)
        MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, comm_ctl), "MPI_Allreduce");
    *any = v != 0;
    return 0;
}

int dp_dist_broadcast(void *p, size_t bytes)
{
    if (world_size == 1)
        return 0;
    for (size_t off = 0; off < bytes;) {
        int chunk = (int)DP_MIN(bytes - off, (size_t)1 << 30);
        MPI_TRY(MPI_Bcast((char *)p + off, chunk, MPI_BYTE, 0, comm_ctl), "MPI_Bcast");
        off += (size_t)chunk;
    }
    return 0;
}

int dp_dist_gather_u64(uint64_t v, uint64_t *all)
{
    if (world_size == 1) {
        all[0] = v;
        return 0;
    }
    MPI_TRY(MPI_Allgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm_ctl), "MPI_Allgather");
    return 0;
}

/* ---- the gradient allreduce across ranks --------------------------------- */

typedef struct mpi_sum_args {
    float *data;
    int64_t len;
} mpi_sum_args;

/* Runs on the first device's worker, after the rank's devices have summed
 * into its buffer: the sum over the ranks, in place. */
static int run_mpi_sum(void *p, void *ctx)
{
    (void)ctx;
    mpi_sum_args *a = p;
    double t0 = MPI_Wtime();
    for (int64_t off = 0; off < a->len;) {
        int chunk = (int)DP_MIN(a->len - off, (int64_t)1 << 30);
        MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, a->data + off, chunk, MPI_FLOAT, MPI_SUM, comm_grad),
                "MPI_Allreduce of the gradients");
        off += chunk;
    }
    double dt = MPI_Wtime() - t0;
    pthread_mutex_lock(&stats_mu);
    comm_seconds += dt;
    comm_calls++;
    pthread_mutex_unlock(&stats_mu);
    return 0;
}

static int run_free(void *p, void *ctx)
{
    (void)ctx;
    dp__free(*(void **)p);
    return 0;
}

int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len)
{
    DP_TRY(dp__reduce_to_first(bufs, n, len));
    if (world_size > 1 && len > 0) {
        dp_device_t *d0 = bufs[0]->dev;
        mpi_sum_args a = {bufs[0]->data, len};
        if (dp_device_has(d0, DP_DEVICE_HOST_MEMORY)) {
            /* A CPU device's memory is this process's: MPI reads it directly. */
            dp__stream_push_named(d0->stream, run_mpi_sum, "mpi_allreduce", &a, sizeof a);
        } else {
            /* Through host memory: commands on a device's stream run after
             * every earlier one has finished, copies included. */
            size_t bytes = (size_t)len * sizeof(float);
            float *host_buf = dp__malloc(bytes);
            if (!host_buf)
                return DP_ENOMEM;
            a.data = host_buf;
            DP_TRY(d0->ops->copy_to_host(d0, host_buf, bufs[0]->data, bytes));
            dp__stream_push_named(d0->stream, run_mpi_sum, "mpi_allreduce", &a, sizeof a);
            DP_TRY(d0->ops->copy_from_host(d0, bufs[0]->data, host_buf, bytes));
            dp__stream_push_named(d0->stream, run_free, "free", &host_buf, sizeof host_buf);
        }
    }
    return dp__broadcast_from_first(bufs, n, len);
}

#else /* no MPI in this build: one process */

bool dp_dist_built(void)
{
    return false;
}

const char *dp_dist_library(void)
{
    return "none";
}

int dp_dist_init(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (dp_dist_launched()) {
        DP_ERROR("started by mpirun, but this dptrain was built without MPI (install "
                 "libopenmpi-dev and rebuild)");
        return DP_ENOTSUP;
    }
    return 0;
}

void dp_dist_finalize(void) {}

void dp_dist_abort(int exit_code)
{
    (void)exit_code;
}

int dp_dist_rank(void)
{
    return 0;
}

int dp_dist_size(void)
{
    return 1;
}

const char *dp_dist_host(void)
{
    return "localhost";
}

int dp_dist_sum_f64(double *v, int n)
{
    (void)v;
    (void)n;
    return 0;
}

int dp_dist_sum_f32(float *v, int n)
{
    (void)v;
    (void)n;
    return 0;
}

int dp_dist_any(bool flag, bool *any)
{
    *any = flag;
    return 0;
}

int dp_dist_broadcast(void *p, size_t bytes)
{
    (void)p;
    (void)bytes;
    return 0;
}

int dp_dist_gather_u64(uint64_t v, uint64_t *all)
{
    all[0] = v;
    return 0;
}

/* One process: the hierarchical allreduce is the rank's own. */
int dp__allreduce_mpi(dp_tensor_t *const *bufs, int n, int64_t len)
{
    return dp__allreduce_naive(bufs, n, len);
}

#endif
