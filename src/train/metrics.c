/* Metrics as JSON lines: one object per line, one line per epoch or step.
 *
 * Epoch lines are flushed as soon as they are written, so a crash later in
 * training loses nothing already reported; step lines stay in the stdio
 * buffer until the next epoch line or dp_metrics_close. JSON has no NaN or
 * infinity, so non-finite numbers are written as null. */
#include "dp/train_util.h"

#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>

struct dp_metrics {
    FILE *file;
    char *path;
    int write_errno; /* first errno of a failed write; 0 while all went well */
};

static int metrics_open(dp_metrics_t **out, const char *path, const char *mode);

int dp_metrics_open(dp_metrics_t **out, const char *path)
{
    return metrics_open(out, path, "w");
}

int dp_metrics_open_append(dp_metrics_t **out, const char *path)
{
    return metrics_open(out, path, "a");
}

static int metrics_open(dp_metrics_t **out, const char *path, const char *mode)
{
    if (!out || !path) {
        DP_ERROR("dp_metrics_open: NULL argument");
        return DP_EINVAL;
    }
    *out = NULL;
    dp_metrics_t *m = dp__calloc(1, sizeof *m);
    if (!m)
        return DP_ENOMEM;
    m->path = dp__strdup(path);
    if (!m->path)
        goto fail_path;
    m->file = fopen(path, mode);
    if (!m->file) {
        DP_ERROR("cannot open metrics file %s: %s", path, strerror(errno));
        dp__free(m->path);
        dp__free(m);
        return DP_EIO;
    }
    *out = m;
    return DP_OK;

fail_path:
    dp__free(m);
    return DP_ENOMEM;
}

/* Remembers the first failure; later writes to a broken stream are skipped. */
static int check_write(dp_metrics_t *m, int failed)
{
    if (failed && m->write_errno == 0)
        m->write_errno = errno ? errno : EIO;
    if (m->write_errno) {
        DP_ERROR("cannot write metrics file %s: %s", m->path, strerror(m->write_errno));
        return DP_EIO;
    }
    return DP_OK;
}

/* `fmt` is a printf format for one double, used when the value is finite. */
static void put_number(FILE *f, const char *key, const char *fmt, double value)
{
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(value))
        fprintf(f, fmt, value);
    else
        fputs("null", f);
}

static void put_file(void *f, const char *bytes, size_t n)
{
    fwrite(bytes, 1, n, f);
}

/* Writes bytes [s, s + n) as a JSON string literal. */
static void put_string(FILE *f, const char *s, size_t n)
{
    dp__json_string(s, n, put_file, f);
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* "[cpu:0, cpu:1]" (brackets optional) becomes ["cpu:0", "cpu:1"]; empty
 * items are dropped, so "" and "[]" give []. */
static void put_devices(FILE *f, const char *devices)
{
    fputs(", \"devices\": [", f);
    if (devices) {
        const char *begin = devices, *end = devices + strlen(devices);
        while (begin < end && is_space(*begin))
            begin++;
        while (end > begin && is_space(end[-1]))
            end--;
        if (begin < end && *begin == '[' && end[-1] == ']') {
            begin++;
            end--;
        }
        bool first = true;
        while (begin < end) {
            const char *comma = memchr(begin, ',', (size_t)(end - begin));
            const char *item_end = comma ? comma : end;
            const char *a = begin, *b = item_end;
            while (a < b && is_space(*a))
                a++;
            while (b > a && is_space(b[-1]))
                b--;
            if (a < b) {
                if (!first)
                    fputs(", ", f);
                put_string(f, a, (size_t)(b - a));
                first = false;
            }
            begin = comma ? comma + 1 : end;
        }
    }
    fputc(']', f);
}

/* , "conv_algos": ["line", ...]: the non-empty lines of `text`. */
static void put_lines(FILE *f, const char *key, const char *text)
{
    fprintf(f, ", \"%s\": [", key);
    bool first = true;
    for (const char *p = text; *p;) {
        const char *end = strchr(p, '\n');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > 0) {
            if (!first)
                fputs(", ", f);
            put_string(f, p, n);
            first = false;
        }
        p += n + (end != NULL);
    }
    fputc(']', f);
}

