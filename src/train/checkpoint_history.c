/* The record of the epochs a checkpoint holds (checkpoint_history.h). */
#include "train/checkpoint_history.h"

#include "core/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

char *dp__checkpoint_history_str(const dp_checkpoint_state *st)
{
    size_t cap = 64 + (size_t)st->nhistory * 160, off = 0;
    char *s = dp__malloc(cap);
    if (!s)
        return NULL;
    s[0] = '\0';
    for (int i = 0; i < st->nhistory; i++) {
        const dp_epoch_stats *h = &st->history[i];
        off += (size_t)snprintf(s + off, cap - off, "%s%d %.17g %.17g %.17g %.17g %.17g %.17g",
                                i ? ";" : "", h->epoch, h->train_loss, h->train_acc, h->test_acc,
                                h->epoch_seconds, h->samples_per_second, h->peak_rss_mb);
    }
    return s;
}

static const char *bad_epoch_field(const dp_epoch_stats *h)
{
    if (h->epoch < 1)
        return "epoch";
    if (!isfinite(h->train_loss) || h->train_loss < 0)
        return "train_loss";
    if (!(h->train_acc >= 0 && h->train_acc <= 1))
        return "train_acc";
    if (!(h->test_acc >= 0 && h->test_acc <= 1))
        return "test_acc";
    if (!isfinite(h->epoch_seconds) || h->epoch_seconds < 0)
        return "epoch_seconds";
    if (!isfinite(h->samples_per_second) || h->samples_per_second < 0)
        return "samples_per_second";
    if (!isfinite(h->peak_rss_mb) || h->peak_rss_mb < 0)
        return "peak_rss_mb";
    return NULL;
}

int dp__checkpoint_parse_history(const char *path, const char *s, dp_checkpoint_state *st)
{
    st->nhistory = 0;
    while (s && *s) {
        if (st->nhistory == DP_CHECKPOINT_MAX_HISTORY)
            break;
        dp_epoch_stats *h = &st->history[st->nhistory];
        memset(h, 0, sizeof *h);
        int used = 0;
        if (sscanf(s, "%d %lf %lf %lf %lf %lf %lf%n", &h->epoch, &h->train_loss, &h->train_acc,
                   &h->test_acc, &h->epoch_seconds, &h->samples_per_second, &h->peak_rss_mb,
                   &used) != 7) {
            DP_ERROR("%s: metadata 'dptrain.history' is malformed at entry %d", path,
                     st->nhistory + 1);
            return DP_EFORMAT;
        }
        const char *bad = bad_epoch_field(h);
        if (bad) {
            DP_ERROR("%s: metadata 'dptrain.history' entry %d: %s is not finite or out of range",
                     path, st->nhistory + 1, bad);
            return DP_EFORMAT;
        }
        h->batch_size = st->options.data.batch_size;
        h->lr = st->options.optim.lr;
        h->devices = st->devices;
        st->nhistory++;
        s += used;
        if (*s == ';')
            s++;
    }
    return 0;
}
