/* The training state a checkpoint's metadata holds (dptrain.epochs_done,
 * step, seed, the recorded options, where a stopped epoch stood, the
 * history, the kernels measured, the best accuracy), each value read and
 * checked as its own parser reads it: a file from elsewhere may say
 * anything. Read from the header alone, so that --resume's file is checked
 * before any data are loaded. */
#include "train/checkpoint_header.h"

#include "core/internal.h"
#include "train/checkpoint_history.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A count in [lo, hi]; one past either end (strtoll's ERANGE included) is
 * a corrupt file, never a value clamped or cut to fit. */
int dp__checkpoint_meta_i64(const dp_safetensors_t *f, const char *path, const char *key,
                            int64_t lo, int64_t hi, int64_t *out)
{
    const char *v = dp_safetensors_meta(f, key);
    char *end;
    if (!v) {
        DP_ERROR("%s: no '%s' in the metadata: not a dptrain checkpoint to resume from", path, key);
        return DP_EFORMAT;
    }
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno == ERANGE || x < lo || x > hi) {
        DP_ERROR("%s: metadata '%s' is %s, not a count from %" PRId64 " to %" PRId64, path, key,
                 DP_REPR(v), lo, hi);
        return DP_EFORMAT;
    }
    *out = x;
    return 0;
}

/* The options the list records, over the defaults, each read and checked
 * as its option reads a command line's text: a checkpoint whose lr is nan
 * would train on with it. An option the file lacks keeps its default. */
static int load_recorded(const dp_safetensors_t *f, const char *path, dp_checkpoint_state *st)
{
    int count;
    const dp_option *opts = dp_train_option_list(&count);
    dp_train_options_default(&st->options);
    for (int i = 0; i < count; i++) {
        char key[64], why[256];
        snprintf(key, sizeof key, "dptrain.%s", opts[i].name);
        const char *v = dp_safetensors_meta(f, key);
        if (!(opts[i].traits & DP_OPTION_RECORD) || !v)
            continue;
        if (dp_option_parse(&opts[i], &st->options, v, why, sizeof why) < 0) {
            DP_ERROR("%s: metadata '%s' is %s: %s", path, key, DP_REPR(v), why);
            return DP_EFORMAT;
        }
        st->recorded[i] = true;
    }
    return 0;
}

int dp__checkpoint_read_state(const dp_safetensors_t *f, const char *path, dp_checkpoint_state *st)
{
    memset(st, 0, sizeof *st);
    int64_t epochs = 0, seed = 0;
    int rc = dp__checkpoint_meta_i64(f, path, "dptrain.epochs_done", 0, INT_MAX, &epochs);
    if (rc == 0)
        rc = dp__checkpoint_meta_i64(f, path, "dptrain.step", 0, INT64_MAX, &st->step);
    if (rc == 0)
        rc = dp__checkpoint_meta_i64(f, path, "dptrain.seed", 0, INT64_MAX, &seed);
    if (rc == 0)
        rc = load_recorded(f, path, st);
    if (rc == 0 && dp_safetensors_meta(f, "dptrain.batch")) {
        rc = dp__checkpoint_meta_i64(f, path, "dptrain.batch", 0, INT64_MAX, &st->batch);
        const char *partial = dp_safetensors_meta(f, "dptrain.partial");
        if (rc == 0 && (!partial || sscanf(partial, "%lf %lf %lf", &st->partial_loss,
                                           &st->partial_correct, &st->partial_seconds) != 3)) {
            DP_ERROR("%s: metadata 'dptrain.partial' is missing or malformed", path);
            rc = DP_EFORMAT;
        } else if (rc == 0 && !(isfinite(st->partial_loss) && st->partial_loss >= 0 &&
                                isfinite(st->partial_correct) && st->partial_correct >= 0 &&
                                isfinite(st->partial_seconds) && st->partial_seconds >= 0)) {
            DP_ERROR("%s: metadata 'dptrain.partial' is %s: expected three finite numbers >= 0",
                     path, DP_REPR(partial));
            rc = DP_EFORMAT;
        }
    }
    if (rc == 0) {
        st->epochs_done = (int)epochs;
        st->seed = (uint64_t)seed;
        const char *devices = dp_safetensors_meta(f, "dptrain.devices");
        snprintf(st->devices, sizeof st->devices, "%s", devices ? devices : "");
        rc = dp__checkpoint_parse_history(path, dp_safetensors_meta(f, "dptrain.history"), st);
    }
    const char *algos = dp_safetensors_meta(f, "dptrain.conv_algos");
    if (rc == 0 && algos && strlen(algos) >= sizeof st->conv_algos) {
        DP_ERROR("%s: metadata 'dptrain.conv_algos' is longer than a checkpoint's (%zu bytes)",
                 path, sizeof st->conv_algos);
        rc = DP_EFORMAT;
    }
    const char *schedule = dp_safetensors_meta(f, "dptrain.lr_schedule");
    const char *best = dp_safetensors_meta(f, "dptrain.best");
    if (rc == 0 && best &&
        (sscanf(best, "%lf %d", &st->best_acc, &st->best_epoch) != 2 ||
         !(st->best_acc >= 0 && st->best_acc <= 1) || st->best_epoch < 1 ||
         st->best_epoch > st->epochs_done)) {
        DP_ERROR("%s: metadata 'dptrain.best' is %s: expected an accuracy in [0, 1] and an "
                 "epoch of those done",
                 path, DP_REPR(best));
        rc = DP_EFORMAT;
    }
    if (rc == 0) {
        snprintf(st->lr_schedule, sizeof st->lr_schedule, "%s", schedule ? schedule : "");
        snprintf(st->conv_algos, sizeof st->conv_algos, "%s", algos ? algos : "");
    }
    return rc;
}
