/* Writing shards (dptrain shards): files and labels into tar files of
 * WebDataset's convention, each written whole under a temporary name and
 * renamed into place, so that a reader never sees half a shard and an
 * error leaves none of the call's shards behind.
 *
 *   OUT/train-000000.tar: 00001234.jpg 00001234.cls 00000017.png ...
 *   OUT/classes.txt:      one class name a line, label k on line k + 1
 *
 * The samples go in a shuffled order, a permutation drawn from the seed
 * (WebDataset's writers shuffle too): a folder lists its files class by
 * class, and a reader's shuffle buffer only mixes nearby samples, so
 * shards in list order would give class-by-class batches. A sample's key
 * is its ordinal in the list (unique; its label travels with it).
 *
 * Members are ustar entries of mode 0644, owner 0 and time 0, so that one
 * folder gives the same bytes on every run. */
#include "data/shards_impl.h"

#include "core/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The writer's stream of the counter-based generator, apart from the
 * lanes' (shards_lane.c). */
#define SHARD_WRITE_TAG 0x5357525400000000ull /* "SWRT" */

/* A whole file into memory (malloc'd). */
static int read_file(const char *path, uint8_t **out, size_t *size)
{
    uint64_t n;
    int fd = dp__open_regular(path, &n);
    if (fd < 0)
        return fd;
    FILE *f = fdopen(fd, "rb");
    uint8_t *p = n <= (uint64_t)DP_SHARD_MAX_MEMBER ? dp__malloc(n ? (size_t)n : 1) : NULL;
    int rc = 0;
    if (!f || !p || (n && fread(p, 1, (size_t)n, f) != n)) {
        DP_ERROR("%s: cannot read the image (%s)", path,
                 n > (uint64_t)DP_SHARD_MAX_MEMBER ? "larger than 1 GiB" : strerror(errno));
        rc = DP_EIO;
    }
    if (f)
        fclose(f);
    else
        close(fd);
    if (rc < 0) {
        dp__free(p);
        return rc;
    }
    *out = p;
    *size = (size_t)n;
    return 0;
}

static int add_member(struct archive *a, const char *tmp, const char *name, const void *data,
                      size_t size)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return DP_ENOMEM;
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)size);
    archive_entry_set_mtime(e, 0, 0);
    int rc = 0;
    if (archive_write_header(a, e) != ARCHIVE_OK ||
        (size && archive_write_data(a, data, size) != (la_ssize_t)size)) {
        DP_ERROR("%s: cannot write member %s: %s", tmp, name, archive_error_string(a));
        rc = DP_EIO;
    }
    archive_entry_free(e);
    return rc;
}

/* The lowercase extension of path ("jpg"), or "" when it has none. */
static void lower_ext(const char *path, char *ext, size_t size)
{
    const char *base = strrchr(path, '/');
    const char *dot = strrchr(base ? base : path, '.');
    size_t i = 0;
    for (const char *p = dot ? dot + 1 : ""; *p && i + 1 < size; p++)
        ext[i++] = (char)tolower((unsigned char)*p);
    ext[i] = '\0';
}

