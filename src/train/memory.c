/* A step's memory, estimated before anything is allocated: a valid flag
 * (`batch_size` 1048576) or a valid model (a chain of 100,000 ONNX nodes)
 * would otherwise grow the process until the kernel kills it, minutes in.
 *
 * The estimate comes from the model's trace on the meta device (every op's
 * output for one sample: nn/trace.h), per device:
 *   activations  every op's output, kept for the backward pass, for the
 *                device's rows of a batch, and the input, plus the largest
 *                output twice over (its gradient and the next one's while
 *                the backward pass runs);
 *   parameters, their gradients and the optimizer's state (SGD's
 *                momentum: one copy, Adam's: two), and the buffers;
 * plus the loader's batches on the host (the batch being trained, the one
 * prefetched, the one being filled). A pipeline's device is counted as if
 * it held the whole model: an upper bound. CPU devices share the host's
 * memory; a GPU has its own.
 *
 * What is available: MemAvailable (/proc/meminfo), and the limit of this
 * process's cgroup less what it uses (cgroup v2's memory.max and
 * memory.current, v1's memory.limit_in_bytes and usage_in_bytes) where one
 * is set; `max_memory` replaces both. */
#include "train/trainer.h"

#include "core/internal.h"
#include "nn/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The loader's batches held at once on the host. */
enum { LOADER_BATCHES = 3 };

typedef struct step_memory {
    double activations, params, grads, state, buffers; /* bytes, per device */
    double loader;                                     /* bytes, on the host */
    int64_t rows;                                      /* per device */
} step_memory;

static double numel_of(const dp_param_spec *specs, int n)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        double e = 1;
        for (int d = 0; d < specs[i].ndim; d++)
            e *= (double)specs[i].shape[d];
        total += e;
    }
    return total;
}

/* The optimizer's state, in copies of the parameters. */
static int state_copies(const dp_train_options *o)
{
    if (o->optim.optimizer != DP_OPTIMIZER_SGD)
        return 2; /* exp_avg, exp_avg_sq */
    return o->optim.momentum > 0 || o->schedule.lr_schedule == DP_LR_ONECYCLE ? 1 : 0;
}

static int estimate(const dp__trainer *t, const dp_model_def *def, const int64_t *chw,
                    step_memory *m)
{
    const dp_train_options *o = t->o;
    double sample = (double)chw[0] * (double)chw[1] * (double)chw[2], outputs, largest;
    DP_TRY(dp__trace_activations(def, chw, &outputs, &largest));
    outputs += sample;
    largest = sample > largest ? sample : largest;
    int ndev = dp__net_count(t->net);
    int replicas = o->parallel.pipeline ? ndev / o->parallel.pipeline : ndev;
    int64_t shares = (int64_t)t->ranks * (replicas > 0 ? replicas : 1);
    m->rows = (o->data.batch_size + shares - 1) / shares;
    double params = numel_of(def->params, def->nparams);
    m->activations = 4.0 * (double)m->rows * (outputs + 2 * largest);
    m->params = 4.0 * params;
    m->grads = 4.0 * params;
    m->state = 4.0 * params * state_copies(o);
    m->buffers = def->buffers ? 4.0 * numel_of(def->buffers, def->nbuffers) : 0;
    m->loader = 4.0 * sample * (double)o->data.batch_size / t->ranks * LOADER_BATCHES;
    return 0;
}

/* A value in bytes of a "Key:   N kB" line of a /proc file; -1 if none. */
static double proc_kb(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    double v = -1;
    size_t len = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, len) == 0 && line[len] == ':')
            v = 1024.0 * strtod(line + len + 1, NULL);
    if (f)
        fclose(f);
    return v;
}

/* A file holding one number ("max": none); -1 if none. */
static double file_number(const char *dir, const char *name)
{
    char path[512], text[64] = "";
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    bool read = fgets(text, sizeof text, f) != NULL;
    fclose(f);
    char *end;
    double v = read ? strtod(text, &end) : -1;
    return read && end != text ? v : -1;
}

/* This process's cgroup's memory limit less its use, or -1 where none. */
static double cgroup_room(void)
{
    char line[512], dir[600] = "";
    FILE *f = fopen("/proc/self/cgroup", "r");
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "0::", 3) == 0) /* v2: the unified hierarchy */
            snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", line + 3);
    }
    if (f)
        fclose(f);
    double limit = dir[0] ? file_number(dir, "memory.max") : -1;
    double used = dir[0] ? file_number(dir, "memory.current") : -1;
    if (limit < 0) { /* v1 */
        limit = file_number("/sys/fs/cgroup/memory", "memory.limit_in_bytes");
        used = file_number("/sys/fs/cgroup/memory", "memory.usage_in_bytes");
    }
    /* v1 writes "no limit" as a page-rounded 2^63. */
    if (limit < 0 || limit >= 9e18 || used < 0)
        return -1;
    return limit > used ? limit - used : 0;
}

static const char *bytes_str(double b, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
    int u = 0;
    while (b >= 1000 && u < 6)
        b /= 1000, u++;
    snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", b, units[u]);
    return buf;
}

int dp__train_check_memory(const dp__trainer *t, const dp_model_def *def, const int64_t *chw)
{
    const dp_train_options *o = t->o;
    step_memory m;
    DP_TRY(estimate(t, def, chw, &m));
    double device = m.activations + m.params + m.grads + m.state + m.buffers;
    int ndev = dp__net_count(t->net), on_host = 0;
    for (int k = 0; k < ndev; k++)
        on_host += dp_device_has(dp__net_device(t->net, k), DP_DEVICE_HOST_MEMORY);
    double host = device * on_host + m.loader;
    double room = (double)o->run.max_memory, mem = -1, cg = -1;
    if (room <= 0) {
        mem = proc_kb("/proc/meminfo", "MemAvailable");
        cg = cgroup_room();
        room = mem >= 0 && (cg < 0 || mem < cg) ? mem : cg;
    }
    if (room < 0 || host <= room)
        return 0;
    char b[9][32];
    char avail[160];
    if (o->run.max_memory > 0)
        snprintf(avail, sizeof avail, "`max_memory` is %s", bytes_str(room, b[6], 32));
    else
        snprintf(avail, sizeof avail, "%s is available (MemAvailable %s, cgroup limit %s)",
                 bytes_str(room, b[6], 32), mem >= 0 ? bytes_str(mem, b[7], 32) : "unknown",
                 cg >= 0 ? bytes_str(cg, b[8], 32) : "none");
    DP_ERROR("a step of %s needs about %s of memory: per device (%d here) activations %s for "
             "%lld samples, parameters %s, gradients %s, optimizer state %s; the loader's "
             "batches %s; %s: lower `batch_size`, or raise `max_memory`",
             def->name, bytes_str(host, b[0], 32), on_host, bytes_str(m.activations, b[1], 32),
             (long long)m.rows, bytes_str(m.params, b[2], 32), bytes_str(m.grads, b[3], 32),
             bytes_str(m.state, b[4], 32), bytes_str(m.loader, b[5], 32), avail);
    return DP_ENOMEM;
}
