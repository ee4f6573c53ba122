/* safetensors, the format: every dtype's size, a golden file Python's
 * library wrote read back and written again to the same bytes, round trips
 * of every dtype with metadata (and of an empty file), the header variants
 * the format allows, and the API's edges (NULL handles, lookups of what is
 * not there). */
#include "safetensorsutil.h"

#include "dp/core.h"
#include "dp/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
        cmocka_unit_test_setup_teardown(test_api_edges, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
