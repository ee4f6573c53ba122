/* tests/data/shardsutil.h's helpers. */
#include "shardsutil.h"

#include "testutil.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void su_write_tar(const char *path, const su_member *members, int n)
{
    struct archive *a = archive_write_new();
    assert_non_null(a);
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (int i = 0; i < n; i++) {
        size_t size = members[i].size < 0 ? strlen(members[i].data) : (size_t)members[i].size;
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, members[i].name);
        bool dir = members[i].name[strlen(members[i].name) - 1] == '/';
        archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
        archive_entry_set_perm(e, dir ? 0755 : 0644);
        archive_entry_set_size(e, dir ? 0 : (la_int64_t)size);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        if (!dir && size)
            assert_int_equal(archive_write_data(a, members[i].data, size), (la_ssize_t)size);
        archive_entry_free(e);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

size_t su_image_size(int64_t id)
{
    return 100 + (size_t)(id * 37 % 700);
}

void su_image(int64_t id, uint8_t *out)
{
    uint64_t x = (uint64_t)id * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < su_image_size(id); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        out[i] = (uint8_t)x;
    }
}

int32_t su_label(int64_t id)
{
    return (int32_t)(id % 5);
}

void su_write_set(const char *dir, const int *counts, int nshards)
{
    int64_t id = 0;
    for (int s = 0; s < nshards; s++) {
        su_member *m = calloc((size_t)(2 * counts[s] + 1), sizeof *m);
        char(*names)[64] = calloc((size_t)(2 * counts[s] + 1), sizeof *names);
        char(*labels)[16] = calloc((size_t)(counts[s] + 1), sizeof *labels);
        uint8_t **images = calloc((size_t)(counts[s] + 1), sizeof *images);
        assert_true(m && names && labels && images);
        for (int i = 0; i < counts[s]; i++, id++) {
            images[i] = malloc(su_image_size(id));
            su_image(id, images[i]);
            snprintf(names[2 * i], 64, "s%d/%06lld.jpg", s, (long long)id);
            snprintf(names[2 * i + 1], 64, "s%d/%06lld.cls", s, (long long)id);
            snprintf(labels[i], 16, "%d", (int)su_label(id));
            m[2 * i] = (su_member){names[2 * i], (const char *)images[i], (long)su_image_size(id)};
            m[2 * i + 1] = (su_member){names[2 * i + 1], labels[i], -1};
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/shard-%06d.tar", dir, s);
        su_write_tar(path, m, 2 * counts[s]);
        for (int i = 0; i < counts[s]; i++)
            free(images[i]);
        free(images);
        free(labels);
        free(names);
        free(m);
    }
}

void su_truncate(const char *path, long keep)
{
    assert_int_equal(truncate(path, keep), 0);
}
