/* One line of an nn.Sequential body: `[nn.]Name(arg, key=arg, ...)`, where
 * an argument is integer arithmetic (`16 * 5 * 5`), a float (`1e-5`), a pair
 * (`(2, 2)`), True/False or a quoted string. A recursive-descent parser over
 * the line's characters; the caller strips comments and blank lines. */
#include "nn/sequential/sequential_parse.h"

#include "core/internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cursor {
    const char *p;
    const char *why; /* the first error, a static phrase */
} cursor;

static void skip_space(cursor *c)
{
    while (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (*c->p != ch)
        return false;
    c->p++;
    return true;
}

static bool fail(cursor *c, const char *why)
{
    if (!c->why)
        c->why = why;
    return false;
}

/* An identifier of at most DP__SEQ_NAME - 1 characters. */
static bool ident(cursor *c, char *out)
{
    skip_space(c);
    if (!isalpha((unsigned char)*c->p) && *c->p != '_')
        return fail(c, "expected a name");
    size_t n = 0;
    while (isalnum((unsigned char)*c->p) || *c->p == '_') {
        if (n + 1 >= DP__SEQ_NAME)
            return fail(c, "name too long");
        out[n++] = *c->p++;
    }
    out[n] = '\0';
    return true;
}

typedef struct number {
    double v;
    bool is_int;
} number;

static bool expr(cursor *c, number *out, int depth);

/* Digits of `base` with single underscores between them (Python's 1_000),
 * copied without the underscores into buf[*n..]; false unless at least one
 * digit and no stray underscore. */
static bool digits(cursor *c, int base, char *buf, size_t *n, size_t cap)
{
    bool any = false;
    for (;;) {
        const char *q = c->p;
        if (*q == '_' && any)
            q++;
        int ch = tolower((unsigned char)*q);
        int d = isdigit(ch) ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : 99;
        if (d >= base)
            return any && *c->p != '_';
        if (*n + 1 >= cap)
            return false;
        buf[(*n)++] = (char)ch;
        c->p = q + 1;
        any = true;
    }
}

/* A number as Python writes one, which is what PyTorch's modules get: a
 * decimal integer (no leading zeros but in 0, 00, ...), 0x/0o/0b integers,
 * or a decimal float with a point or an exponent. strtod also read hex
 * floats (0x1p-1 was taken for an integer, 0) and inf or nan spellings. */
static bool literal(cursor *c, number *out)
{
    char buf[64];
    size_t n = 0;
    const char *start = c->p;
    int base = 10;
    if (start[0] == '0' && start[1] && strchr("xXoObB", start[1])) {
        int prefix = tolower((unsigned char)start[1]);
        base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : 2;
    }
    out->is_int = true;
    if (base != 10) {
        c->p += 2;
        if (*c->p == '_')
            c->p++; /* Python allows 0x_ff */
        if (!digits(c, base, buf, &n, sizeof buf))
            return fail(c, n + 1 >= sizeof buf ? "number out of range" : "expected a number");
        buf[n] = '\0';
        out->v = (double)strtoull(buf, NULL, base);
    } else {
        bool whole = isdigit((unsigned char)*c->p) && digits(c, 10, buf, &n, sizeof buf);
        if (!whole && isdigit((unsigned char)*c->p)) /* more digits than buf holds */
            return fail(c, "number out of range");
        size_t int_digits = n;
        /* Room for the point or the exponent's 'e' and sign, and the NUL:
         * a longer number is out of range anyway. */
        if (n + 3 >= sizeof buf)
            return fail(c, "number out of range");
        if (*c->p == '.') {
            out->is_int = false;
            buf[n++] = *c->p++;
            if (isdigit((unsigned char)*c->p) && !digits(c, 10, buf, &n, sizeof buf))
                return fail(c, "expected a number");
        }
        if (n == 0 || (n == 1 && buf[0] == '.'))
            return fail(c, "expected a number");
        if (*c->p == 'e' || *c->p == 'E') {
            if (n + 3 >= sizeof buf)
                return fail(c, "number out of range");
            out->is_int = false;
            buf[n++] = 'e';
            c->p++;
            if ((*c->p == '+' || *c->p == '-') && n + 1 < sizeof buf)
                buf[n++] = *c->p++;
            if (!digits(c, 10, buf, &n, sizeof buf))
                return fail(c, "expected a number");
        }
        buf[n] = '\0';
        if (out->is_int && buf[0] == '0' && strspn(buf, "0") != int_digits)
            return fail(c, "leading zeros in a decimal integer (Python does not allow them)");
        out->v = strtod(buf, NULL);
    }
    /* 0x1p-1, 12abc, 1_: not a number Python would read. */
    if (isalnum((unsigned char)*c->p) || *c->p == '_' || (base != 10 && *c->p == '.'))
        return fail(c, "not a number Python reads");
    if (!isfinite(out->v) || fabs(out->v) > 1e15)
        return fail(c, "number out of range");
    return true;
}

static bool factor(cursor *c, number *out, int depth)
{
    skip_space(c);
    if (depth > 32)
        return fail(c, "expression nested too deeply");
    if (eat(c, '-')) {
        if (!factor(c, out, depth + 1))
            return false;
        out->v = -out->v;
        return true;
    }
    if (eat(c, '(')) {
        if (!expr(c, out, depth + 1))
            return false;
        return eat(c, ')') || fail(c, "missing ')' in an expression");
    }
    return literal(c, out);
}

static bool term(cursor *c, number *out, int depth)
{
    if (!factor(c, out, depth))
        return false;
    for (;;) {
        skip_space(c);
        char op = *c->p;
        if (op != '*' && op != '/')
            return true;
        bool floor_div = op == '/' && c->p[1] == '/';
        c->p += floor_div ? 2 : 1;
        number rhs;
        if (!factor(c, &rhs, depth + 1))
            return false;
        if (op == '*') {
            out->v *= rhs.v;
            out->is_int = out->is_int && rhs.is_int;
        } else if (rhs.v == 0) {
            return fail(c, "division by zero");
        } else {
            out->v = floor_div ? floor(out->v / rhs.v) : out->v / rhs.v;
            out->is_int = floor_div && out->is_int && rhs.is_int;
        }
        if (fabs(out->v) > 1e15)
            return fail(c, "number out of range");
    }
}

static bool expr(cursor *c, number *out, int depth)
{
    if (!term(c, out, depth))
        return false;
    for (;;) {
        skip_space(c);
        char op = *c->p;
        if (op != '+' && op != '-')
            return true;
        c->p++;
        number rhs;
        if (!term(c, &rhs, depth + 1))
            return false;
        out->v = op == '+' ? out->v + rhs.v : out->v - rhs.v;
        out->is_int = out->is_int && rhs.is_int;
        if (fabs(out->v) > 1e15)
            return fail(c, "number out of range");
    }
}

static bool string_value(cursor *c, dp__seq_arg *a)
{
    char quote = *c->p++;
    size_t n = 0;
    while (*c->p && *c->p != quote) {
        if (n + 1 >= sizeof a->text)
            return fail(c, "string too long");
        a->text[n++] = *c->p++;
    }
    a->text[n] = '\0';
    if (*c->p != quote)
        return fail(c, "unterminated string");
    c->p++;
    a->kind = DP__ARG_STRING;
    return true;
}

static bool value(cursor *c, dp__seq_arg *a)
{
    skip_space(c);
    if (*c->p == '\'' || *c->p == '"')
        return string_value(c, a);
    if (strncmp(c->p, "None", 4) == 0) {
        c->p += 4;
        a->kind = DP__ARG_NONE;
        return true;
    }
    if (strncmp(c->p, "True", 4) == 0 || strncmp(c->p, "False", 5) == 0) {
        bool t = c->p[0] == 'T';
        c->p += t ? 4 : 5;
        a->kind = DP__ARG_BOOL;
        a->value = t;
        return true;
    }
    number first;
    const char *start = c->p;
    if (eat(c, '(')) {
        if (!expr(c, &first, 0))
            return false;
        if (eat(c, ',')) { /* a pair (h, w) */
            number second;
            if (!expr(c, &second, 0))
                return false;
            eat(c, ',');
            if (!eat(c, ')'))
                return fail(c, "missing ')' after a pair");
            a->kind = DP__ARG_PAIR;
            a->value = first.v;
            a->second = second.v;
            a->is_int = first.is_int && second.is_int;
            return true;
        }
        if (!eat(c, ')'))
            return fail(c, "missing ')' in an expression");
        /* (e) followed by more arithmetic: read it all again as one. */
        skip_space(c);
        if (*c->p && strchr("*/+-", *c->p)) {
            c->p = start;
            if (!expr(c, &first, 0))
                return false;
        }
    } else if (!expr(c, &first, 0)) {
        return false;
    }
    a->kind = DP__ARG_NUMBER;
    a->value = first.v;
    a->is_int = first.is_int;
    return true;
}

static bool argument(cursor *c, dp__seq_arg *a)
{
    memset(a, 0, sizeof *a);
    skip_space(c);
    /* key=value: a name followed by '=' (not '=='). */
    const char *start = c->p;
    if (isalpha((unsigned char)*c->p) && strncmp(c->p, "True", 4) != 0 &&
        strncmp(c->p, "False", 5) != 0 && strncmp(c->p, "None", 4) != 0) {
        if (!ident(c, a->key))
            return false;
        if (!eat(c, '='))
            return fail(c, "expected '=' after an argument name");
    } else {
        c->p = start;
    }
    return value(c, a);
}

int dp__seq_parse_line(const char *text, dp__seq_call *call, const char **why)
{
    memset(call, 0, sizeof *call);
    cursor c = {text, NULL};
    char first[DP__SEQ_NAME];
    bool ok = ident(&c, first);
    if (ok && strcmp(first, "nn") == 0 && eat(&c, '.'))
        ok = ident(&c, call->module);
    else if (ok)
        memcpy(call->module, first, sizeof first);
    ok = ok && (eat(&c, '(') || fail(&c, "expected '(' after the module name"));
    if (ok && !eat(&c, ')')) {
        for (;;) {
            if (call->nargs == DP__SEQ_MAX_ARGS) {
                ok = fail(&c, "too many arguments");
                break;
            }
            if (!(ok = argument(&c, &call->args[call->nargs++])))
                break;
            if (eat(&c, ')'))
                break;
            if (!eat(&c, ',')) {
                skip_space(&c);
                ok = fail(&c, *c.p ? "expected ',' or ')' after an argument" : "missing ')'");
                break;
            }
            if (eat(&c, ')')) /* a trailing comma */
                break;
        }
    }
    if (ok) {
        skip_space(&c);
        if (*c.p == ',') /* nn.Sequential's own separator between modules */
            c.p++;
        skip_space(&c);
        if (*c.p)
            ok = fail(&c, "unexpected text after ')'");
    }
    if (!ok) {
        *why = c.why ? c.why : "cannot read the line";
        return DP_EFORMAT;
    }
    return 0;
}
