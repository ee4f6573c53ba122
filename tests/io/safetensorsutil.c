/* Helpers of the safetensors tests (see safetensorsutil.h). */
#include "safetensorsutil.h"

#include "dp/core.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file; caller frees. NULL if it cannot be read. */
unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)n + 1);
    *len = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

/* The entries of `dir` whose name contains ".tmp.". */
int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* The 8-byte little-endian size field, then the header and data as given. */
const char *write_raw(const char *name, uint64_t size_field, const char *hdr, size_t hlen,
                      const void *data, size_t n)
{
    const char *path = tu_tmp_path(name);
    size_t len = 8 + hlen + n;
    unsigned char *buf = malloc(len + 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(size_field >> (8 * i));
    memcpy(buf + 8, hdr, hlen);
    if (n)
        memcpy(buf + 8 + hlen, data, n);
    assert_int_equal(tu_write_file(path, buf, len), 0);
    free(buf);
    return path;
}

/* A file with `hdr` padded with spaces to a multiple of 8 and n data bytes
 * (zeros when data is NULL). */
const char *write_st(const char *name, const char *hdr, const void *data, size_t n)
{
    size_t hlen = strlen(hdr);
    size_t padded = (hlen + 7) / 8 * 8;
    char *h = malloc(padded + 1);
    memcpy(h, hdr, hlen);
    memset(h + hlen, ' ', padded - hlen);
    unsigned char *zeros = NULL;
    if (!data && n)
        data = zeros = calloc(1, n);
    const char *path = write_raw(name, padded, h, padded, data, n);
    free(zeros);
    free(h);
    return path;
}

void assert_error_has(const char *want)
{
    if (want && !strstr(dp_last_error(), want))
        fail_msg("error message \"%s\" lacks \"%s\"", dp_last_error(), want);
}

/* Opening `path` fails with `rc`, and the message has both substrings. */
void expect_open_fails(const char *path, int rc, const char *want1, const char *want2)
{
    int got;
    dp_safetensors_t *f = (dp_safetensors_t *)&got; /* not NULL: open must reset it */
    got = dp_safetensors_open(&f, path);
    if (got != rc)
        fail_msg("open returned %d (%s), want %d; message: %s", got, dp_strerror(got), rc,
                 dp_last_error());
    assert_null(f);
    assert_error_has(want1);
    assert_error_has(want2);
}

dp_st_tensor make_tensor(const char *name, dp_st_dtype dtype, int ndim, const int64_t *shape,
                         const void *data)
{
    dp_st_tensor t = {.name = name, .dtype = dtype, .ndim = ndim, .data = data};
    size_t bytes = dp_st_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        t.shape[i] = shape[i];
        bytes *= (size_t)shape[i];
    }
    t.bytes = bytes;
    return t;
}

void assert_same_tensor(const dp_st_tensor *a, const dp_st_tensor *b)
{
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++)
        assert_int_equal(a->shape[d], b->shape[d]);
    assert_int_equal(a->bytes, b->bytes);
    if (a->bytes)
        assert_memory_equal(a->data, b->data, a->bytes);
}
