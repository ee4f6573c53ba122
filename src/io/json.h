/* The JSON reader of src/io/json.c, for the formats of src/io. */
#ifndef DP_IO_JSON_H
#define DP_IO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A JSON document being read: s[0..len) (decoded in place as it is read),
 * the read position, and for messages the file, what the document is in it
 * ("header") and the file offset of s[0]. */
typedef struct dp__json_parser {
    const char *path;
    const char *doc;
    size_t base;
    char *s;    /* the document's bytes, decoded in place */
    size_t len; /* its length; s[len] may not be read */
    size_t pos;
} dp__json_parser;

/* Logs "PATH: bad DOC at byte N: WHAT"; returns DP_EFORMAT. */
int dp__json_error(const dp__json_parser *p, const char *what);
/* The byte at the read position, or -1 at the end. */
int dp__json_peek(const dp__json_parser *p);
void dp__json_skip_ws(dp__json_parser *p);
/* Skips white space and the character c, or fails with `what`. */
int dp__json_expect(dp__json_parser *p, char c, const char *what);
/* After a value inside an object or array: 1 for ',', 0 for the closer. */
int dp__json_next_or_close(dp__json_parser *p, char closer, const char *what);
/* A JSON string, decoded in place and NUL-terminated; *out points into s.
 * \u0000 is refused (it would end the C string). */
int dp__json_parse_string(dp__json_parser *p, const char **out);
/* A JSON integer (no fraction, no exponent, no leading zeros) in int64. */
int dp__json_parse_int(dp__json_parser *p, int64_t *out);

/* The length of the well-formed UTF-8 sequence of a non-ASCII lead byte at
 * s[0], with `avail` bytes readable; 0 if malformed. */
size_t dp__utf8_len(const unsigned char *s, size_t avail);
/* Whether a NUL-terminated string is well-formed UTF-8. */
bool dp__utf8_valid(const char *str);

#endif
