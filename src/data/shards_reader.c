/* One tar shard walked sample by sample with libarchive, read front to
 * back once (a shard may be a pipe or an object store's stream to
 * WebDataset; here it is a file, and skipping the index pass's data
 * seeks). Members are grouped by key as WebDataset's group_by_keys does:
 *
 *   000123.jpg   key "000123", ext "jpg"   } one sample: the image's bytes
 *   000123.cls   key "000123", ext "cls"   } and the label "7\n"
 *   000124.png   key "000124", ...
 *
 * The key is the name up to the first dot of its basename (directories
 * kept), the extension the rest, lowercased. A member of the next key
 * ends the sample; the next call reads that member's data, which
 * libarchive keeps readable until the next header is asked for. */
#include "data/shards_impl.h"

#include "core/internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* A .cls member longer than this is not a class index. */
#define CLS_CAP 64

/* ---- the finished keys of a shard ---------------------------------------- */

static uint64_t hash_key(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool keys_has(const dp__shard_keys *k, const char *key)
{
    if (!k->cap)
        return false;
    for (uint64_t i = hash_key(key) & (uint64_t)(k->cap - 1);; i = (i + 1) & (uint64_t)(k->cap - 1))
        if (!k->slots[i])
            return false;
        else if (strcmp(k->slots[i], key) == 0)
            return true;
}

static int keys_add(dp__shard_keys *k, const char *key)
{
    if (2 * (k->n + 1) > k->cap) {
        int64_t cap = k->cap ? 2 * k->cap : 64;
        char **slots = dp__calloc((size_t)cap, sizeof *slots);
        if (!slots)
            return DP_ENOMEM;
        for (int64_t i = 0; i < k->cap; i++) {
            if (!k->slots[i])
                continue;
            uint64_t j = hash_key(k->slots[i]) & (uint64_t)(cap - 1);
            while (slots[j])
                j = (j + 1) & (uint64_t)(cap - 1);
            slots[j] = k->slots[i];
        }
        dp__free(k->slots);
        k->slots = slots;
        k->cap = cap;
    }
    uint64_t j = hash_key(key) & (uint64_t)(k->cap - 1);
    while (k->slots[j])
        j = (j + 1) & (uint64_t)(k->cap - 1);
    if (!(k->slots[j] = dp__strdup(key)))
        return DP_ENOMEM;
    k->n++;
    return 0;
}

static void keys_free(dp__shard_keys *k)
{
    for (int64_t i = 0; i < k->cap; i++)
        dp__free(k->slots[i]);
    dp__free(k->slots);
    memset(k, 0, sizeof *k);
}

/* ---- the reader ------------------------------------------------------------ */

int dp__shard_reader_open(dp__shard_reader *r, const char *path, bool read_images,
                          int32_t max_label)
{
    memset(r, 0, sizeof *r);
    r->path = path;
    r->read_images = read_images;
    r->max_label = max_label;
    struct stat st;
    if (stat(path, &st) != 0) {
        DP_ERROR("%s: no such shard (%s)", path, strerror(errno));
        return DP_ENOENT;
    }
    if (!S_ISREG(st.st_mode)) {
        DP_ERROR("%s: not a regular file: a shard is a tar file", path);
        return DP_EIO;
    }
    r->file_size = (uint64_t)st.st_size;
    struct archive *a = archive_read_new();
    if (!a)
        return DP_ENOMEM;
    archive_read_support_format_tar(a);
    /* The index pass reads headers only: small blocks, the data skipped by
     * seeks; a lane reads everything, in large ones. */
    if (archive_read_open_filename(a, path, read_images ? 1 << 16 : 10240) != ARCHIVE_OK) {
        DP_ERROR("%s: cannot open the shard: %s", path, archive_error_string(a));
        archive_read_free(a);
        return DP_EIO;
    }
    r->archive = a;
    return 0;
}

void dp__shard_reader_close(dp__shard_reader *r)
{
    if (r->archive)
        archive_read_free(r->archive);
    keys_free(&r->seen);
    dp__free(r->image);
    memset(r, 0, sizeof *r);
}

/* A failure of libarchive's: truncation or a damaged header. */
static int archive_failed(dp__shard_reader *r, const char *during)
{
    const char *why = archive_error_string(r->archive);
    bool cut = why && (strstr(why, "runcated") || strstr(why, "premature"));
    DP_ERROR("%s: %s%s%s: %s%s", r->path, during, r->last[0] ? " " : "",
             r->last[0] ? DP_REPR(r->last) : "", why ? why : "unreadable",
             cut ? " (the shard is cut short)" : "");
    return cut ? DP_ETRUNC : DP_EFORMAT;
}

/* The label of a .cls member: ASCII decimal, surrounding white space
 * allowed (Python's int(data), as WebDataset reads it, without a sign). */
static int parse_label(dp__shard_reader *r, const char *text, size_t n)
{
    size_t i = 0, end = n;
    while (i < n && isspace((unsigned char)text[i]))
        i++;
    while (end > i && isspace((unsigned char)text[end - 1]))
        end--;
    int64_t v = 0;
    bool ok = end > i && end - i <= 10;
    for (size_t j = i; ok && j < end; j++) {
        ok = text[j] >= '0' && text[j] <= '9';
        v = v * 10 + (text[j] - '0');
    }
    if (!ok || v > INT32_MAX) {
        char shown[CLS_CAP + 1];
        memcpy(shown, text, n);
        shown[n] = '\0';
        DP_ERROR("%s: member %s: the label %s is not a class index (a .cls member holds "
                 "one in ASCII decimal)",
                 r->path, DP_REPR(r->last), DP_REPR(shown));
        return DP_EFORMAT;
    }
    if (v > r->max_label) {
        DP_ERROR("%s: member %s: label %lld, but classes.txt names %lld classes", r->path,
                 DP_REPR(r->last), (long long)v, (long long)r->max_label + 1);
        return DP_EFORMAT;
    }
    r->label = (int32_t)v;
    return 0;
}

/* Reads the member's data: all of it into r->image (an image, when the
 * lane wants its bytes) or the label, or skips it. */
static int read_member(dp__shard_reader *r, struct archive_entry *e, const char *ext)
{
    struct archive *a = r->archive;
    bool label = strcmp(ext, "cls") == 0;
    bool image =
        !label && (strcmp(ext, "jpg") == 0 || strcmp(ext, "jpeg") == 0 || strcmp(ext, "png") == 0);
    if ((label && r->has_label) || (image && r->has_image)) {
        DP_ERROR("%s: member %s: key %s has a second %s", r->path, DP_REPR(r->last),
                 DP_REPR(r->key), label ? "label (.cls)" : "image (.jpg, .jpeg, .png)");
        return DP_EFORMAT;
    }
    int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
    if (size < 0 || size > DP_SHARD_MAX_MEMBER || (uint64_t)size > r->file_size) {
        DP_ERROR("%s: member %s: %lld bytes, more than the shard's %llu (the shard is cut "
                 "short)",
                 r->path, DP_REPR(r->last), (long long)size, (unsigned long long)r->file_size);
        return DP_ETRUNC;
    }
    if (label) {
        char text[CLS_CAP];
        if (size > CLS_CAP) {
            DP_ERROR("%s: member %s: %lld bytes: not a class index (a .cls member holds one "
                     "in ASCII decimal)",
                     r->path, DP_REPR(r->last), (long long)size);
            return DP_EFORMAT;
        }
        la_ssize_t got = archive_read_data(a, text, (size_t)size);
        if (got < 0)
            return archive_failed(r, "member");
        if (got != size) {
            DP_ERROR("%s: member %s: %lld of its %lld bytes (the shard is cut short)", r->path,
                     DP_REPR(r->last), (long long)got, (long long)size);
            return DP_ETRUNC;
        }
        DP_TRY(parse_label(r, text, (size_t)size));
        r->has_label = true;
        return 0;
    }
    if (image) {
        r->has_image = true;
        snprintf(r->member, sizeof r->member, "%s", r->last);
    }
    if (!image || !r->read_images)
        return archive_read_data_skip(a) == ARCHIVE_OK ? 0 : archive_failed(r, "member");
    /* A lane takes the buffer with the image (shards_lane.c), leaving
     * none: each image gets one of its own size. */
    if (!r->image || (size_t)size > r->image_cap) {
        uint8_t *grown = dp__malloc(DP_MAX((size_t)size, 1));
        if (!grown)
            return DP_ENOMEM;
        dp__free(r->image);
        r->image = grown;
        r->image_cap = (size_t)size;
    }
    size_t have = 0;
    while (have < (size_t)size) {
        la_ssize_t got = archive_read_data(a, r->image + have, (size_t)size - have);
        if (got < 0)
            return archive_failed(r, "member");
        if (got == 0) {
            DP_ERROR("%s: member %s: %zu of its %lld bytes (the shard is cut short)", r->path,
                     DP_REPR(r->last), have, (long long)size);
            return DP_ETRUNC;
        }
        have += (size_t)got;
    }
    r->image_size = have;
    return 0;
}

/* The key and extension of a member name, as WebDataset's base_plus_ext
 * (a regular expression: any directories, then the basename up to its
 * first dot is the key, the rest the extension): false for a name it passes over (no
 * dot in the basename, or one first), and for WebDataset's meta members
 * (__name__ at the top level). */
static bool split_name(const char *name, char *key, char *ext)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot || dot == base)
        return false;
    if (base == name && strncmp(name, "__", 2) == 0 && strlen(name) > 4 &&
        strcmp(name + strlen(name) - 2, "__") == 0)
        return false;
    memcpy(key, name, (size_t)(dot - name));
    key[dot - name] = '\0';
    size_t i = 0;
    for (const char *p = dot + 1; *p; p++)
        ext[i++] = (char)tolower((unsigned char)*p);
    ext[i] = '\0';
    return true;
}

