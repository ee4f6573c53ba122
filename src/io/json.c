/* A strict JSON reader for untrusted input: the pieces a format's grammar
 * is built from (strings, int64 integers, punctuation), each checking every
 * index against the document's length and never recursing. Strings are
 * decoded in place; decoding never lengthens one, so the terminating NUL
 * lands at or before its closing quote. */
#include "io/json.h"

#include "core/internal.h"

#include <string.h>

/* The length of the well-formed UTF-8 sequence of a non-ASCII lead byte at
 * s[0], with `avail` bytes readable; 0 if malformed (overlong forms,
 * surrogates and code points past U+10FFFF included). */
size_t dp__utf8_len(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (avail < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

bool dp__utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t len = strlen(str);
    for (size_t i = 0; i < len;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = dp__utf8_len(s + i, len - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

int dp__json_error(const dp__json_parser *p, const char *what)
{
    DP_ERROR("%s: bad %s at byte %zu: %s", p->path, p->doc, p->base + p->pos, what);
    return DP_EFORMAT;
}

int dp__json_peek(const dp__json_parser *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

void dp__json_skip_ws(dp__json_parser *p)
{
    for (int c = dp__json_peek(p); c == ' ' || c == '\t' || c == '\n' || c == '\r';
         c = dp__json_peek(p))
        p->pos++;
}

int dp__json_expect(dp__json_parser *p, char c, const char *what)
{
    dp__json_skip_ws(p);
    if (dp__json_peek(p) != (unsigned char)c)
        return dp__json_error(p, what);
    p->pos++;
    return 0;
}

/* After a value inside an object or array: 1 for ',', 0 for the closer. */
int dp__json_next_or_close(dp__json_parser *p, char closer, const char *what)
{
    dp__json_skip_ws(p);
    int c = dp__json_peek(p);
    if (c == ',' || c == (unsigned char)closer) {
        p->pos++;
        return c == ',';
    }
    return dp__json_error(p, what);
}

static int hex4(const dp__json_parser *p, size_t at, uint32_t *out)
{
    if (at > p->len || p->len - at < 4)
        return -1;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[at + i];
        uint32_t d;
        if (c >= '0' && c <= '9')
            d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (uint32_t)(c - 'A' + 10);
        else
            return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* A \uXXXX escape (or a surrogate pair of two) at p->pos; advances past it. */
static int parse_u_escape(dp__json_parser *p, uint32_t *cp)
{
    uint32_t u, lo;
    if (hex4(p, p->pos + 2, &u) < 0)
        return dp__json_error(p, "bad \\u escape");
    if (u >= 0xDC00 && u <= 0xDFFF)
        return dp__json_error(p, "unpaired surrogate in a \\u escape");
    if (u >= 0xD800 && u <= 0xDBFF) {
        size_t at = p->pos + 6; /* <= len, as hex4 read up to there */
        if (p->len - at < 2 || p->s[at] != '\\' || p->s[at + 1] != 'u' ||
            hex4(p, at + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
            return dp__json_error(p, "unpaired surrogate in a \\u escape");
        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        p->pos += 6;
    }
    if (u == 0)
        return dp__json_error(p, "\\u0000 in a string is not supported");
    p->pos += 6;
    *cp = u;
    return 0;
}

static size_t encode_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string, decoded in place and NUL-terminated; *out points into the
 * header. The write index w never passes the read index p->pos: an escape
 * of k bytes decodes to at most k bytes (6 -> 3, a 12-byte pair -> 4). */
int dp__json_parse_string(dp__json_parser *p, const char **out)
{
    dp__json_skip_ws(p);
    if (dp__json_peek(p) != '"')
        return dp__json_error(p, "expected a string");
    p->pos++;
    char *s = p->s;
    size_t start = p->pos, w = p->pos;
    for (;;) {
        int c = dp__json_peek(p);
        if (c < 0)
            return dp__json_error(p, "unterminated string");
        if (c == '"')
            break;
        if (c < 0x20)
            return dp__json_error(p, "control character in a string");
        if (c >= 0x80) {
            size_t k = dp__utf8_len((const unsigned char *)s + p->pos, p->len - p->pos);
            if (k == 0)
                return dp__json_error(p, "invalid UTF-8 in a string");
            memmove(s + w, s + p->pos, k);
            w += k;
            p->pos += k;
            continue;
        }
        if (c != '\\') {
            s[w++] = (char)c;
            p->pos++;
            continue;
        }
        if (p->len - p->pos < 2)
            return dp__json_error(p, "unterminated string");
        char e = s[p->pos + 1], d;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            d = e;
            break;
        case 'b':
            d = '\b';
            break;
        case 'f':
            d = '\f';
            break;
        case 'n':
            d = '\n';
            break;
        case 'r':
            d = '\r';
            break;
        case 't':
            d = '\t';
            break;
        case 'u': {
            /* Set on success only; gcc cannot see that once the library is
             * compiled position-independent (-Wmaybe-uninitialized). */
            uint32_t cp = 0;
            DP_TRY(parse_u_escape(p, &cp));
            w += encode_utf8(s + w, cp);
            continue;
        }
        default:
            return dp__json_error(p, "bad escape in a string");
        }
        s[w++] = d;
        p->pos += 2;
    }
    s[w] = '\0';
    p->pos++;
    *out = s + start;
    return 0;
}

/* A JSON integer (no fraction, no exponent, no leading zeros) in int64. */
int dp__json_parse_int(dp__json_parser *p, int64_t *out)
{
    dp__json_skip_ws(p);
    size_t start = p->pos;
    bool neg = dp__json_peek(p) == '-';
    if (neg)
        p->pos++;
    int c = dp__json_peek(p);
    if (c < '0' || c > '9')
        return dp__json_error(p, "expected an integer");
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t v = 0;
    if (c == '0') {
        p->pos++;
    } else {
        for (; c >= '0' && c <= '9'; c = dp__json_peek(p)) {
            uint64_t d = (uint64_t)(c - '0');
            if (v > (limit - d) / 10) {
                p->pos = start;
                return dp__json_error(p, "integer overflows int64");
            }
            v = v * 10 + d;
            p->pos++;
        }
    }
    c = dp__json_peek(p);
    if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E')
        return dp__json_error(p, "expected an integer (no leading zeros, fractions or exponents)");
    *out = !neg ? (int64_t)v : v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    return 0;
}
