/* A checkpoint's record of the epochs so far, metadata 'dptrain.history':
 * one entry per epoch, "EPOCH TRAIN_LOSS TRAIN_ACC TEST_ACC SECONDS
 * SAMPLES_PER_SECOND PEAK_RSS_MB", separated by ';' (checkpoint.c writes
 * and reads it through these). */
#ifndef DP_TRAIN_CHECKPOINT_HISTORY_H
#define DP_TRAIN_CHECKPOINT_HISTORY_H

#include "dp/checkpoint.h"

/* The text of st's nhistory entries (dp__malloc'd), or NULL. */
char *dp__checkpoint_history_str(const dp_checkpoint_state *st);
/* Reads the text into st->history and st->nhistory; DP_EFORMAT, naming the
 * file and the entry, for one that is malformed, not finite or out of
 * range. */
int dp__checkpoint_parse_history(const char *path, const char *s, dp_checkpoint_state *st);

#endif
