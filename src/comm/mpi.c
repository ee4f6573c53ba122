/* Many processes through Open MPI: the ranks, the sum across them that the
 * hierarchical allreduce (DP_ALLREDUCE_MPI, allreduce_mpi.c) runs on a
 * device's worker, and the front end's small collectives.
 *
 * Three communicators, all duplicates of MPI_COMM_WORLD: `grad` for the
 * gradient allreduce that the first device's worker runs in stream order,
 * `ctl` for the front end (stop requests, epoch totals, evaluation counts),
 * `stats` for SyncBatchNorm's statistics, which one device worker of each
 * rank sums, layer after layer, inside the forward and backward passes.
 * Collectives on one communicator must be issued in the same order on every
 * rank; with one communicator per thread they are, while both threads run
 * at once (MPI_THREAD_MULTIPLE).
 *
 * Errors return (MPI_ERRORS_RETURN) as DP_ECOMM with MPI's message, so the
 * command line can name this rank and end the job with MPI_Abort; a rank
 * that dies outright is seen by mpirun, which ends the others. */
#include "dp/dist.h"

#include "comm/mpi.h"
#include "core/internal.h"
#include "core/pairwise.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static MPI_Comm comm_grad = MPI_COMM_NULL, comm_ctl = MPI_COMM_NULL, comm_stats = MPI_COMM_NULL;
static char host[MPI_MAX_PROCESSOR_NAME + 1] = "localhost";

/* The bf16 exchange's buffer, kept from step to step (a bucket of tens of
 * MB would otherwise be mapped and faulted in anew every step): this rank's
 * values, then every rank's. Only the first device's communication path
 * sums gradients, one bucket after another: one caller at a time. */
static uint16_t *bf16_buf;
static size_t bf16_cap;

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

/* MPI's check macro, as DP_NCCL_CHECK (nccl.c) and DP_CUDA_CHECK are
 * theirs: evaluates `call` once and returns DP_ECOMM, logged with `what`
 * (the operation, e.g. "MPI_Iallreduce of the gradients") and MPI's own
 * words, where it fails. */
#define DP_MPI_CHECK(call, what)                                                                   \
    do {                                                                                           \
        int dp__me = (call);                                                                       \
        if (dp__me != MPI_SUCCESS)                                                                 \
            return mpi_fail(dp__me, what);                                                         \
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
    DP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_grad), "MPI_Comm_dup");
    DP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_ctl), "MPI_Comm_dup");
    DP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_stats), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(comm_grad, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(comm_stats, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(comm_ctl, MPI_ERRORS_RETURN);
    return 0;
}

void dp_dist_finalize(void)
{
    if (!active)
        return;
    MPI_Comm_free(&comm_grad);
    MPI_Comm_free(&comm_ctl);
    MPI_Comm_free(&comm_stats);
    dp__free(bf16_buf);
    bf16_buf = NULL;
    bf16_cap = 0;
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
    DP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, comm_ctl), "MPI_Allreduce");
    return 0;
}

int dp_dist_sum_f32(float *v, int n)
{
    if (world_size == 1)
        return 0;
    DP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, comm_ctl), "MPI_Allreduce");
    return 0;
}

int dp_dist_any(bool flag, bool *any)
{
    int v = flag;
    if (world_size > 1)
        DP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, comm_ctl),
                     "MPI_Allreduce");
    *any = v != 0;
    return 0;
}