/* The sample that ends: 1 with an image and a label, 0 for a key with
 * neither (other members only: not a sample here), else an error. */
static int finish(dp__shard_reader *r)
{
    if (!r->has_image && !r->has_label)
        return keys_add(&r->seen, r->key);
    if (!r->has_image || !r->has_label) {
        DP_ERROR("%s: key %s has %s (a sample is KEY.jpg, .jpeg or .png with KEY.cls)", r->path,
                 DP_REPR(r->key),
                 r->has_image ? "no label (.cls)" : "no image (.jpg, .jpeg, .png)");
        return DP_EFORMAT;
    }
    DP_TRY(keys_add(&r->seen, r->key));
    return 1;
}

/* A tar file ends with two zero blocks (Python's tarfile, GNU tar and
 * libarchive write them, and pad after): a shard cut at a member's end,
 * which libarchive reads as a clean end, ends in that member's data. A
 * member whose data ends in 1024 zero bytes hides such a cut; nothing
 * whole is refused. */
static int check_end_blocks(dp__shard_reader *r)
{
    if (r->file_size == 0)
        return 0;
    uint8_t tail[1024];
    size_t want = r->file_size < sizeof tail ? (size_t)r->file_size : sizeof tail;
    FILE *f = fopen(r->path, "rb");
    bool zero = f && fseeko(f, (off_t)(r->file_size - want), SEEK_SET) == 0 &&
                fread(tail, 1, want, f) == want;
    if (f)
        fclose(f);
    for (size_t i = 0; zero && i < want; i++)
        zero = tail[i] == 0;
    if (!zero) {
        DP_ERROR("%s: after member %s: the shard ends without tar's end-of-archive blocks (the "
                 "shard is cut short)",
                 r->path, DP_REPR(r->last));
        return DP_ETRUNC;
    }
    return 0;
}

