/* safetensors: round trips of every dtype with metadata, the exact bytes
 * Python's library writes, truncated and corrupt files of every kind (each
 * must fail with a message naming the tensor or offset, never crash), the
 * atomic write (old file kept on every failure, no temporary left), and a
 * small deterministic mutation fuzz of a valid file. */
#include "testutil.h"

#include "dp/core.h"
#include "dp/safetensors.h"

#include <dirent.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers -------------------------------------------------------------- */

#define COUNTOF(a) (sizeof(a) / sizeof((a)[0]))


/* The whole file; caller frees. NULL if it cannot be read. */
static unsigned char *read_all(const char *path, size_t *len)
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
static int count_temp_files(const char *dir)
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
static const char *write_raw(const char *name, uint64_t size_field, const char *hdr, size_t hlen,
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
static const char *write_st(const char *name, const char *hdr, const void *data, size_t n)
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

static void assert_error_has(const char *want)
{
    if (want && !strstr(dp_last_error(), want))
        fail_msg("error message \"%s\" lacks \"%s\"", dp_last_error(), want);
}

/* Opening `path` fails with `rc`, and the message has both substrings. */
static void expect_open_fails(const char *path, int rc, const char *want1, const char *want2)
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

static dp_st_tensor make_tensor(const char *name, dp_st_dtype dtype, int ndim, const int64_t *shape,
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

static void assert_same_tensor(const dp_st_tensor *a, const dp_st_tensor *b)
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

/* ---- the format ------------------------------------------------------------- */

static void test_dtype_size(void **state)
{
    (void)state;
    assert_int_equal(dp_st_dtype_size(DP_ST_F32), 4);
    assert_int_equal(dp_st_dtype_size(DP_ST_I32), 4);
    assert_int_equal(dp_st_dtype_size(DP_ST_I64), 8);
    assert_int_equal(dp_st_dtype_size(DP_ST_U8), 1);
    assert_int_equal(dp_st_dtype_size((dp_st_dtype)42), 0);
}

/* What Python writes for save_file({"a": torch.tensor([1.0, 2.0])}): the
 * compact JSON (54 bytes) and 2 spaces make the header 56 = 0x38 bytes. */
static const unsigned char golden[] = "\x38\x00\x00\x00\x00\x00\x00\x00"
                                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                                      "\"data_offsets\":[0,8]}}  "
                                      "\x00\x00\x80\x3f"
                                      "\x00\x00\x00\x40";

static void test_golden_file_reads(void **state)
{
    (void)state;
    assert_int_equal(sizeof golden - 1, 72);
    const char *path = tu_tmp_path("golden.safetensors");
    assert_int_equal(tu_write_file(path, golden, sizeof golden - 1), 0);
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_int_equal(dp_safetensors_count(f), 1);
    dp_st_tensor t;
    assert_int_equal(dp_safetensors_get(f, 0, &t), 0);
    assert_string_equal(t.name, "a");
    assert_int_equal(t.dtype, DP_ST_F32);
    assert_int_equal(t.ndim, 1);
    assert_int_equal(t.shape[0], 2);
    assert_int_equal(t.bytes, 8);
    float v[2];
    memcpy(v, t.data, sizeof v);
    assert_true(v[0] == 1.0f && v[1] == 2.0f);
    /* The data section starts at byte 64 of the file and lands aligned. */
    assert_int_equal((uintptr_t)t.data % 64, 0);
    assert_null(dp_safetensors_meta(f, "anything"));
    dp_safetensors_close(f);
}

static void test_writer_matches_golden(void **state)
{
    (void)state;
    const float v[2] = {1.0f, 2.0f};
    dp_st_tensor t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    const char *path = tu_tmp_path("ours.safetensors");
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), 0);
    size_t len;
    unsigned char *got = read_all(path, &len);
    assert_non_null(got);
    assert_int_equal(len, sizeof golden - 1);
    assert_memory_equal(got, golden, len);
    free(got);
    assert_int_equal(count_temp_files(tu_tmp), 0);
}

/* Metadata first, escaped as serde_json escapes, then the tensors in order. */
static void test_exact_bytes_with_metadata(void **state)
{
    (void)state;
    const int32_t seven = 7;
    dp_st_tensor t = make_tensor("x", DP_ST_I32, 1, (int64_t[]){1}, &seven);
    const char *meta[] = {"note", "q\"b\\n\nt\tc\x01/\xc3\xa9", "k2", ""};
    const char *path = tu_tmp_path("meta.safetensors");
    assert_int_equal(dp_safetensors_write(path, &t, 1, meta, 2), 0);

    const char *json = "{\"__metadata__\":{\"note\":\"q\\\"b\\\\n\\nt\\tc\\u0001/\xc3\xa9\","
                       "\"k2\":\"\"},"
                       "\"x\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    size_t hlen = strlen(json), padded = (hlen + 7) / 8 * 8;
    size_t len;
    unsigned char *got = read_all(path, &len);
    assert_non_null(got);
    assert_int_equal(len, 8 + padded + 4);
    for (int i = 0; i < 8; i++)
        assert_int_equal(got[i], (unsigned char)(padded >> (8 * i)));
    assert_memory_equal(got + 8, json, hlen);
    for (size_t i = hlen; i < padded; i++)
        assert_int_equal(got[8 + i], ' ');
    assert_memory_equal(got + 8 + padded, "\x07\x00\x00\x00", 4);
    free(got);

    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_string_equal(dp_safetensors_meta(f, "note"), meta[1]);
    assert_string_equal(dp_safetensors_meta(f, "k2"), "");
    dp_safetensors_close(f);
}

