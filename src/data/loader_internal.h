/* The loader's state (loader.c: the ring and its workers) and what its
 * workers do to each sample (loader_sample.c). */
#ifndef DP_DATA_LOADER_INTERNAL_H
#define DP_DATA_LOADER_INTERNAL_H

#include "dp/data.h"

#include <pthread.h>

#define DP_LOADER_MAX_WORKERS 256
#define DP_LOADER_MAX_PREFETCH 64

/* One batch's place in the ring: this rank's rows of global batch `index`. */
typedef struct dp__loader_slot {
    float *x;      /* [cap, channels, rows, cols] */
    int32_t *y;    /* [cap] */
    int *status;   /* [cap]: 0, or the DP_E* code of a row that did not read */
    int64_t index; /* (m) the global batch it holds or is filling; -1: none */
    int64_t n;     /* samples in the global batch */
    int64_t first; /* its row that row 0 here is */
    int64_t rows;  /* rows of it here */
    int64_t todo;  /* (m) rows not yet read */
    /* (m) The first bad row and its line, as its worker logged it: the
     * code the batch stops the run with. -1: no bad row. */
    int64_t error_row;
    char error[1024];
} dp__loader_slot;

struct dp_loader {
    const dp_dataset *ds;
    int64_t n; /* samples used: min(limit, ds->n) */
    int64_t batch_size;
    int64_t num_batches;
    size_t sample_floats; /* channels * rows * cols */
    bool shuffle;
    uint64_t seed;
    dp_augment_options augment;
    bool transform, random; /* dp_augment_any, dp_augment_random */
    int rank, ranks;
    dp_bad_images bad_images;
    int64_t epoch; /* the current epoch, for the draws */
    int64_t *perm; /* [n]: sample ids in this epoch's order */
    dp__loader_slot *slots;
    int nslots;

    pthread_t *threads; /* [nworkers] */
    int nworkers, started_threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;  /* workers wait here for work */
    pthread_cond_t ready_cv; /* callers wait here for a batch, or for busy 0 */
    bool started;            /* (m) an epoch was started */
    bool active;             /* (m) the workers may read samples */
    bool stop;               /* (m) the workers must exit */
    bool held;               /* (m) the caller holds batch next_consume - 1 */
    int busy;                /* (m) workers reading a sample now */
    int64_t next_batch;      /* (m) the batch and row the next worker reads */
    int64_t next_row;
    int64_t next_consume; /* (m) next batch dp_loader_next hands out */
};

/* Sets slot s up for global batch b: its size, this rank's rows, their
 * labels (m). */
void dp__loader_slot_begin(const dp_loader_t *l, dp__loader_slot *s, int64_t b);
/* Reads row r of slot s (scratch: sample_floats floats); 0 or the
 * sample's DP_E* code. */
int dp__loader_read_row(const dp_loader_t *l, dp__loader_slot *s, int64_t r, float *scratch);
/* The finished slot s as a batch: bad rows left out (skip) or the first
 * one's code returned (stop). */
int dp__loader_settle(const dp_loader_t *l, dp__loader_slot *s, dp_batch *out);
/* The workers when 0 is asked for. */
int dp__loader_default_workers(void);

#endif