int dp_dist_broadcast(void *p, size_t bytes)
{
    if (world_size == 1)
        return 0;
    for (size_t off = 0; off < bytes;) {
        int chunk = (int)DP_MIN(bytes - off, (size_t)1 << 30);
        DP_MPI_CHECK(MPI_Bcast((char *)p + off, chunk, MPI_BYTE, 0, comm_ctl), "MPI_Bcast");
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
    DP_MPI_CHECK(MPI_Allgather(&v, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm_ctl),
                 "MPI_Allgather");
    return 0;
}

/* ---- the gradient sum across ranks -------------------------------------- */

/* Waits for a nonblocking collective without spinning: Open MPI's TCP
 * transport progresses only inside MPI calls, and a blocking MPI_Allreduce
 * polls the sockets nonstop, taking the core that the device's worker needs
 * for the backward pass the bucket overlaps. MPI_Test every 100 us keeps
 * the transfer moving (the kernel's socket buffers carry it in between) and
 * leaves the core to the kernels. */
static int wait_request(MPI_Request *req)
{
    int done = 0;
    for (;;) {
        int e = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (e != MPI_SUCCESS || done)
            return e;
        struct timespec pause = {0, 100 * 1000};
        nanosleep(&pause, NULL);
    }
}

/* Time inside the gradient sums, for dp_dist_comm_seconds. */
static void count_comm(double t0)
{
    double dt = MPI_Wtime() - t0;
    pthread_mutex_lock(&stats_mu);
    comm_seconds += dt;
    comm_calls++;
    pthread_mutex_unlock(&stats_mu);
}

int dp__dist_sum_grads(float *data, int64_t len)
{
    double t0 = MPI_Wtime();
    for (int64_t off = 0; off < len;) {
        int chunk = (int)DP_MIN(len - off, (int64_t)1 << 30);
        MPI_Request req;
        DP_MPI_CHECK(
            MPI_Iallreduce(MPI_IN_PLACE, data + off, chunk, MPI_FLOAT, MPI_SUM, comm_grad, &req),
            "MPI_Iallreduce of the gradients");
        DP_MPI_CHECK(wait_request(&req), "MPI_Iallreduce of the gradients");
        off += chunk;
    }
    count_comm(t0);
    return 0;
}

int dp__dist_sum_grads_bf16(float *data, int64_t len)
{
    double t0 = MPI_Wtime();
    /* Chunks small enough for an int count of every rank's part. */
    int64_t most = DP_MIN(len, ((int64_t)1 << 30) / world_size);
    size_t need = (size_t)most * (size_t)(world_size + 1);
    if (need > bf16_cap) {
        dp__free(bf16_buf);
        bf16_cap = 0;
        bf16_buf = dp__malloc(need * sizeof *bf16_buf);
        if (!bf16_buf)
            return DP_ENOMEM;
        bf16_cap = need;
    }
    uint16_t *mine = bf16_buf, *all = bf16_buf + most;
    int rc = 0;
    for (int64_t off = 0; rc == 0 && off < len;) {
        int chunk = (int)DP_MIN(len - off, most);
        for (int i = 0; i < chunk; i++)
            mine[i] = dp__bf16_from_f32(data[off + i]);
        MPI_Request req;
        int e =
            MPI_Iallgather(mine, chunk, MPI_UINT16_T, all, chunk, MPI_UINT16_T, comm_grad, &req);
        if (e == MPI_SUCCESS)
            e = wait_request(&req);
        if (e != MPI_SUCCESS) {
            rc = mpi_fail(e, "MPI_Allgather of the bf16 gradients");
            break;
        }
        dp__bf16_sum_ranks(all, world_size, chunk, data + off);
        off += chunk;
    }
    count_comm(t0);
    return rc;
}

int dp__dist_sum_stats(double *v, int64_t len)
{
    if (world_size == 1)
        return 0;
    if (len > INT32_MAX / world_size) {
        DP_ERROR("batch norm statistics of %lld values: too many to exchange", (long long)len);
        return DP_EINVAL;
    }
    double t0 = MPI_Wtime();
    double *all = dp__malloc((size_t)(len * world_size) * sizeof *all);
    if (!all)
        return DP_ENOMEM;
    MPI_Request req;
    int e = MPI_Iallgather(v, (int)len, MPI_DOUBLE, all, (int)len, MPI_DOUBLE, comm_stats, &req);
    if (e == MPI_SUCCESS)
        e = wait_request(&req);
    int rc = e == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Allgather of batch norm's statistics");
    if (rc == 0) {
        dp__pairwise_sum_f64(all, world_size, len, len);
        memcpy(v, all, (size_t)len * sizeof *v);
    }
    dp__free(all);
    count_comm(t0);
    return rc;
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

/* One process: nothing to sum across (never called with one rank). */
int dp__dist_sum_grads(float *data, int64_t len)
{
    (void)data;
    (void)len;
    return 0;
}

int dp__dist_sum_grads_bf16(float *data, int64_t len)
{
    (void)data;
    (void)len;
    return 0;
}

int dp__dist_sum_stats(double *v, int64_t len)
{
    (void)v;
    (void)len;
    return 0;
}

#endif