int dp_metrics_write_epoch(dp_metrics_t *m, const dp_epoch_stats *s)
{
    if (!m || !s) {
        DP_ERROR("dp_metrics_write_epoch: NULL argument");
        return DP_EINVAL;
    }
    DP_TRY(check_write(m, 0));
    FILE *f = m->file;
    errno = 0;
    fprintf(f, "{\"epoch\": %d", s->epoch);
    put_number(f, "train_loss", "%.6f", s->train_loss);
    put_number(f, "train_acc", "%.4f", s->train_acc);
    put_number(f, "test_acc", "%.4f", s->test_acc);
    if (s->test_loss > 0)
        put_number(f, "test_loss", "%.6f", s->test_loss);
    if (s->test_top5 > 0)
        put_number(f, "test_top5", "%.4f", s->test_top5);
    put_number(f, "epoch_seconds", "%.3f", s->epoch_seconds);
    put_number(f, "samples_per_second", "%.1f", s->samples_per_second);
    put_devices(f, s->devices);
    fprintf(f, ", \"batch_size\": %lld", (long long)s->batch_size);
    put_number(f, "lr", "%.6g", s->lr);
    if (s->peak_rss_mb >= 0)
        put_number(f, "peak_rss_mb", "%.1f", s->peak_rss_mb);
    if (s->rss_mb > 0)
        put_number(f, "rss_mb", "%.1f", s->rss_mb);
    if (s->skipped_steps > 0)
        fprintf(f, ", \"skipped_steps\": %lld", (long long)s->skipped_steps);
    if (s->skipped_images > 0)
        fprintf(f, ", \"skipped_images\": %lld", (long long)s->skipped_images);
    if (s->ranks > 1) {
        fprintf(f, ", \"ranks\": %d", s->ranks);
        put_number(f, "allreduce_ms", "%.3f", s->allreduce_ms);
    }
    if (s->comm_ms > 0) {
        put_number(f, "comm_ms", "%.3f", s->comm_ms);
        put_number(f, "exposed_comm_ms", "%.3f", s->exposed_comm_ms);
    }
    if (s->pipeline_stages > 0) {
        fprintf(f, ", \"pipeline_stages\": %d", s->pipeline_stages);
        put_number(f, "bubble_fraction", "%.4f", s->bubble_fraction);
    }
    if (s->precision) {
        fputs(", \"precision\": ", f);
        put_string(f, s->precision, strlen(s->precision));
    }
    if (s->conv_algos)
        put_lines(f, "conv_algos", s->conv_algos);
    fputs("}\n", f);
    /* The stream's error flag covers every fprintf above. */
    int failed = fflush(f) != 0 || ferror(f);
    return check_write(m, failed);
}

int dp_metrics_write_step(dp_metrics_t *m, int64_t step, int epoch, double loss, double lr)
{
    if (!m) {
        DP_ERROR("dp_metrics_write_step: NULL argument");
        return DP_EINVAL;
    }
    DP_TRY(check_write(m, 0));
    errno = 0;
    fprintf(m->file, "{\"step\": %lld, \"epoch\": %d", (long long)step, epoch);
    put_number(m->file, "loss", "%.6f", loss);
    put_number(m->file, "lr", "%.9g", lr);
    int failed = fputs("}\n", m->file) == EOF || ferror(m->file);
    return check_write(m, failed);
}

int dp_metrics_close(dp_metrics_t *m)
{
    if (!m)
        return DP_OK;
    errno = 0;
    int failed = fflush(m->file) != 0 || ferror(m->file);
    if (failed && m->write_errno == 0)
        m->write_errno = errno ? errno : EIO;
    if (fclose(m->file) != 0 && m->write_errno == 0)
        m->write_errno = errno ? errno : EIO;
    int rc = DP_OK;
    if (m->write_errno) {
        DP_ERROR("cannot write metrics file %s: %s", m->path, strerror(m->write_errno));
        rc = DP_EIO;
    }
    dp__free(m->path);
    dp__free(m);
    return rc;
}
