/* The process's table of convolution kernel choices (conv_choice.h), its
 * text form, and the test trace. A line of text is one shape:
 *
 *   bf16 64x28x28 k64 3x3 s1x1 p1x1: forward=direct backward_data=direct backward_weights=gemm
 *
 * (precision, input C x H x W, output channels, kernel R x S, stride,
 * padding, then the passes chosen so far); a shape with padding that
 * differs between the sides, dilation or groups says so before the colon:
 *
 *   f32 32x14x14 k32 3x3 s2x2 p0x0x1x1 d2x2 g32: forward=direct
 *
 * (dp__conv_shape_str). */
#include "device/conv_choice.h"

#include "core/internal.h"
#include "device/device.h"
#include "dp/ops.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char *const impl_names[] = {"direct", "blocked", "winograd", "gemm"};
_Static_assert(DP_COUNTOF(impl_names) == DP__CONV_IMPLS, "a name for every implementation");
static const char *const pass_names[] = {"forward", "backward_data", "backward_weights"};
_Static_assert(DP_COUNTOF(pass_names) == DP__CONV_PASSES, "a name for every pass");

const char *dp__conv_impl_name(dp__conv_impl impl)
{
    return (unsigned)impl < DP__CONV_IMPLS ? impl_names[impl] : "?";
}

const char *dp__conv_pass_name(dp__conv_pass pass)
{
    return (unsigned)pass < DP__CONV_PASSES ? pass_names[pass] : "?";
}

typedef struct choice {
    dp__conv_shape shape;
    int8_t impl[DP__CONV_PASSES]; /* dp__conv_impl, or -1: not chosen yet */
    /* bit p: pass p was measured by this process (not loaded), for the
     * kernels' cache file, which takes what a process measured itself */
    uint8_t measured;
} choice;

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static choice *table;
static size_t ntable, cap_table;