/* Samples order[from .. to) as the tar file `tmp`. */
static int write_shard(const char *tmp, const char *const *paths, const int32_t *labels,
                       const int64_t *order, int64_t from, int64_t to)
{
    struct archive *a = archive_write_new();
    if (!a)
        return DP_ENOMEM;
    int rc = 0;
    if (archive_write_set_format_ustar(a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
        archive_write_open_filename(a, tmp) != ARCHIVE_OK) {
        DP_ERROR("%s: cannot write the shard: %s", tmp, archive_error_string(a));
        rc = DP_EIO;
    }
    for (int64_t at = from; rc == 0 && at < to; at++) {
        int64_t i = order[at];
        uint8_t *bytes;
        size_t size;
        if ((rc = read_file(paths[i], &bytes, &size)) < 0)
            break;
        char name[64], ext[16], cls[16];
        lower_ext(paths[i], ext, sizeof ext);
        snprintf(name, sizeof name, "%08lld.%s", (long long)i, ext);
        rc = add_member(a, tmp, name, bytes, size);
        dp__free(bytes);
        int len = snprintf(cls, sizeof cls, "%d", (int)labels[i]);
        snprintf(name, sizeof name, "%08lld.cls", (long long)i);
        if (rc == 0)
            rc = add_member(a, tmp, name, cls, (size_t)len);
    }
    if (archive_write_close(a) != ARCHIVE_OK && rc == 0) {
        DP_ERROR("%s: cannot finish the shard: %s", tmp, archive_error_string(a));
        rc = DP_EIO;
    }
    archive_write_free(a);
    return rc;
}

/* The bytes sample i adds to a shard: its two headers and blocks. */
static int64_t sample_bytes(const char *path)
{
    struct stat st;
    int64_t size = stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
    return 512 + (size + 511) / 512 * 512 + 512 + 512;
}

void dp_shards_write_order(uint64_t seed, int64_t *order, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    dp_rng rng;
    dp_rng_init(&rng, seed ^ SHARD_WRITE_TAG, 0);
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)dp_rng_below(&rng, (uint64_t)i + 1);
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

int dp_shards_write(const char *out_dir, const char *prefix, const char *const *paths,
                    const int32_t *labels, int64_t n, const dp_shard_write_options *opt,
                    int *shards)
{
    DP_ASSERT(opt && opt->shard_size >= 1 && opt->max_bytes >= 0);
    *shards = 0;
    int64_t *order = dp__malloc((size_t)DP_MAX(n, 1) * sizeof *order);
    if (!order)
        return DP_ENOMEM;
    dp_shards_write_order(opt->seed, order, n);
    int rc = 0, written = 0;
    char path[4096], tmp[4200];
    for (int64_t from = 0; rc == 0 && from < n;) {
        int64_t to = from, bytes = 1024; /* the end-of-archive blocks */
        do {
            bytes += sample_bytes(paths[order[to]]);
            to++;
        } while (to < n && to - from < opt->shard_size &&
                 (!opt->max_bytes || bytes + sample_bytes(paths[order[to]]) <= opt->max_bytes));
        snprintf(path, sizeof path, "%s/%s-%06d.tar", out_dir, prefix, written);
        snprintf(tmp, sizeof tmp, "%s/.%s-%06d.tar.tmp", out_dir, prefix, written);
        rc = write_shard(tmp, paths, labels, order, from, to);
        if (rc == 0 && rename(tmp, path) != 0) {
            DP_ERROR("%s: cannot rename the shard into place (%s)", path, strerror(errno));
            rc = DP_EIO;
        }
        if (rc < 0) {
            unlink(tmp);
            break;
        }
        written++;
        if (opt->progress)
            opt->progress(opt->user, path, to, n);
        from = to;
    }
    dp__free(order);
    if (rc < 0) {
        for (int s = 0; s < written; s++) {
            snprintf(path, sizeof path, "%s/%s-%06d.tar", out_dir, prefix, s);
            unlink(path);
        }
        return rc;
    }
    *shards = written;
    return 0;
}

int dp_shards_write_classes(const char *out_dir, const char *const *names, int n)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/classes.txt", out_dir);
    snprintf(tmp, sizeof tmp, "%s/.classes.txt.tmp", out_dir);
    for (int k = 0; k < n; k++)
        if (!names[k][0] || strpbrk(names[k], "\r\n")) {
            DP_ERROR("%s: class %d, %s: a class name must be one line, not empty", path, k,
                     DP_REPR(names[k]));
            return DP_EINVAL;
        }
    FILE *f = fopen(tmp, "wb");
    bool ok = f != NULL;
    for (int k = 0; ok && k < n; k++)
        ok = fprintf(f, "%s\n", names[k]) >= 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, path) != 0) {
        DP_ERROR("%s: cannot write the class names (%s)", path, strerror(errno));
        unlink(tmp);
        return DP_EIO;
    }
    return 0;
}
