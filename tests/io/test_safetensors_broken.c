/* safetensors, broken files: truncated at every byte, corrupt headers of
 * every kind and bad header sizes (each must fail with a message naming the
 * tensor or offset, never crash), and a small deterministic mutation fuzz
 * of a valid file. */
#include "safetensorsutil.h"

#include "dp/core.h"
#include "dp/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    {"{\"a\":{\"dtypes\":\"F32\"}}", 0, DP_EFORMAT, "tensor 'a'", "unknown key 'dtypes'"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", 0, DP_EFORMAT, "tensor 'a'",
     "repeated key 'dtype'"},
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

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_truncated_every_cut, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_corrupt_headers, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_bad_header_size, tu_setup_tmp, tu_teardown_tmp),
        cmocka_unit_test_setup_teardown(test_mutations_never_crash, tu_setup_tmp, tu_teardown_tmp),
    };
    return tu_run(argc, argv, tests, NULL, NULL);
}