static bool same_shape(const dp__conv_shape *a, const dp__conv_shape *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* The entry of s in t[0..n), or NULL. */
static choice *find(choice *t, size_t n, const dp__conv_shape *s)
{
    for (size_t i = 0; i < n; i++)
        if (same_shape(&t[i].shape, s))
            return &t[i];
    return NULL;
}

/* The entry of s, added (nothing chosen) when missing; NULL without memory. */
static choice *find_or_add(const dp__conv_shape *s)
{
    choice *c = find(table, ntable, s);
    if (c)
        return c;
    if (ntable == cap_table) {
        size_t cap = cap_table ? 2 * cap_table : 16;
        choice *t = realloc(table, cap * sizeof *t);
        if (!t)
            return NULL;
        table = t;
        cap_table = cap;
    }
    c = &table[ntable++];
    memset(c, 0, sizeof *c);
    c->shape = *s;
    memset(c->impl, -1, sizeof c->impl);
    return c;
}

int dp__conv_choose(const dp__conv_shape *s, dp__conv_pass pass, dp__conv_measure_fn measure,
                    void *ctx, dp__conv_impl *out)
{
    pthread_mutex_lock(&table_mu);
    choice *c = find_or_add(s);
    int rc = c ? 0 : DP_ENOMEM;
    if (c && c->impl[pass] < 0) {
        dp__conv_impl best = DP__CONV_DIRECT;
        rc = measure(ctx, &best);
        if (rc == 0) {
            c->impl[pass] = (int8_t)best;
            c->measured |= (uint8_t)(1u << pass);
        }
    }
    if (rc == 0)
        *out = (dp__conv_impl)c->impl[pass];
    pthread_mutex_unlock(&table_mu);
    return rc;
}

int dp__conv_choice_find(const dp__conv_shape *s, dp__conv_pass pass)
{
    pthread_mutex_lock(&table_mu);
    choice *c = find(table, ntable, s);
    int impl = c ? c->impl[pass] : -1;
    pthread_mutex_unlock(&table_mu);
    return impl;
}

int dp__conv_shape_str(char *buf, size_t size, const dp__conv_shape *s)
{
    int n = snprintf(buf, size, "%s %dx%dx%d k%d %dx%d s%dx%d p%dx%d",
                     s->precision == DP_PRECISION_BF16 ? "bf16" : "f32", s->c, s->h, s->w, s->k,
                     s->r, s->s, s->stride_h, s->stride_w, s->pad_h, s->pad_w);
    /* the lines of symmetric, undilated, ungrouped shapes keep the form
     * that checkpoints written before these fields hold */
    if (n >= 0 && (size_t)n < size && (s->pad_bottom != s->pad_h || s->pad_right != s->pad_w))
        n += snprintf(buf + n, size - (size_t)n, "x%dx%d", s->pad_bottom, s->pad_right);
    if (n >= 0 && (size_t)n < size && (s->dilation_h != 1 || s->dilation_w != 1))
        n += snprintf(buf + n, size - (size_t)n, " d%dx%d", s->dilation_h, s->dilation_w);
    if (n >= 0 && (size_t)n < size && s->groups != 1)
        n += snprintf(buf + n, size - (size_t)n, " g%d", s->groups);
    return n;
}

/* The table's lines; with measured_only, only the passes this process
 * measured (and only the shapes with one). */
static char *choices_text(bool measured_only)
{
    pthread_mutex_lock(&table_mu);
    size_t cap = 160 * (ntable + 1), len = 0;
    char *text = malloc(cap);
    if (text) {
        text[0] = '\0';
        for (size_t i = 0; i < ntable; i++) {
            char line[160];
            unsigned wanted = measured_only ? table[i].measured : (1u << DP__CONV_PASSES) - 1;
            if (!wanted)
                continue;
            int n = dp__conv_shape_str(line, sizeof line, &table[i].shape);
            n += snprintf(line + n, sizeof line - (size_t)n, ":");
            for (int p = 0; p < DP__CONV_PASSES; p++)
                if (table[i].impl[p] >= 0 && (wanted & (1u << p)))
                    n += snprintf(line + n, sizeof line - (size_t)n, " %s=%s", pass_names[p],
                                  impl_names[table[i].impl[p]]);
            len += (size_t)snprintf(text + len, cap - len, "%s\n", line);
        }
    }
    pthread_mutex_unlock(&table_mu);
    return text;
}

char *dp__conv_choices_text(void)
{
    return choices_text(false);
}

char *dp_conv_choices_save_measured(void)
{
    return choices_text(true);
}

int dp_conv_choices_key(char *buf, size_t size)
{
    size_t n = 0;
    if (size > 0)
        buf[0] = '\0';
    for (int i = 0; i < DP__BACKEND_COUNT; i++) {
        const dp__backend *b = dp__backend_get((dp__backend_id)i);
        if (!b->choice_key || !dp__backend_built(b))
            continue;
        char key[1024];
        b->choice_key(key, sizeof key);
        n += (size_t)snprintf(buf + DP_MIN(n, size), size - DP_MIN(n, size), "%s%s", n ? "; " : "",
                              key);
    }
    return (int)n;
}

/* One line into *c; 0, or DP_EINVAL (logged with the line where `log`). */
static int parse_line(const char *line, size_t len, choice *c, bool log)
{
    char buf[256], prec[8];
    if (len >= sizeof buf)
        goto bad;
    memcpy(buf, line, len);
    buf[len] = '\0';
    memset(c, 0, sizeof *c);
    memset(c->impl, -1, sizeof c->impl);
    dp__conv_shape *s = &c->shape;
    int used = 0, more = 0;
    if (sscanf(buf, "%7s %dx%dx%d k%d %dx%d s%dx%d p%dx%d%n", prec, &s->c, &s->h, &s->w, &s->k,
               &s->r, &s->s, &s->stride_h, &s->stride_w, &s->pad_h, &s->pad_w, &used) != 11 ||
        used == 0)
        goto bad;
    s->pad_bottom = s->pad_h;
    s->pad_right = s->pad_w;
    s->dilation_h = s->dilation_w = s->groups = 1;
    /* the optional parts, in dp__conv_shape_str's order */
    if (buf[used] == 'x') {
        if (sscanf(buf + used, "x%dx%d%n", &s->pad_bottom, &s->pad_right, &more) != 2 || !more)
            goto bad;
        used += more, more = 0;
    }
    if (strncmp(buf + used, " d", 2) == 0) {
        if (sscanf(buf + used, " d%dx%d%n", &s->dilation_h, &s->dilation_w, &more) != 2 || !more)
            goto bad;
        used += more, more = 0;
    }
    if (strncmp(buf + used, " g", 2) == 0) {
        if (sscanf(buf + used, " g%d%n", &s->groups, &more) != 1 || !more)
            goto bad;
        used += more, more = 0;
    }
    if (buf[used] != ':')
        goto bad;
    used++;
    if (strcmp(prec, "bf16") == 0)
        s->precision = DP_PRECISION_BF16;
    else if (strcmp(prec, "f32") != 0)
        goto bad;
    if (s->c < 1 || s->h < 1 || s->w < 1 || s->k < 1 || s->r < 1 || s->s < 1 || s->stride_h < 1 ||
        s->stride_w < 1 || s->pad_h < 0 || s->pad_w < 0 || s->pad_bottom < 0 || s->pad_right < 0 ||
        s->dilation_h < 1 || s->dilation_w < 1 || s->groups < 1 || s->c % s->groups != 0 ||
        s->k % s->groups != 0)
        goto bad;
    char *tok = strtok(buf + used, " ");
    for (; tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        if (!eq)
            goto bad;
        *eq = '\0';
        int pass = -1, impl = -1;
        for (int p = 0; p < DP__CONV_PASSES; p++)
            if (strcmp(tok, pass_names[p]) == 0)
                pass = p;
        for (int i = 0; i < DP__CONV_IMPLS; i++)
            if (strcmp(eq + 1, impl_names[i]) == 0)
                impl = i;
        if (pass < 0 || impl < 0)
            goto bad;
        c->impl[pass] = (int8_t)impl;
    }
    return 0;
bad:
    if (!log)
        return DP_EINVAL;
    DP_ERROR("convolution choices: cannot read the line '%.*s' (expected e.g. 'bf16 64x28x28 "
             "k64 3x3 s1x1 p1x1: forward=direct backward_weights=gemm')",
             (int)DP_MIN(len, 120), line);
    return DP_EINVAL;
}

int dp__conv_choices_parse(const char *text)
{
    /* Read every line first, so that a bad one installs nothing. */
    choice *lines = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (const char *p = text; *p && rc == 0;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                choice *t = realloc(lines, cap * sizeof *t);
                if (!t) {
                    rc = DP_ENOMEM;
                    break;
                }
                lines = t;
            }
            rc = parse_line(p, len, &lines[n], true);
            if (rc == 0)
                n++;
        }
        p += len + (end ? 1 : 0);
    }
    if (rc == 0) {
        pthread_mutex_lock(&table_mu);
        for (size_t i = 0; i < n && rc == 0; i++) {
            choice *c = find_or_add(&lines[i].shape);
            if (!c) {
                rc = DP_ENOMEM;
                break;
            }
            /* a loaded choice that replaces this process's measured one
             * is no longer its measurement; loading the same one back
             * (the cache's reader puts the table's own choices back over
             * the file's) leaves it as it was */
            for (int p = 0; p < DP__CONV_PASSES; p++)
                if (lines[i].impl[p] >= 0 && lines[i].impl[p] != c->impl[p]) {
                    c->impl[p] = lines[i].impl[p];
                    c->measured &= (uint8_t) ~(1u << p);
                }
        }
        pthread_mutex_unlock(&table_mu);
    }
    free(lines);
    return rc;
}

