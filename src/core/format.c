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

/* The code point of the UTF-8 sequence at s (*len bytes), or -1 (*len 1)
 * where s holds no valid sequence (overlong forms and surrogates too). */
static long utf8_next(const unsigned char *s, int *len)
{
    static const long min_of[5] = {0, 0, 0x80, 0x800, 0x10000};
    int n = s[0] < 0x80             ? 1
            : (s[0] & 0xe0) == 0xc0 ? 2
            : (s[0] & 0xf0) == 0xe0 ? 3
            : (s[0] & 0xf8) == 0xf0 ? 4
                                    : 0;
    *len = 1;
    if (n == 0)
        return -1;
    long c = n == 1 ? s[0] : s[0] & (0x7f >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return -1;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min_of[n] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return -1;
    *len = n;
    return c;
}

/* Whether Python's str.isprintable() is false for code point c, for the
 * characters that can hide or fake text on a line: controls (Cc), the
 * spaces other than ' ' (Zs), line and paragraph separators (Zl, Zp) and
 * the format characters (Cf: bidirectional overrides, zero-width marks,
 * the byte order mark). */
static bool hidden(long c)
{
    static const long ranges[][2] = {
        {0x00, 0x1f},     {0x7f, 0xa0},     {0xad, 0xad},     {0x600, 0x605},
        {0x61c, 0x61c},   {0x6dd, 0x6dd},   {0x70f, 0x70f},   {0x1680, 0x1680},
        {0x180e, 0x180e}, {0x2000, 0x200f}, {0x2028, 0x202f}, {0x205f, 0x2064},
        {0x2066, 0x206f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}, {0xfff9, 0xfffb},
    };
    for (size_t i = 0; i < DP_COUNTOF(ranges); i++)
        if (c >= ranges[i][0] && c <= ranges[i][1])
            return true;
    return false;
}

const char *dp_repr(const char *s, char *buf, size_t size)
{
    if (!buf || size == 0)
        return buf;
    if (!s)
        s = "";
    /* Python quotes with ' unless the text holds ' and no ". */
    char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
    size_t o = 0, cap = size > 5 ? size - 5 : 0; /* room for "..." and the quote */
    if (cap == 0) {
        snprintf(buf, size, "%s", size > 3 ? "..." : "");
        return buf;
    }
    buf[o++] = q;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        char piece[16];
        int len;
        long c = utf8_next(p, &len);
        if (c < 0)
            snprintf(piece, sizeof piece, "\\x%02x", *p);
        else if (c == '\\' || c == q)
            snprintf(piece, sizeof piece, "\\%c", (char)c);
        else if (c == '\n' || c == '\r' || c == '\t')
            snprintf(piece, sizeof piece, "\\%c", c == '\n' ? 'n' : c == '\r' ? 'r' : 't');
        else if (hidden(c))
            snprintf(piece, sizeof piece, c <= 0xff ? "\\x%02lx" : "\\u%04lx", c);
        else
            snprintf(piece, sizeof piece, "%.*s", len, (const char *)p);
        size_t n = strlen(piece);
        if (o + n > cap) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, piece, n);
        o += n;
        p += len;
    }
    buf[o++] = q;
    buf[o] = '\0';
    return buf;
}

const char *dp_name_str(const char *s, char *buf, size_t size)
{
    if (!s || !*s || *s == ' ' || s[strlen(s) - 1] == ' ')
        return dp_repr(s, buf, size);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int len;
        long c = utf8_next(p, &len);
        if (c < 0 || c == '\'' || c == '"' || c == '\\' || hidden(c))
            return dp_repr(s, buf, size);
        p += len;
    }
    return s;
}