static void test_round_trip(void **state)
{
    (void)state;
    float w[2 * 1 * 3 * 3], b[2] = {0.25f, -1e-30f}, s = 3.5f;
    for (int i = 0; i < 18; i++)
        w[i] = (float)i * 0.5f - 3.0f;
    const int32_t labels[5] = {0, -1, 7, INT32_MIN, INT32_MAX};
    const int64_t steps[2] = {INT64_MAX, -42};
    const uint8_t mask[6] = {0, 1, 2, 253, 254, 255};
    const uint8_t odd[3] = {9, 8, 7};
    dp_st_tensor in[] = {
        make_tensor("conv1.weight", DP_ST_F32, 4, (int64_t[]){2, 1, 3, 3}, w),
        make_tensor("conv1.bias", DP_ST_F32, 1, (int64_t[]){2}, b),
        make_tensor("scalar", DP_ST_F32, 0, NULL, &s),
        make_tensor("empty", DP_ST_F32, 2, (int64_t[]){0, 4}, NULL),
        make_tensor("labels", DP_ST_I32, 1, (int64_t[]){5}, labels),
        make_tensor("odd", DP_ST_U8, 3, (int64_t[]){3, 1, 1}, odd),
        make_tensor("step", DP_ST_I64, 2, (int64_t[]){2, 1}, steps),
        make_tensor("mask", DP_ST_U8, 2, (int64_t[]){3, 2}, mask),
        make_tensor("na\xc3\xafve \"quoted\" \\ /path", DP_ST_U8, 1, (int64_t[]){1}, odd),
        make_tensor("tab\tnew\nline\x7f", DP_ST_I32, 1, (int64_t[]){1}, labels),
        make_tensor("many", DP_ST_I64, 8, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1}, steps),
    };
    int n = (int)COUNTOF(in);
    const char *meta[] = {
        "epoch", "12", "config",           "{\"lr\": 0.1}\n\ttab \\ back \x1f end",
        "empty", "",   "\xe2\x82\xac key", "\xf0\x9f\x98\x80"};
    const char *path = tu_tmp_path("round.safetensors");
    assert_int_equal(dp_safetensors_write(path, in, n, meta, 4), 0);

    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_int_equal(dp_safetensors_count(f), n);
    for (int i = 0; i < n; i++) {
        dp_st_tensor t;
        assert_int_equal(dp_safetensors_get(f, i, &t), 0);
        assert_same_tensor(&t, &in[i]);
        dp_st_tensor u;
        assert_int_equal(dp_safetensors_find(f, in[i].name, &u), 0);
        assert_ptr_equal(u.data, t.data);
        assert_same_tensor(&u, &in[i]);
    }
    assert_int_equal(dp_safetensors_find(f, "nope", NULL), DP_ENOENT);
    assert_int_equal(dp_safetensors_find(f, "conv1", NULL), DP_ENOENT);
    for (int i = 0; i < 4; i++)
        assert_string_equal(dp_safetensors_meta(f, meta[2 * i]), meta[2 * i + 1]);
    assert_null(dp_safetensors_meta(f, "nope"));
    dp_safetensors_close(f);

    /* The size field is a multiple of 8 and the data fills the rest. */
    size_t len, total = 0;
    unsigned char *raw = read_all(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | raw[i];
    free(raw);
    for (int i = 0; i < n; i++)
        total += in[i].bytes;
    assert_int_equal(hlen % 8, 0);
    assert_int_equal(len, 8 + hlen + total);
    assert_int_equal(count_temp_files(tu_tmp), 0);
}

static void test_empty_file_round_trip(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("empty.safetensors");
    assert_int_equal(dp_safetensors_write(path, NULL, 0, NULL, 0), 0);
    size_t len;
    unsigned char *raw = read_all(path, &len);
    assert_int_equal(len, 16);
    assert_memory_equal(raw, "\x08\0\0\0\0\0\0\0{}      ", 16);
    free(raw);
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_int_equal(dp_safetensors_count(f), 0);
    assert_int_equal(dp_safetensors_find(f, "a", NULL), DP_ENOENT);
    dp_safetensors_close(f);
}

