/* Helpers of the hostile-input tests (hostileutil.h). */
#include "hostileutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long rest_kb; /* `dptrain model lenet`'s peak resident memory */

/* The file's first size - 1 bytes, or its last (tail). */
static void slurp(const char *path, char *buf, size_t size, bool tail)
{
    FILE *f = fopen(path, "r");
    if (f && tail && fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)size - 1)
        fseek(f, -((long)size - 1), SEEK_END);
    else if (f)
        rewind(f);
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

void hu_run(const char *const *args, hu_outcome *o)
{
    char out_path[512], err_path[512];
    snprintf(out_path, sizeof out_path, "%s", tu_tmp_path("run.out"));
    snprintf(err_path, sizeof err_path, "%s", tu_tmp_path("run.err"));
    const char *argv[16] = {tu_dptrain};
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* a run gone quadratic ends at 30 s of CPU (SIGXCPU), not hours */
        struct rlimit cpu = {30, 30};
        if (!freopen(out_path, "w", stdout) || !freopen(err_path, "w", stderr) ||
            setrlimit(RLIMIT_CPU, &cpu) != 0)
            _exit(126);
        execv(tu_dptrain, (char *const *)argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    assert_int_equal(wait4(pid, &st, 0, &ru), pid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    o->cpu_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
               (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    o->wall_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    o->rss_kb = ru.ru_maxrss;
    slurp(err_path, o->err, sizeof o->err, false);
    slurp(out_path, o->out, sizeof o->out, true);
}

int hu_setup(void **state)
{
    if (tu_setup_tmp(state) != 0 || tu_find_dptrain() != 0)
        return -1;
    hu_outcome o;
    hu_run((const char *[]){"model", "lenet", NULL}, &o);
    rest_kb = o.rss_kb;
    printf("dptrain model lenet: %ld MB resident at its peak, %.2f s of CPU\n", rest_kb / 1024,
           o.cpu_s);
    return o.status == 0 ? 0 : -1;
}

void hu_within(const char *what, const hu_outcome *o, double cpu_limit, long headroom_kb)
{
    printf("%s: exit %d, %.2f s of CPU (%.2f s wall), %ld MB resident (%+ld MB beyond "
           "dptrain model lenet)\n",
           what, o->status, o->cpu_s, o->wall_s, o->rss_kb / 1024, (o->rss_kb - rest_kb) / 1024);
    if (o->cpu_s > cpu_limit || o->wall_s > 10.0)
        fail_msg("%s: %.2f s of CPU, %.2f s wall: more than %.0f s", what, o->cpu_s, o->wall_s,
                 cpu_limit);
    if (!HU_SANITIZED && o->rss_kb > rest_kb + headroom_kb)
        fail_msg("%s: %ld MB resident, more than %ld MB beyond the %ld MB of dptrain model lenet",
                 what, o->rss_kb / 1024, headroom_kb / 1024, rest_kb / 1024);
}

void hu_refused(const char *const *args, const char *file, const char *const *words)
{
    hu_outcome o;
    hu_run(args, &o);
    hu_within(file, &o, HU_CPU_S, HU_HEADROOM_KB);
    printf("  %s", o.err);
    char head[600];
    snprintf(head, sizeof head, "dptrain: error: %s: ", file);
    size_t len = strlen(o.err);
    if (o.status == 0 || o.status >= 128 || len == 0 || strchr(o.err, '\n') != o.err + len - 1 ||
        strncmp(o.err, head, strlen(head)) != 0)
        fail_msg("%s: expected exit 1 and one line starting '%s', got exit %d: %s", file, head,
                 o.status, o.err);
    for (int i = 0; words[i]; i++)
        if (!strstr(o.err, words[i]))
            fail_msg("%s: '%s' is not in: %s", file, words[i], o.err);
}

/* ---- the wire format ------------------------------------------------------------ */

void hu_open(hu_wire *w, size_t cap)
{
    w->buf = malloc(cap);
    assert_non_null(w->buf);
    w->at = w->cap = cap;
}

void hu_bytes(hu_wire *w, const void *p, size_t n)
{
    assert_true(n <= w->at);
    w->at -= n;
    if (n)
        memcpy(w->buf + w->at, p, n);
}

void hu_varint(hu_wire *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        b[n++] |= v ? 0x80 : 0;
    } while (v);
    hu_bytes(w, b, n);
}

void hu_tag(hu_wire *w, int field, int type)
{
    hu_varint(w, (uint64_t)field << 3 | (uint64_t)type);
}

void hu_int(hu_wire *w, int field, int64_t v)
{
    hu_varint(w, (uint64_t)v);
    hu_tag(w, field, 0);
}

void hu_float(hu_wire *w, int field, float v)
{
    hu_bytes(w, &v, 4); /* little-endian, as protobuf */
    hu_tag(w, field, 5);
}

void hu_str(hu_wire *w, int field, const char *s)
{
    hu_bytes(w, s, strlen(s));
    hu_varint(w, strlen(s));
    hu_tag(w, field, 2);
}

void hu_msg(hu_wire *w, int field, size_t end)
{
    hu_varint(w, end - w->at);
    hu_tag(w, field, 2);
}

void hu_save(hu_wire *w, const char *path)
{
    assert_int_equal(tu_write_file(path, w->buf + w->at, w->cap - w->at), 0);
    free(w->buf);
}