/* The members of the next key: 1 for a sample, 0 for a key that is
 * none or the shard's end (r->done), or an error. */
static int next_key(dp__shard_reader *r)
{
    if (r->done)
        return 0;
    r->key[0] = '\0';
    r->member[0] = '\0';
    r->has_image = r->has_label = false;
    r->image_size = 0;
    struct archive *a = r->archive;
    for (;;) {
        struct archive_entry *e = NULL;
        char key[DP__SHARD_NAME_CAP], ext[DP__SHARD_NAME_CAP];
        if (!r->pending) {
            int rc = archive_read_next_header(a, &e);
            if (rc == ARCHIVE_EOF) {
                r->done = true;
                if (!r->read_images)
                    DP_TRY(check_end_blocks(r));
                return r->key[0] ? finish(r) : 0;
            }
            if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN)
                return archive_failed(r, r->last[0] ? "after member" : "at its start");
            const char *name = archive_entry_pathname(e);
            if (!name || strlen(name) >= DP__SHARD_NAME_CAP) {
                DP_ERROR("%s: after member %s: a member name %s", r->path, DP_REPR(r->last),
                         name ? "too long" : "that cannot be read");
                return DP_EFORMAT;
            }
            snprintf(r->last, sizeof r->last, "%s", name);
            if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e) ||
                !split_name(name, key, ext))
                continue; /* data skipped by the next header */
            r->entry = e;
            if (r->key[0] && strcmp(key, r->key) != 0) {
                r->pending = true; /* the next sample's first member */
                return finish(r);
            }
        } else {
            /* libarchive keeps the entry until the next header. */
            r->pending = false;
            e = r->entry;
            split_name(r->last, key, ext);
        }
        if (!r->key[0]) {
            if (keys_has(&r->seen, key)) {
                DP_ERROR("%s: member %s: key %s again after other keys (a key's members must "
                         "be adjacent)",
                         r->path, DP_REPR(r->last), DP_REPR(key));
                return DP_EFORMAT;
            }
            snprintf(r->key, sizeof r->key, "%s", key);
        }
        DP_TRY(read_member(r, e, ext));
    }
}

int dp__shard_reader_next(dp__shard_reader *r)
{
    int rc;
    do
        rc = next_key(r);
    while (rc == 0 && !r->done);
    return rc;
}