/* Valid JSON the writer never produces but other writers may. */
static void test_header_variants_accepted(void **state)
{
    (void)state;
    dp_safetensors_t *f = NULL;
    dp_st_tensor t;

    /* Whitespace everywhere, keys in another order, metadata last, escapes. */
    const char *pretty = "{\n  \"a\" : {\"data_offsets\" : [ 0 , 8 ] ,\n \"shape\":[ 2 ],"
                         "\"dtype\":\"F32\"}\t,\r\n \"__metadata__\": {\"k\": "
                         "\"v\\u00e9\\ud83d\\ude00\\/\\u20AC\"}\n}\n";
    assert_int_equal(dp_safetensors_open(&f, write_st("pretty", pretty, golden + 64, 8)), 0);
    assert_string_equal(dp_safetensors_meta(f, "k"), "v\xc3\xa9\xf0\x9f\x98\x80/\xe2\x82\xac");
    assert_int_equal(dp_safetensors_find(f, "a", &t), 0);
    assert_int_equal(t.shape[0], 2);
    dp_safetensors_close(f);

    /* Zero-length tensors, a scalar, ranges listed out of order. */
    const char *zeros = "{\"s\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[4,12]},"
                        "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                        "\"e\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[12,12]},"
                        "\"__metadata__\":{}}";
    assert_int_equal(dp_safetensors_open(&f, write_st("zeros", zeros, NULL, 12)), 0);
    assert_int_equal(dp_safetensors_count(f), 4);
    assert_int_equal(dp_safetensors_get(f, 0, &t), 0);
    assert_string_equal(t.name, "s");
    assert_int_equal(t.ndim, 0);
    assert_int_equal(t.bytes, 8);
    assert_int_equal(dp_safetensors_get(f, 1, &t), 0);
    assert_int_equal(t.bytes, 0);
    assert_int_equal(t.ndim, 2);
    assert_int_equal(t.shape[1], 3);
    dp_safetensors_close(f);

    /* A header not padded to a multiple of 8: the data is still aligned. */
    const char *bare = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    assert_int_equal(dp_safetensors_open(
                         &f, write_raw("bare", strlen(bare), bare, strlen(bare), golden + 64, 8)),
                     0);
    assert_int_equal(dp_safetensors_get(f, 0, &t), 0);
    assert_int_equal((uintptr_t)t.data % 64, 0);
    assert_memory_equal(t.data, golden + 64, 8);
    dp_safetensors_close(f);

    /* A name of exactly DP_ST_MAX_NAME bytes round-trips. */
    char name[DP_ST_MAX_NAME + 1];
    memset(name, 'n', DP_ST_MAX_NAME);
    name[DP_ST_MAX_NAME] = '\0';
    dp_st_tensor one = make_tensor(name, DP_ST_U8, 0, NULL, "x");
    assert_int_equal(dp_safetensors_write(tu_tmp_path("long"), &one, 1, NULL, 0), 0);
    assert_int_equal(dp_safetensors_open(&f, tu_tmp_path("long")), 0);
    assert_int_equal(dp_safetensors_find(f, name, NULL), 0);
    dp_safetensors_close(f);
}

/* ---- broken files ----------------------------------------------------------- */

/* Every prefix of a valid file is refused as truncated. */
static void test_truncated_every_cut(void **state)
{
    (void)state;
    tu_quiet_log();
    const float w[4] = {1, 2, 3, 4};
    const int64_t k[2] = {5, 6};
    dp_st_tensor in[] = {
        make_tensor("w", DP_ST_F32, 2, (int64_t[]){2, 2}, w),
        make_tensor("k", DP_ST_I64, 1, (int64_t[]){2}, k),
        make_tensor("last", DP_ST_U8, 1, (int64_t[]){3}, "abc"),
    };
    const char *meta[] = {"epoch", "1"};
    const char *full = tu_tmp_path("full.safetensors");
    assert_int_equal(dp_safetensors_write(full, in, 3, meta, 1), 0);
    size_t len;
    unsigned char *raw = read_all(full, &len);
    size_t data_start = len - (16 + 16 + 3);
    for (size_t cut = 0; cut < len; cut++) {
        const char *path = tu_tmp_path("cut.safetensors");
        assert_int_equal(tu_write_file(path, raw, cut), 0);
        if (cut < 8)
            expect_open_fails(path, DP_ETRUNC, "too short", NULL);
        else if (cut < data_start)
            expect_open_fails(path, DP_ETRUNC, "header size", NULL);
        else
            expect_open_fails(path, DP_ETRUNC, "tensor '", "file truncated");
    }
    /* Cut inside the data: the tensor whose bytes are missing is named. */
    assert_int_equal(tu_write_file(tu_tmp_path("cut2"), raw, data_start + 20), 0);
    expect_open_fails(tu_tmp_path("cut2"), DP_ETRUNC, "tensor 'k'", "[16, 32]");
    /* One byte too many is a tail that belongs to no tensor. */
    raw = realloc(raw, len + 1);
    raw[len] = 0;
    assert_int_equal(tu_write_file(tu_tmp_path("long"), raw, len + 1), 0);
    expect_open_fails(tu_tmp_path("long"), DP_EFORMAT, "[35, 36)", "no tensor");
    free(raw);
    dp_log_set(NULL, NULL);
}

