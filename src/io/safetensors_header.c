/* The safetensors header's grammar: one object of objects whose values are
 * strings or arrays of integers, and "__metadata__", an object of strings.
 * Built on the strict reader of io/json.c; only this subset is accepted. */
#include "io/safetensors.h"

#include "core/internal.h"

#include <limits.h>
#include <string.h>

/* Room for one more element in arr (n used, *cap allocated): the array,
 * possibly moved, or NULL (arr is then unchanged and still the caller's). */
static void *reserve_one(void *arr, int n, int *cap, size_t elem)
{
    if (n < *cap)
        return arr;
    if (*cap > INT_MAX / 2)
        return NULL;
    int ncap = *cap ? 2 * *cap : 16;
    void *p = dp__calloc((size_t)ncap, elem);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, arr, (size_t)n * elem);
    dp__free(arr);
    *cap = ncap;
    return p;
}

/* An array of at most max integers of tensor `name`'s `field`. */
static int parse_int_array(dp__json_parser *p, const char *name, const char *field, int64_t *vals,
                           int max, int *count)
{
    DP_TRY(dp__json_expect(p, '[', "expected '[' for an array of integers"));
    int n = 0;
    dp__json_skip_ws(p);
    if (dp__json_peek(p) == ']') {
        p->pos++;
    } else {
        for (;;) {
            int64_t v;
            DP_TRY(dp__json_parse_int(p, &v));
            if (n == max) {
                DP_ERROR("%s: tensor %s: %s has more than %d entries (byte %zu)", p->path,
                         DP_REPR(name), field, max, p->pos + 8);
                return DP_EFORMAT;
            }
            vals[n++] = v;
            int more = dp__json_next_or_close(p, ']', "expected ',' or ']' in an array");
            DP_TRY(more);
            if (!more)
                break;
        }
    }
    *count = n;
    return 0;
}

static int tensor_error(const dp__json_parser *p, const char *name, const char *what,
                        const char *detail)
{
    DP_ERROR("%s: tensor %s: %s%s (byte %zu)", p->path, DP_REPR(name), what, detail, p->pos + 8);
    return DP_EFORMAT;
}

/* {"dtype": "F32", "shape": [..], "data_offsets": [b, e]} in any order. */
static int parse_tensor(dp__json_parser *p, dp_safetensors_t *f, const char *name)
{
    struct st_entry e = {.name = name};
    bool have_dtype = false, have_shape = false, have_offsets = false;
    DP_TRY(dp__json_expect(p, '{', "expected '{' for a tensor"));
    dp__json_skip_ws(p);
    if (dp__json_peek(p) == '}')
        p->pos++;
    else
        for (;;) {
            const char *key;
            DP_TRY(dp__json_parse_string(p, &key));
            DP_TRY(dp__json_expect(p, ':', "expected ':' after a key"));
            bool *seen = strcmp(key, "dtype") == 0          ? &have_dtype
                         : strcmp(key, "shape") == 0        ? &have_shape
                         : strcmp(key, "data_offsets") == 0 ? &have_offsets
                                                            : NULL;
            if (!seen)
                return tensor_error(p, name, "unknown key ", DP_REPR(key));
            if (*seen)
                return tensor_error(p, name, "repeated key ", DP_REPR(key));
            *seen = true;
            if (seen == &have_dtype) {
                const char *dtype;
                DP_TRY(dp__json_parse_string(p, &dtype));
                if (dp__st_dtype_from_name(dtype, &e.dtype) < 0) {
                    DP_ERROR("%s: tensor %s: unsupported dtype %s", p->path, DP_REPR(name),
                             DP_REPR(dtype));
                    return DP_EFORMAT;
                }
            } else if (seen == &have_shape) {
                DP_TRY(parse_int_array(p, name, "shape", e.shape, DP_ST_MAX_DIMS, &e.ndim));
            } else {
                int64_t off[2];
                int k;
                DP_TRY(parse_int_array(p, name, "data_offsets", off, 2, &k));
                if (k != 2)
                    return tensor_error(p, name, "data_offsets must be [begin, end]", "");
                if (off[0] < 0 || off[1] < 0)
                    return tensor_error(p, name, "negative data offset", "");
                e.begin = (uint64_t)off[0];
                e.end = (uint64_t)off[1];
            }
            int more = dp__json_next_or_close(p, '}', "expected ',' or '}' in a tensor");
            DP_TRY(more);
            if (!more)
                break;
        }
    if (!have_dtype || !have_shape || !have_offsets)
        return tensor_error(p, name, "missing ",
                            !have_dtype   ? "\"dtype\""
                            : !have_shape ? "\"shape\""
                                          : "\"data_offsets\"");
    for (int d = 0; d < e.ndim; d++) {
        if (e.shape[d] < 0) {
            char shape[ST_SHAPE_STR];
            dp__shape_str(shape, sizeof shape, e.ndim, e.shape);
            return tensor_error(p, name, "negative dimension in shape ", shape);
        }
    }
    struct st_entry *tensors = reserve_one(f->tensors, f->n, &f->cap, sizeof *tensors);
    if (!tensors) {
        DP_ERROR("%s: out of memory for %d tensors", p->path, f->n + 1);
        return DP_ENOMEM;
    }
    f->tensors = tensors;
    f->tensors[f->n++] = e;
    return 0;
}

