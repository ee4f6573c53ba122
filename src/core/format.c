/* Text that more than one layer writes the same way: tensor shapes in
 * messages and JSON string literals (safetensors headers, metrics lines). */
#include "core/internal.h"

#include <inttypes.h>
#include <string.h>

const char *dp__shape_str(char *buf, size_t size, int ndim, const int64_t *shape)
{
    if (size == 0)
        return buf;
    size_t off = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && off < size; i++)
        off += (size_t)snprintf(buf + off, size - off, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (off < size)
        snprintf(buf + off, size - off, "]");
    return buf;
}

/* serde_json's escaping, so that a header we write is byte for byte what
 * Python's safetensors writes for the same names. */
void dp__json_string(const char *s, size_t n, dp__put_fn put, void *ctx)
{
    put(ctx, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(ctx, s + run, i - run);
        run = i + 1;
        char esc[8];
        switch (c) {
        case '"':
            put(ctx, "\\\"", 2);
            break;
        case '\\':
            put(ctx, "\\\\", 2);
            break;
        case '\b':
            put(ctx, "\\b", 2);
            break;
        case '\f':
            put(ctx, "\\f", 2);
            break;
        case '\n':
            put(ctx, "\\n", 2);
            break;
        case '\r':
            put(ctx, "\\r", 2);
            break;
        case '\t':
            put(ctx, "\\t", 2);
            break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(ctx, esc, 6);
        }
    }
    put(ctx, s + run, n - run);
    put(ctx, "\"", 1);
}