struct corrupt_case {
    const char *header;
    size_t data_len;
    int rc;
    const char *want1, *want2;
};

#define T_A "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
#define T_B(off) "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" off "}"
#define T_U8(name, shape, off)                                                                     \
    "{\"" name "\":{\"dtype\":\"U8\",\"shape\":" shape ",\"data_offsets\":" off "}}"

static const struct corrupt_case corrupt_cases[] = {
    /* not JSON, or not the one object */
    {"hello", 0, DP_EFORMAT, "byte 8", "expected '{'"},
    {"", 0, DP_EFORMAT, "byte 8", "expected '{'"},
    {"        ", 0, DP_EFORMAT, "byte 16", "expected '{'"},
    {"[1]", 0, DP_EFORMAT, "byte 8", NULL},
    {"{" T_A, 8, DP_EFORMAT, "bad header at byte", "expected ',' or '}'"},
    {"{" T_A "} x", 8, DP_EFORMAT, "byte 63", "after the end of the header"},
    {"{}{}", 0, DP_EFORMAT, "byte 10", "after the end"},
    {"{" T_A ",}", 8, DP_EFORMAT, "expected a string", NULL},
    {"{" T_A " " T_B("[8,16]") "}", 16, DP_EFORMAT, "expected ',' or '}'", NULL},
    {"{\"a\":null}", 0, DP_EFORMAT, "expected '{' for a tensor", NULL},
    {"{\"a\":[1]}", 0, DP_EFORMAT, "expected '{' for a tensor", NULL},
    {"{\"a\":{\"dtype\":{\"x\":{}}}}", 0, DP_EFORMAT, "expected a string", NULL},
    {"{\"abc", 0, DP_EFORMAT, "unterminated string", NULL},
    {"{\"abcde\\", 0, DP_EFORMAT, "unterminated string", NULL},
    {"{a:1}", 0, DP_EFORMAT, "expected a string", NULL},
    /* strings */
    {"{\"a\\q\":{}}", 0, DP_EFORMAT, "bad escape", "byte 11"},
    {"{\"\\ud800\":{}}", 0, DP_EFORMAT, "unpaired surrogate", NULL},
    {"{\"\\ud800\\u0041\":{}}", 0, DP_EFORMAT, "unpaired surrogate", NULL},
    {"{\"\\udc00\":{}}", 0, DP_EFORMAT, "unpaired surrogate", NULL},
    {"{\"\\u0000\":{}}", 0, DP_EFORMAT, "\\u0000", NULL},
    {"{\"\\u12\":{}}", 0, DP_EFORMAT, "bad \\u escape", NULL},
    {"{\"\\u12", 0, DP_EFORMAT, "bad \\u escape", NULL},
    {"{\"a\x01\":{}}", 0, DP_EFORMAT, "control character", "byte 11"},
    {"{\"\xff\":{}}", 0, DP_EFORMAT, "invalid UTF-8", "byte 10"},
    {"{\"\xc0\x80\":{}}", 0, DP_EFORMAT, "invalid UTF-8", NULL},
    {"{\"\xed\xa0\x80\":{}}", 0, DP_EFORMAT, "invalid UTF-8", NULL},
    {"{\"\xe2\x82\":{}}", 0, DP_EFORMAT, "invalid UTF-8", NULL},
    {"{\"\":{}}", 0, DP_EFORMAT, "empty tensor name", NULL},
    /* tensor entries */
    {T_U8("a", "[2]", "[0,2]") "x", 2, DP_EFORMAT, "after the end", NULL},
    {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, DP_EFORMAT,
     "tensor 'a': unsupported dtype 'BF16'", NULL},
    {"{\"a\":{\"dtype\":3,\"shape\":[2],\"data_offsets\":[0,4]}}", 4, DP_EFORMAT,
     "expected a string", NULL},
    {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, DP_EFORMAT, "tensor 'a'",
     "missing \"dtype\""},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, DP_EFORMAT, "tensor 'a'",
     "missing \"shape\""},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, DP_EFORMAT, "tensor 'a'",
     "missing \"data_offsets\""},
    {"{\"a\":{}}", 0, DP_EFORMAT, "tensor 'a'", "missing"},
    {"{\"a\":{\"dtypes\":\"F32\"}}", 0, DP_EFORMAT, "tensor 'a'", "unknown key dtypes"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", 0, DP_EFORMAT, "tensor 'a'",
     "repeated key dtype"},
    {"{" T_A ",\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, DP_EFORMAT,
     "tensor 'a' appears twice", NULL},
    /* shapes and numbers */
    {"{\"W1\":{\"dtype\":\"F32\",\"shape\":[20,1,3,3],\"data_offsets\":[0,716]}}", 716, DP_EFORMAT,
     "tensor 'W1': shape [20, 1, 3, 3] needs 720 bytes, data_offsets give 716", NULL},
    {T_U8("a", "[-2]", "[0,0]"), 0, DP_EFORMAT, "tensor 'a'", "negative dimension in shape [-2]"},
    {T_U8("a", "[-9223372036854775808]", "[0,0]"), 0, DP_EFORMAT, "tensor 'a'", "negative"},
    {T_U8("a", "[-9223372036854775809]", "[0,0]"), 0, DP_EFORMAT, "overflows int64", "byte"},
    {T_U8("a", "[99999999999999999999]", "[0,0]"), 0, DP_EFORMAT, "overflows int64", "byte"},
    {T_U8("a", "[9223372036854775808]", "[0,0]"), 0, DP_EFORMAT, "overflows int64", NULL},
    {T_U8("a", "[2]", "[0,9223372036854775808]"), 2, DP_EFORMAT, "overflows int64", NULL},
    {T_U8("a", "[4294967296,4294967296]", "[0,0]"), 0, DP_EFORMAT, "tensor 'a'", "overflows"},
    {T_U8("a", "[4294967296,4294967296,0]", "[0,0]"), 0, DP_EFORMAT, "tensor 'a'", "overflows"},
    {T_U8("a", "[1,1,1,1,1,1,1,1,1]", "[0,1]"), 1, DP_EFORMAT, "tensor 'a'",
     "shape has more than 8"},
    {T_U8("a", "[2.0]", "[0,2]"), 2, DP_EFORMAT, "expected an integer", NULL},
    {T_U8("a", "[2e0]", "[0,2]"), 2, DP_EFORMAT, "expected an integer", NULL},
    {T_U8("a", "[02]", "[0,2]"), 2, DP_EFORMAT, "leading zeros", NULL},
    {T_U8("a", "[\"2\"]", "[0,2]"), 2, DP_EFORMAT, "expected an integer", NULL},
    {T_U8("a", "[[2]]", "[0,2]"), 2, DP_EFORMAT, "expected an integer", NULL},
    {T_U8("a", "[-]", "[0,2]"), 2, DP_EFORMAT, "expected an integer", NULL},
    {T_U8("a", "[2,]", "[0,2]"), 2, DP_EFORMAT, "expected an integer", NULL},
    {T_U8("a", "[2}", "[0,2]"), 2, DP_EFORMAT, "expected ',' or ']'", NULL},
    {T_U8("a", "2", "[0,2]"), 2, DP_EFORMAT, "expected '['", NULL},
    /* byte ranges */
    {T_U8("a", "[2]", "[0,2,4]"), 4, DP_EFORMAT, "tensor 'a'", "data_offsets has more than 2"},
    {T_U8("a", "[2]", "[2]"), 2, DP_EFORMAT, "tensor 'a'", "data_offsets must be [begin, end]"},
    {T_U8("a", "[0]", "[8,0]"), 8, DP_EFORMAT, "tensor 'a'", "end before they begin"},
    {T_U8("a", "[0]", "[-8,0]"), 8, DP_EFORMAT, "tensor 'a'", "negative data offset"},
    {"{" T_A "," T_B("[4,12]") "}", 12, DP_EFORMAT, "tensor 'b' [4, 12) overlaps tensor 'a'", NULL},
    {"{" T_A "," T_B("[0,8]") "}", 8, DP_EFORMAT, "overlaps tensor 'a'", NULL},
    {"{" T_A ",\"z\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]}}", 8, DP_EFORMAT,
     "tensor 'z' [4, 4) overlaps tensor 'a'", NULL},
    {"{" T_A "," T_B("[12,20]") "}", 20, DP_EFORMAT, "hole",
     "bytes [8, 12) (file offset 128) belong to no tensor; tensor 'b'"},
    {"{" T_B("[4,12]") "}", 12, DP_EFORMAT, "hole", "[0, 4)"},
    {"{" T_A "}", 12, DP_EFORMAT, "bytes [8, 12) at the end", NULL},
    {"{}", 8, DP_EFORMAT, "8 data bytes but no tensors", NULL},
    {"{" T_A "}", 4, DP_ETRUNC, "tensor 'a'", "past the end of the data section (4 bytes)"},
    {T_U8("far", "[16]", "[1000000,1000016]"), 16, DP_ETRUNC, "tensor 'far'", NULL},
    /* metadata */
    {"{\"__metadata__\":\"x\"}", 0, DP_EFORMAT, "expected '{' for __metadata__", NULL},
    {"{\"__metadata__\":{\"k\":{\"x\":\"y\"}}}", 0, DP_EFORMAT, "values must be strings", NULL},
    {"{\"__metadata__\":{\"k\":1}}", 0, DP_EFORMAT, "values must be strings", NULL},
    {"{\"__metadata__\":{\"k\":\"v\",}}", 0, DP_EFORMAT, "expected a string", NULL},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, DP_EFORMAT, "second __metadata__", NULL},
    {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, DP_EFORMAT,
     "metadata key 'k' appears twice", NULL},
};

