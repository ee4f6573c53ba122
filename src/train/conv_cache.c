/* The convolution kernels' cache file (dp/conv_cache.h): read into the
 * process's choices before anything is measured, and merged into under an
 * flock with an atomic replace. Its I/O lives here, beside the
 * checkpoints'; the device layer keeps only the table (conv_choice.c). */
#include "dp/conv_cache.h"

#include "core/internal.h"
#include "dp/dp.h"
#include "train/conv_cache_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int dp_conv_algo_cache_path(const char *setting, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!setting || !*setting)
        setting = getenv("DPTRAIN_CONV_ALGO_CACHE");
    if (setting && strcmp(setting, "off") == 0)
        return 1;
    int n;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (setting && *setting)
        n = snprintf(buf, size, "%s", setting);
    else if (xdg && *xdg == '/') /* the XDG spec: a relative value is ignored */
        n = snprintf(buf, size, "%s/dptrain/conv-algos.txt", xdg);
    else if (home && *home)
        n = snprintf(buf, size, "%s/.cache/dptrain/conv-algos.txt", home);
    else
        return 1;
    if (n < 0 || (size_t)n >= size) {
        DP_ERROR("the convolution kernels' cache path is longer than %zu bytes", size - 1);
        buf[0] = '\0';
        return DP_EINVAL;
    }
    return 0;
}

int dp_conv_algo_cache_key(char *buf, size_t size)
{
    int n = snprintf(buf, size, "dptrain=%s; ", DP_VERSION_STRING);
    return n + dp_conv_choices_key(buf + DP_MIN((size_t)n, size), size - DP_MIN((size_t)n, size));
}

/* Why `theirs` is not this machine's key: its first field that differs
 * ("onednn=3.1.0 (x) there, 3.0.0 (y) here"), into buf. Fields are
 * "name=value" separated by "; ". */
static void key_difference(const char *theirs, const char *ours, char *buf, size_t size)
{
    for (const char *t = theirs, *o = ours; *t || *o;) {
        size_t tl = strcspn(t, ";"), ol = strcspn(o, ";");
        if (tl != ol || strncmp(t, o, tl) != 0) {
            size_t name = strcspn(o, "=");
            snprintf(buf, size, "%.*s there, %.*s here", (int)tl, t,
                     (int)(ol > name ? ol - name - 1 : 0), o + DP_MIN(name + 1, ol));
            return;
        }
        t += tl + (t[tl] ? 1 : 0);
        o += ol + (o[ol] ? 1 : 0);
        t += strspn(t, " ");
        o += strspn(o, " ");
    }
    snprintf(buf, size, "the same key twice");
}

/* How many passes a choices text holds (each is "pass=impl"). */
static int count_passes(const char *text)
{
    int n = 0;
    for (const char *p = text; (p = strchr(p, '=')); p++)
        n++;
    return n;
}

int dp_conv_algo_cache_read(const char *path)
{
    char key[DP__CACHE_KEY_MAX];
    dp_conv_algo_cache_key(key, sizeof key);
    dp__cache_file f;
    int read = dp__cache_file_read(path, key, &f, true);
    if (read == DP_EIO)
        return 0; /* warned: measured afresh */
    DP_TRY(read);
    dp__cache_section *ours = NULL;
    for (size_t i = 0; i < f.n; i++) {
        if (strcmp(f.s[i].key, key) == 0) {
            ours = &f.s[i];
            continue;
        }
        char why[DP__CACHE_KEY_MAX];
        key_difference(f.s[i].key, key, why, sizeof why);
        DP_INFO("the convolution kernels' cache %s: passed over %zu choices of another machine "
                "or version (%s)",
                path, f.s[i].n, why);
    }
    /* The table's lines with the file's passes that they lack joined to
     * them, loaded at once: the choices made before (a checkpoint's, rank
     * 0's) win and stay as they were (measured here or not). */
    char *before = dp_conv_choices_save(), *text = NULL;
    dp__cache_file merged = {0};
    dp__cache_section *s = before ? dp__cache_section_add(&merged, "", 0) : NULL;
    int rc = s ? dp__cache_section_merge(s, before) : DP_ENOMEM, installed = 0;
    for (size_t i = 0; rc == 0 && ours && i < ours->n; i++)
        rc = dp__cache_section_merge(s, ours->lines[i]);
    size_t len = 1, at = 0;
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        len += strlen(s->lines[i]) + 1;
    if (rc == 0 && !(text = malloc(len)))
        rc = DP_ENOMEM;
    for (size_t i = 0; rc == 0 && i < s->n; i++)
        at += (size_t)snprintf(text + at, len - at, "%s\n", s->lines[i]);
    if (rc == 0) {
        text[at] = '\0';
        rc = dp_conv_choices_load(text);
        installed = count_passes(text) - count_passes(before);
    }
    if (rc == 0)
        DP_INFO("the convolution kernels' cache %s: %d choices of this machine taken (%zu shapes "
                "in its section)",
                path, installed, ours ? ours->n : 0);
    free(text);
    free(before);
    dp__cache_file_free(&merged);
    dp__cache_file_free(&f);
    return rc < 0 ? rc : installed;
}

/* ---- adding: merge under the lock, replace atomically ---------------------- */

int dp_conv_algo_cache_add(const char *path, const char *lines)
{
    for (const char *p = lines; *p; p += strcspn(p, "\n"), p += *p ? 1 : 0)
        if (*p != '\n' && dp_conv_choices_check(p) < 0) {
            DP_ERROR("the convolution kernels' cache: '%.*s' is not a choice",
                     (int)DP_MIN(strcspn(p, "\n"), 120), p);
            return DP_EINVAL;
        }
    if (!*lines)
        return 0;
    char key[DP__CACHE_KEY_MAX], lock_path[4096];
    dp_conv_algo_cache_key(key, sizeof key);
    const char *step = "create its folder";
    int e = dp__cache_make_parents(path), lock = -1;
    if (!e && snprintf(lock_path, sizeof lock_path, "%s.lock", path) >= (int)sizeof lock_path)
        e = ENAMETOOLONG;
    if (!e) {
        step = "open its lock file";
        lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        e = lock < 0 ? errno : 0;
    }
    if (!e) {
        step = "lock it";
        while ((e = flock(lock, LOCK_EX) < 0 ? errno : 0) == EINTR)
            ;
    }
    int rc = 0;
    if (!e) {
        /* Read under the lock: what another process added since this one
         * read the file stays. */
        dp__cache_file f;
        rc = dp__cache_file_read(path, key, &f, false);
        /* a file that cannot be read (warned) is not replaced */
        dp__cache_section *s = rc == 0 ? dp__cache_section_find(&f, key) : NULL;
        if (rc == 0 && !s && !(s = dp__cache_section_add(&f, key, strlen(key))))
            rc = DP_ENOMEM;
        if (rc == 0)
            rc = dp__cache_section_merge(s, lines);
        if (rc == 0)
            e = dp__cache_file_replace(path, &f, &step);
        dp__cache_file_free(&f);
    }
    if (rc == DP_EIO)
        e = 0;
    if (lock >= 0)
        close(lock); /* and with it the lock */
    if (e) {
        DP_WARN("the convolution kernels' cache %s: cannot %s (%s); the choices measured here "
                "are not kept",
                path, step, strerror(e));
        return DP_EIO;
    }
    return rc;
}