/* {"key": "value", ...}: nothing else is allowed inside "__metadata__". */
static int parse_meta(dp__json_parser *p, dp_safetensors_t *f)
{
    DP_TRY(dp__json_expect(p, '{', "expected '{' for __metadata__"));
    dp__json_skip_ws(p);
    if (dp__json_peek(p) == '}') {
        p->pos++;
        return 0;
    }
    for (;;) {
        struct st_meta m;
        DP_TRY(dp__json_parse_string(p, &m.key));
        DP_TRY(dp__json_expect(p, ':', "expected ':' after a key"));
        dp__json_skip_ws(p);
        if (dp__json_peek(p) != '"')
            return dp__json_error(p, "__metadata__ values must be strings");
        DP_TRY(dp__json_parse_string(p, &m.value));
        struct st_meta *meta = reserve_one(f->meta, f->nmeta, &f->meta_cap, sizeof *meta);
        if (!meta) {
            DP_ERROR("%s: out of memory for %d metadata entries", p->path, f->nmeta + 1);
            return DP_ENOMEM;
        }
        f->meta = meta;
        f->meta[f->nmeta++] = m;
        int more = dp__json_next_or_close(p, '}', "expected ',' or '}' in __metadata__");
        DP_TRY(more);
        if (!more)
            return 0;
    }
}

int dp__st_parse_header(dp__json_parser *p, dp_safetensors_t *f)
{
    bool have_meta = false;
    DP_TRY(dp__json_expect(p, '{', "expected '{' at the start of the header"));
    dp__json_skip_ws(p);
    if (dp__json_peek(p) == '}')
        p->pos++;
    else
        for (;;) {
            const char *key;
            DP_TRY(dp__json_parse_string(p, &key));
            if (!key[0])
                return dp__json_error(p, "empty tensor name");
            /* The writer's limit: a file that opens can be written back. */
            if (strlen(key) > DP_ST_MAX_NAME) {
                DP_ERROR("%s: tensor name '%.40s...' is longer than %d bytes (byte %zu)", p->path,
                         key, DP_ST_MAX_NAME, p->pos + 8);
                return DP_EFORMAT;
            }
            DP_TRY(dp__json_expect(p, ':', "expected ':' after a key"));
            if (strcmp(key, ST_META_KEY) == 0) {
                if (have_meta)
                    return dp__json_error(p, "second __metadata__");
                have_meta = true;
                DP_TRY(parse_meta(p, f));
            } else {
                DP_TRY(parse_tensor(p, f, key));
            }
            int more = dp__json_next_or_close(p, '}', "expected ',' or '}' after a tensor");
            DP_TRY(more);
            if (!more)
                break;
        }
    dp__json_skip_ws(p);
    if (p->pos != p->len)
        return dp__json_error(p, "bytes after the end of the header object");
    return 0;
}