static void test_corrupt_headers(void **state)
{
    (void)state;
    tu_quiet_log();
    for (size_t i = 0; i < COUNTOF(corrupt_cases); i++) {
        const struct corrupt_case *c = &corrupt_cases[i];
        const char *path = write_st("corrupt.safetensors", c->header, NULL, c->data_len);
        dp_safetensors_t *f = NULL;
        int rc = dp_safetensors_open(&f, path);
        if (rc != c->rc || !strstr(dp_last_error(), c->want1) ||
            (c->want2 && !strstr(dp_last_error(), c->want2)))
            fail_msg("case %zu (%s): rc %d, want %d; message \"%s\"", i, c->header, rc, c->rc,
                     dp_last_error());
        assert_null(f);
        /* Every message names the file. */
        assert_error_has(tu_tmp);
    }
    dp_log_set(NULL, NULL);
}

static void test_bad_header_size(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *hdr = "{}      ";
    expect_open_fails(write_raw("huge", (uint64_t)1 << 62, hdr, 8, NULL, 0), DP_EFORMAT,
                      "header size 4611686018427387904", "limit");
    expect_open_fails(write_raw("max", UINT64_MAX, hdr, 8, NULL, 0), DP_EFORMAT, "limit", NULL);
    expect_open_fails(write_raw("over", (100u << 20) + 1, hdr, 8, NULL, 0), DP_EFORMAT, "limit",
                      NULL);
    expect_open_fails(write_raw("long", 1000, hdr, 8, NULL, 0), DP_ETRUNC, "header size 1000",
                      "only 8 bytes follow");
    expect_open_fails(write_raw("short", 9, hdr, 8, NULL, 0), DP_ETRUNC, "header size 9", NULL);
    dp_log_set(NULL, NULL);
}