int dp_conv_choices_check(const char *line)
{
    choice c;
    return line ? parse_line(line, strcspn(line, "\n"), &c, false) : DP_EINVAL;
}

void dp__conv_choices_reset(void)
{
    pthread_mutex_lock(&table_mu);
    ntable = 0;
    pthread_mutex_unlock(&table_mu);
}

/* ---- the test hooks: candidates' timings, and the trace -------------------- */

/* Read by the devices' workers while they measure, set by a test's thread:
 * atomic, so that neither sees half of it. */
static dp__conv_timing_fn timing_hook;

void dp__conv_set_timing_hook(dp__conv_timing_fn hook)
{
    __atomic_store_n(&timing_hook, hook, __ATOMIC_RELEASE);
}

double dp__conv_timing(dp__conv_pass pass, dp__conv_impl impl, double measured)
{
    dp__conv_timing_fn hook = __atomic_load_n(&timing_hook, __ATOMIC_ACQUIRE);
    return hook ? hook(pass, impl, measured) : measured;
}

typedef struct trace_entry {
    const void *dev;
    dp__conv_shape shape;
    dp__conv_pass pass;
    int impl; /* -2 once two implementations ran */
} trace_entry;

static pthread_mutex_t trace_mu = PTHREAD_MUTEX_INITIALIZER;
static bool tracing;
static trace_entry trace_table[512];
static int ntrace;

void dp__conv_trace(bool on)
{
    pthread_mutex_lock(&trace_mu);
    tracing = on;
    if (on)
        ntrace = 0;
    pthread_mutex_unlock(&trace_mu);
}

static trace_entry *trace_lookup(const void *dev, const dp__conv_shape *s, dp__conv_pass pass)
{
    for (int i = 0; i < ntrace; i++)
        if (trace_table[i].dev == dev && trace_table[i].pass == pass &&
            same_shape(&trace_table[i].shape, s))
            return &trace_table[i];
    return NULL;
}

void dp__conv_trace_record(const void *dev, const dp__conv_shape *s, dp__conv_pass pass,
                           dp__conv_impl impl)
{
    pthread_mutex_lock(&trace_mu);
    if (tracing) {
        trace_entry *e = trace_lookup(dev, s, pass);
        if (e && e->impl != (int)impl)
            e->impl = -2;
        else if (!e && ntrace < (int)DP_COUNTOF(trace_table))
            trace_table[ntrace++] = (trace_entry){dev, *s, pass, (int)impl};
    }
    pthread_mutex_unlock(&trace_mu);
}

int dp__conv_trace_find(const void *dev, const dp__conv_shape *s, dp__conv_pass pass)
{
    pthread_mutex_lock(&trace_mu);
    trace_entry *e = trace_lookup(dev, s, pass);
    int impl = e ? e->impl : -1;
    pthread_mutex_unlock(&trace_mu);
    return impl;
}

bool dp__conv_trace_get(int i, const void **dev, dp__conv_shape *s, dp__conv_pass *pass,
                        dp__conv_impl *impl)
{
    pthread_mutex_lock(&trace_mu);
    bool ok = i >= 0 && i < ntrace;
    if (ok) {
        *dev = trace_table[i].dev;
        *s = trace_table[i].shape;
        *pass = trace_table[i].pass;
        *impl = (dp__conv_impl)trace_table[i].impl;
    }
    pthread_mutex_unlock(&trace_mu);
    return ok;
}

static long reference_runs;

void dp__conv_note_reference_run(void)
{
    __atomic_add_fetch(&reference_runs, 1, __ATOMIC_RELAXED);
}

long dp__conv_reference_runs(void)
{
    return __atomic_load_n(&reference_runs, __ATOMIC_RELAXED);
}
