/* Dataset "tar"'s source (shards_source.c: reading, shards_order.c: the
 * epoch's layout and order): what both hold. */
#ifndef DP_DATA_SHARDS_SOURCE_H
#define DP_DATA_SHARDS_SOURCE_H

#include "data/dataset.h"
#include "data/shards_impl.h"
#include "dp/transform.h"

#include <pthread.h>

/* A sample read ahead of its worker. */
typedef struct ahead {
    int64_t k, id;
    uint8_t *bytes;
    size_t size;
    char *name; /* "<shard>: <member>", for messages */
} ahead;

typedef struct lane_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dp_shard_lane_t *lane; /* opened at its first read */
    int64_t next;          /* (mu) samples the lane has emitted */
    bool reading;          /* (mu) a worker reads the lane's next sample */
    int err;               /* (mu) the lane's error from position err_at on */
    int64_t err_at;
    char *err_line;
    ahead *win; /* (mu) [nwin] read ahead, room cap */
    int64_t nwin, cap;
} lane_state;

typedef struct shard_source {
    dp_shard_set_t *set;
    dp_shard_dataset_options opt;
    dp_transform_list transform;
    int decode_channels, chw[3];
    int64_t opened_before; /* shards the first image's probe opened */
    /* The layout: L lanes of P rows a batch, `samples` an epoch. */
    int lanes, rank, ranks;
    int64_t batch, per, samples;
    lane_state *ls; /* [lanes] */
    int64_t *order; /* [samples] ids by position */
    int64_t *where; /* [set samples] each id's position, -1: none this epoch */
    /* The plan. */
    bool planned;
    uint64_t seed;
    int64_t epoch, first;
    bool shuffle;
} shard_source;

/* Global position of lane j's k-th sample, and back. */
int64_t dp__tar_position(const shard_source *s, int j, int64_t k);
void dp__tar_lane_of(const shard_source *s, int64_t p, int *j, int64_t *k);
/* Each lane's shuffle buffer: ceil(shuffle_buffer / lanes), at least 1. */
int64_t dp__tar_lane_buffer(const shard_source *s);
/* Whether position p is read by this rank this epoch: not before the
 * first, and in this rank's chunk of its batch (torch.chunk's). */
bool dp__tar_mine(const shard_source *s, int64_t p);
/* Lane back to its start (no worker in it); the layout freed. */
void dp__tar_lane_reset(lane_state *ls);
void dp__tar_free_layout(shard_source *s);
/* dp__source_ops' layout and plan (dataset.h). */
int64_t dp__tar_layout(void *self, int64_t batch, int rank, int ranks, int64_t limit);
int dp__tar_plan(void *self, uint64_t seed, int64_t epoch, bool shuffle, int64_t first,
                 int64_t *perm);

#endif
