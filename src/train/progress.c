/* A one-line progress bar on stderr, redrawn in place with '\r'.
 *
 * Redraws are throttled to about ten a second so that a fast training loop
 * spends no time on the terminal; the last batch of an epoch is always
 * drawn. The ETA is for the current epoch: batches left divided by the batch
 * rate observed since the epoch's first update. */
#include "dp/train_util.h"

#include "core/internal.h"

#include <math.h>
#include <string.h>

enum {
    BAR_WIDTH = 20,
    LINE_MAX_CHARS = 256,
};

#define REDRAW_INTERVAL_S 0.1

struct dp_progress {
    bool enabled;
    double last_draw; /* dp_time_seconds of the last redraw; < 0 before the first */
    int last_len;     /* characters on the line now, to blank when shorter */
    int epoch;        /* the epoch the rate is measured for */
    int64_t start_batch;
    double start_time; /* when start_batch was seen */
};

int dp_progress_init(dp_progress_t **out, bool enabled)
{
    if (!out) {
        DP_ERROR("dp_progress_init: NULL argument");
        return DP_EINVAL;
    }
    dp_progress_t *p = dp__calloc(1, sizeof *p);
    if (!p)
        return DP_ENOMEM;
    p->enabled = enabled;
    p->last_draw = -1.0;
    p->epoch = -1;
    *out = p;
    return DP_OK;
}

/* "0:04", "12:30" or "1:02:03"; "--:--" when unknown. */
static void format_eta(char *buf, size_t size, double seconds)
{
    if (!isfinite(seconds) || seconds < 0 || seconds > 360000.0) {
        snprintf(buf, size, "--:--");
        return;
    }
    long s = lround(seconds);
    if (s >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

static void write_line(dp_progress_t *p, const char *line, int len)
{
    /* Spaces blank what a longer previous line left behind, and as many
     * backspaces put the cursor after the line again: the line itself is
     * written once, so a log of stderr holds each drawn line once. */
    static char backspaces[LINE_MAX_CHARS];
    if (!backspaces[0])
        memset(backspaces, '\b', sizeof backspaces);
    int pad = p->last_len > len ? p->last_len - len : 0;
    fprintf(stderr, "\r%s%*s%.*s", line, pad, "", pad, backspaces);
    fflush(stderr);
    p->last_len = len;
}

void dp_progress_update(dp_progress_t *p, int epoch, int epochs, int64_t batch, int64_t batches,
                        double loss, double samples_per_second)
{
    if (!p || !p->enabled)
        return;
    double now = dp_time_seconds();
    if (epoch != p->epoch || batch < p->start_batch) {
        p->epoch = epoch;
        p->start_batch = batch;
        p->start_time = now;
    }
    bool last = batch >= batches;
    if (!last && p->last_draw >= 0 && now - p->last_draw < REDRAW_INTERVAL_S)
        return;
    p->last_draw = now;

    int filled = 0;
    if (batches > 0) {
        int64_t b = batch < 0 ? 0 : batch > batches ? batches : batch;
        filled = (int)(b * BAR_WIDTH / batches);
    }
    char bar[BAR_WIDTH + 1];
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, '.', (size_t)(BAR_WIDTH - filled));
    bar[BAR_WIDTH] = '\0';

    double elapsed = now - p->start_time;
    double done = (double)(batch - p->start_batch);
    double eta = last ? 0.0 : NAN;
    if (!last && done > 0 && elapsed > 0)
        eta = (double)(batches - batch) * elapsed / done;
    char eta_text[32];
    format_eta(eta_text, sizeof eta_text, eta);

    char loss_text[32], rate_text[32];
    if (isfinite(loss))
        snprintf(loss_text, sizeof loss_text, "%.4f", loss);
    else
        snprintf(loss_text, sizeof loss_text, "%s", isnan(loss) ? "nan" : "inf");
    if (isfinite(samples_per_second) && samples_per_second >= 0)
        snprintf(rate_text, sizeof rate_text, "%.0f", samples_per_second);
    else
        snprintf(rate_text, sizeof rate_text, "-");

    char line[LINE_MAX_CHARS];
    int len =
        snprintf(line, sizeof line, "epoch %d/%d [%s] %lld/%lld loss %s %s samples/s ETA %s", epoch,
                 epochs, bar, (long long)batch, (long long)batches, loss_text, rate_text, eta_text);
    if (len < 0)
        return;
    if (len >= (int)sizeof line)
        len = (int)sizeof line - 1;
    write_line(p, line, len);
}

void dp_progress_done(dp_progress_t *p)
{
    if (!p || !p->enabled)
        return;
    if (p->last_len > 0) {
        fprintf(stderr, "\r%*s\r", p->last_len, "");
        fflush(stderr);
    }
    p->last_len = 0;
    p->last_draw = -1.0;
    p->epoch = -1;
}

void dp_progress_close(dp_progress_t *p)
{
    dp__free(p);
}