/* Random mutations of a valid file: each open fails cleanly or gives
 * tensors whose every byte lies in the file (run under ASan to see it). */
static void test_mutations_never_crash(void **state)
{
    (void)state;
    tu_quiet_log();
    const float w[6] = {1, 2, 3, 4, 5, 6};
    const int32_t l[3] = {1, 2, 3};
    dp_st_tensor in[] = {
        make_tensor("w", DP_ST_F32, 2, (int64_t[]){2, 3}, w),
        make_tensor("\xc3\xa9t\\iq\"", DP_ST_I32, 1, (int64_t[]){3}, l),
        make_tensor("z", DP_ST_U8, 1, (int64_t[]){0}, NULL),
        make_tensor("b", DP_ST_U8, 0, NULL, "x"),
    };
    const char *meta[] = {"k", "v\n\x01", "\xe2\x82\xac", "2"};
    const char *base_path = tu_tmp_path("base.safetensors");
    assert_int_equal(dp_safetensors_write(base_path, in, 4, meta, 2), 0);
    size_t len;
    unsigned char *base = read_all(base_path, &len);
    unsigned char *buf = malloc(len);
    static const char interesting[] = "{}[]\",:-0123456789\\u eE.\x80\xff";
    uint64_t x = 0x9E3779B97F4A7C15u;
    int opened = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(buf, base, len);
        size_t n = len;
        int edits = 1 + (int)(x % 3);
        for (int e = 0; e < edits; e++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = (size_t)(x >> 16) % (len - 24);
            switch (x % 10) {
            case 0:
                n = at;
                break;
            case 1:
                buf[at % 8] = (unsigned char)(x >> 40);
                break;
            case 2:
            case 3:
            case 4:
                buf[at] ^= (unsigned char)(1u << (x >> 8) % 8);
                break;
            default:
                buf[at] = (unsigned char)interesting[(x >> 24) % (sizeof interesting - 1)];
            }
        }
        const char *path = tu_tmp_path("mutant.safetensors");
        assert_int_equal(tu_write_file(path, buf, n), 0);
        dp_safetensors_t *f = NULL;
        int rc = dp_safetensors_open(&f, path);
        if (rc != 0 && rc != DP_EFORMAT && rc != DP_ETRUNC)
            fail_msg("iteration %d: rc %d (%s)", iter, rc, dp_last_error());
        if (rc != 0)
            continue;
        opened++;
        unsigned sum = 0;
        for (int i = 0; i < dp_safetensors_count(f); i++) {
            dp_st_tensor t;
            assert_int_equal(dp_safetensors_get(f, i, &t), 0);
            assert_int_equal(dp_safetensors_find(f, t.name, NULL), 0);
            for (size_t b = 0; b < t.bytes; b++)
                sum += ((const unsigned char *)t.data)[b];
        }
        (void)sum;
        dp_safetensors_close(f);
    }
    /* Some mutations (inside the data, inside names) leave a valid file. */
    assert_true(opened > 0);
    free(buf);
    free(base);
    dp_log_set(NULL, NULL);
}

/* ---- writing ---------------------------------------------------------------- */

static void test_write_rejects_bad_input(void **state)
{
    (void)state;
    tu_quiet_log();
    const float v[4] = {0};
    const char *path = tu_tmp_path("bad.safetensors");
    char long_name[DP_ST_MAX_NAME + 2];
    memset(long_name, 'x', DP_ST_MAX_NAME + 1);
    long_name[DP_ST_MAX_NAME + 1] = '\0';
    struct {
        dp_st_tensor t[2];
        int n;
        const char *want;
    } cases[] = {
        {{make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v),
          make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v)},
         2,
         "two tensors are called 'a'"},
        {{make_tensor("", DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "empty name"},
        {{make_tensor(NULL, DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "empty name"},
        {{make_tensor(long_name, DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "longer than 256"},
        {{make_tensor("\xff", DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "not valid UTF-8"},
        {{make_tensor("__metadata__", DP_ST_F32, 1, (int64_t[]){2}, v)}, 1, "reserved"},
        {{make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, NULL)}, 1, "data is NULL"},
        {{make_tensor("a", DP_ST_F32, 1, (int64_t[]){-2}, v)}, 1, "negative dimension"},
    };
    for (size_t i = 0; i < COUNTOF(cases); i++) {
        int rc = dp_safetensors_write(path, cases[i].t, cases[i].n, NULL, 0);
        if (rc != DP_EINVAL || !strstr(dp_last_error(), cases[i].want))
            fail_msg("case %zu: rc %d, message \"%s\"", i, rc, dp_last_error());
    }

    dp_st_tensor t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    t.bytes = 12;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("tensor 'a': shape [2] of F32 needs 8 bytes, given 12");
    t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    t.ndim = 9;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("ndim 9");
    t.ndim = 2;
    t.shape[0] = t.shape[1] = INT64_MAX;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("overflows");
    t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    t.dtype = (dp_st_dtype)9;
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EINVAL);
    assert_error_has("unknown dtype 9");

    t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, v);
    const char *dup_meta[] = {"k", "1", "k", "2"};
    assert_int_equal(dp_safetensors_write(path, &t, 1, dup_meta, 2), DP_EINVAL);
    assert_error_has("metadata key 'k' given twice");
    const char *null_meta[] = {"k", NULL};
    assert_int_equal(dp_safetensors_write(path, &t, 1, null_meta, 1), DP_EINVAL);
    assert_error_has("metadata value 0 is NULL");
    const char *bad_meta[] = {"k", "\xc3"};
    assert_int_equal(dp_safetensors_write(path, &t, 1, bad_meta, 1), DP_EINVAL);
    assert_error_has("not valid UTF-8");
    assert_int_equal(dp_safetensors_write(path, &t, -1, NULL, 0), DP_EINVAL);
    assert_int_equal(dp_safetensors_write(path, NULL, 1, NULL, 0), DP_EINVAL);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 1), DP_EINVAL);

    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

static const float old_v[2] = {1.0f, 2.0f};

/* A small file at path whose content check_old_file recognises. */
static void write_old_file(const char *path)
{
    dp_st_tensor t = make_tensor("old", DP_ST_F32, 1, (int64_t[]){2}, old_v);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), 0);
}

static void check_old_file(const char *path)
{
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_int_equal(dp_safetensors_count(f), 1);
    dp_st_tensor t;
    assert_int_equal(dp_safetensors_find(f, "old", &t), 0);
    assert_memory_equal(t.data, old_v, sizeof old_v);
    dp_safetensors_close(f);
}

static void test_write_replaces_existing(void **state)
{
    (void)state;
    const char *path = tu_tmp_path("ckpt.safetensors");
    write_old_file(path);
    check_old_file(path);
    const int64_t k[3] = {1, 2, 3};
    dp_st_tensor t = make_tensor("new", DP_ST_I64, 1, (int64_t[]){3}, k);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), 0);
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    assert_int_equal(dp_safetensors_count(f), 1);
    assert_int_equal(dp_safetensors_find(f, "old", NULL), DP_ENOENT);
    dp_st_tensor got;
    assert_int_equal(dp_safetensors_find(f, "new", &got), 0);
    assert_same_tensor(&got, &t);
    dp_safetensors_close(f);
    assert_int_equal(count_temp_files(tu_tmp), 0);

    /* A bare file name (no directory part) is written in the current one. */
    char *cwd = getcwd(NULL, 0);
    assert_int_equal(chdir(tu_tmp), 0);
    int rc = dp_safetensors_write("bare.safetensors", &t, 1, NULL, 0);
    int ok = access("bare.safetensors", R_OK);
    assert_int_equal(chdir(cwd), 0);
    free(cwd);
    assert_int_equal(rc, 0);
    assert_int_equal(ok, 0);
}

static void test_write_missing_directory(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *path = tu_tmp_path("missing/ckpt.safetensors");
    dp_st_tensor t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, old_v);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EIO);
    assert_error_has(path);
    assert_error_has("No such file or directory");
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

/* rename() over a directory fails after the data was written and synced:
 * the temporary file goes, the directory stays. */
static void test_write_rename_fails(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *path = tu_tmp_path("dir.safetensors");
    assert_int_equal(mkdir(path, 0755), 0);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/keep", path);
    assert_int_equal(tu_write_file(inner, "x", 1), 0);
    dp_st_tensor t = make_tensor("a", DP_ST_F32, 1, (int64_t[]){2}, old_v);
    assert_int_equal(dp_safetensors_write(path, &t, 1, NULL, 0), DP_EIO);
    assert_error_has(path);
    assert_error_has("rename failed");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(access(inner, F_OK), 0);
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

/* A directory without write permission: the temporary file cannot be made
 * and the old file stays. Root ignores permissions, so root skips. */
static void test_write_readonly_directory(void **state)
{
    (void)state;
    if (geteuid() == 0) {
        tu_skip("running as root, which ignores directory permissions");
    }
    tu_quiet_log();
    const char *dir = tu_tmp_path("ro");
    assert_int_equal(mkdir(dir, 0755), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    write_old_file(path);
    assert_int_equal(chmod(dir, 0555), 0);
    dp_st_tensor t = make_tensor("new", DP_ST_U8, 1, (int64_t[]){1}, "x");
    int rc = dp_safetensors_write(path, &t, 1, NULL, 0);
    assert_int_equal(chmod(dir, 0755), 0);
    assert_int_equal(rc, DP_EIO);
    assert_error_has(path);
    assert_error_has("Permission denied");
    check_old_file(path);
    assert_int_equal(count_temp_files(dir), 0);
    dp_log_set(NULL, NULL);
}

/* A write that fails halfway (the file-size limit stops it with EFBIG, as a
 * full disk would with ENOSPC): old file intact, no temporary left. */
static void test_write_fails_midway(void **state)
{
    (void)state;
    tu_quiet_log();
    const char *path = tu_tmp_path("ckpt.safetensors");
    write_old_file(path);
    static uint8_t big[1 << 16];
    memset(big, 0xab, sizeof big);
    dp_st_tensor t = make_tensor("big", DP_ST_U8, 1, (int64_t[]){sizeof big}, big);

    struct rlimit old_limit, limit;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    if (old_limit.rlim_max != RLIM_INFINITY && old_limit.rlim_max < 4096) {
        tu_skip("the hard file-size limit is already below 4096 bytes");
    }
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    limit = old_limit;
    limit.rlim_cur = 4096;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &limit), 0);
    int rc = dp_safetensors_write(path, &t, 1, NULL, 0);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
    signal(SIGXFSZ, old_handler);

    assert_int_equal(rc, DP_EIO);
    assert_error_has(path);
    assert_error_has("write failed: File too large");
    check_old_file(path);
    assert_int_equal(count_temp_files(tu_tmp), 0);
    dp_log_set(NULL, NULL);
}

/* ---- the API's edges -------------------------------------------------------- */

static void test_api_edges(void **state)
{
    (void)state;
    tu_quiet_log();
    dp_safetensors_close(NULL);
    assert_int_equal(dp_safetensors_count(NULL), 0);
    assert_null(dp_safetensors_meta(NULL, "k"));
    assert_int_equal(dp_safetensors_find(NULL, "a", NULL), DP_ENOENT);

    expect_open_fails(tu_tmp_path("nothing.safetensors"), DP_ENOENT, "nothing.safetensors",
                      "no such file");
    expect_open_fails(tu_tmp, DP_EIO, "not a regular file", NULL);

    const char *path = tu_tmp_path("g.safetensors");
    assert_int_equal(tu_write_file(path, golden, sizeof golden - 1), 0);
    dp_safetensors_t *f = NULL;
    assert_int_equal(dp_safetensors_open(&f, path), 0);
    dp_st_tensor t;
    assert_int_equal(dp_safetensors_get(f, -1, &t), DP_EINVAL);
    assert_int_equal(dp_safetensors_get(f, 1, &t), DP_EINVAL);
    assert_error_has("index 1");
    assert_int_equal(dp_safetensors_get(f, 0, NULL), DP_EINVAL);
    assert_int_equal(dp_safetensors_find(f, NULL, NULL), DP_ENOENT);
    /* The data stays readable after the file is gone: it was loaded. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(dp_safetensors_find(f, "a", &t), 0);
    assert_memory_equal(t.data, golden + 64, 8);
    dp_safetensors_close(f);
    dp_log_set(NULL, NULL);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_size),
        cmocka_unit_test_setup_teardown(test_golden_file_reads, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_writer_matches_golden, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_exact_bytes_with_metadata, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_round_trip, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_empty_file_round_trip, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_header_variants_accepted, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_truncated_every_cut, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_corrupt_headers, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_bad_header_size, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_mutations_never_crash, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_rejects_bad_input, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_replaces_existing, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_missing_directory, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_rename_fails, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_readonly_directory, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_write_fails_midway, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_api_edges, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
