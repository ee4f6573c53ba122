/* Options as data (dp/option.h): enum names, and one parser, printer and
 * range check for every option of every options struct. */
#include "dp/option.h"

#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dp_name_parse(const dp_name_table *t, const char *name, int *value)
{
    for (int i = 0; name && i < t->count; i++) {
        if (strcmp(name, t->entries[i].name) == 0) {
            *value = t->entries[i].value;
            return 0;
        }
    }
    return DP_EINVAL;
}

const char *dp_name_of(const dp_name_table *t, int value)
{
    for (int i = 0; i < t->count; i++)
        if (t->entries[i].value == value)
            return t->entries[i].name;
    return NULL;
}

const char *dp_name_choices(const dp_name_table *t, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < t->count && used < size; i++) {
        const char *sep = i == 0 ? "" : i == t->count - 1 ? " or " : ", ";
        used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, t->entries[i].name);
    }
    return buf;
}

/* The field of `opt` in the options struct at `base`. */
static void *field_of(const dp_option *opt, const void *base)
{
    return (char *)base + opt->offset;
}

static int64_t int_value(const dp_option *opt, const void *field)
{
    switch (opt->type) {
    case DP_OPTION_INT:
    case DP_OPTION_ENUM:
        return *(const int *)field;
    case DP_OPTION_I64:
        return *(const int64_t *)field;
    case DP_OPTION_U64:
        return (int64_t) * (const uint64_t *)field;
    default:
        return *(const bool *)field;
    }
}

static void set_int(const dp_option *opt, void *field, int64_t v)
{
    if (opt->type == DP_OPTION_INT || opt->type == DP_OPTION_ENUM)
        *(int *)field = (int)v;
    else if (opt->type == DP_OPTION_I64)
        *(int64_t *)field = v;
    else if (opt->type == DP_OPTION_U64)
        *(uint64_t *)field = (uint64_t)v;
    else
        *(bool *)field = v != 0;
}

static double real_value(const dp_option *opt, const void *field)
{
    return opt->type == DP_OPTION_FLOAT ? *(const float *)field : *(const double *)field;
}

/* What the option's range takes, into why: DP_EINVAL. */
static int expected_range(const dp_option *opt, bool real, char *why, size_t size)
{
    if (real)
        snprintf(why, size, "expected a number %s %g and %s %g", opt->lo_open ? ">" : ">=", opt->lo,
                 opt->hi_open ? "<" : "<=", opt->hi);
    else
        snprintf(why, size, "expected an integer from %lld to %lld", (long long)opt->imin,
                 (long long)opt->imax);
    return DP_EINVAL;
}

static bool real_in_range(const dp_option *opt, double x)
{
    return isfinite(x) && (opt->lo_open ? x > opt->lo : x >= opt->lo) &&
           (opt->hi_open ? x < opt->hi : x <= opt->hi);
}

static int expected_names(const dp_option *opt, char *why, size_t size)
{
    char names[256];
    snprintf(why, size, "expected %s", dp_name_choices(opt->names, names, sizeof names));
    return DP_EINVAL;
}

int dp_option_parse(const dp_option *opt, void *options, const char *text, char *why, size_t size)
{
    void *field = field_of(opt, options);
    char *end;
    int value;
    why[0] = '\0';
    if (!text)
        text = "";
    switch (opt->type) {
    case DP_OPTION_BOOL: {
        bool on = strcmp(text, "true") == 0 || strcmp(text, "on") == 0;
        if (!on && strcmp(text, "false") != 0 && strcmp(text, "off") != 0) {
            snprintf(why, size, "expected true or false");
            return DP_EINVAL;
        }
        *(bool *)field = on;
        return 0;
    }
    case DP_OPTION_INT:
    case DP_OPTION_I64:
    case DP_OPTION_U64: {
        errno = 0;
        long long n = strtoll(text, &end, 10);
        if (errno || end == text || *end != '\0' || n < opt->imin || n > opt->imax)
            return expected_range(opt, false, why, size);
        set_int(opt, field, n);
        return 0;
    }
    case DP_OPTION_FLOAT:
    case DP_OPTION_DOUBLE: {
        errno = 0;
        double x = strtod(text, &end);
        if (errno || end == text || *end != '\0' || !real_in_range(opt, x))
            return expected_range(opt, true, why, size);
        if (opt->type == DP_OPTION_FLOAT)
            *(float *)field = (float)x;
        else
            *(double *)field = x;
        return 0;
    }
    case DP_OPTION_ENUM:
        if (dp_name_parse(opt->names, text, &value) < 0)
            return expected_names(opt, why, size);
        *(int *)field = value;
        return 0;
    case DP_OPTION_TEXT:
        if (opt->parse)
            DP_TRY(opt->parse(text, field, why, size));
        *(const char **)field = text;
        return 0;
    case DP_OPTION_VALUE:
        return opt->parse(text, field, why, size);
    }
    return DP_EINVAL;
}

void dp_option_switch_on(const dp_option *opt, void *options)
{
    set_int(opt, field_of(opt, options), opt->on);
}

int dp_option_set(const dp_option *opt, void *options, const char *text)
{
    char why[256];
    int rc = dp_option_parse(opt, options, text, why, sizeof why);
    if (rc < 0)
        DP_ERROR("`%s` %s: %s", opt->name, text ? text : "", why);
    return rc;
}

const char *dp__format_real(double x, bool single, char *buf, size_t size)
{
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, size, "%.*g", digits, x);
        double back = strtod(buf, NULL);
        if (single ? (float)back == (float)x : back == x)
            break;
    }
    return buf;
}

const char *dp_option_format(const dp_option *opt, const void *options, char *buf, size_t size)
{
    const void *field = field_of(opt, options);
    const char *name;
    switch (opt->type) {
    case DP_OPTION_BOOL:
        snprintf(buf, size, "%s", *(const bool *)field ? "on" : "off");
        break;
    case DP_OPTION_INT:
    case DP_OPTION_I64:
        snprintf(buf, size, "%lld", (long long)int_value(opt, field));
        break;
    case DP_OPTION_U64:
        snprintf(buf, size, "%llu", (unsigned long long)*(const uint64_t *)field);
        break;
    case DP_OPTION_FLOAT:
    case DP_OPTION_DOUBLE:
        dp__format_real(real_value(opt, field), opt->type == DP_OPTION_FLOAT, buf, size);
        break;
    case DP_OPTION_ENUM:
        name = dp_name_of(opt->names, *(const int *)field);
        if (name)
            snprintf(buf, size, "%s", name);
        else
            snprintf(buf, size, "%d", *(const int *)field);
        break;
    case DP_OPTION_TEXT:
        name = *(const char *const *)field;
        snprintf(buf, size, "%s", name ? name : "none");
        break;
    case DP_OPTION_VALUE:
        return opt->format(field, buf, size);
    }
    return buf;
}

int dp_option_check(const dp_option *opt, const void *options, char *why, size_t size)
{
    const void *field = field_of(opt, options);
    why[0] = '\0';
    int64_t n;
    switch (opt->type) {
    case DP_OPTION_INT:
    case DP_OPTION_I64:
    case DP_OPTION_U64:
        n = int_value(opt, field);
        /* A uint64_t past INT64_MAX reads as negative: out of every range. */
        if (n < opt->imin || n > opt->imax ||
            (opt->type == DP_OPTION_U64 && *(const uint64_t *)field > (uint64_t)INT64_MAX))
            return expected_range(opt, false, why, size);
        return 0;
    case DP_OPTION_FLOAT:
    case DP_OPTION_DOUBLE:
        return real_in_range(opt, real_value(opt, field)) ? 0
                                                          : expected_range(opt, true, why, size);
    case DP_OPTION_ENUM:
        return dp_name_of(opt->names, *(const int *)field) ? 0 : expected_names(opt, why, size);
    default:
        return 0;
    }
}

bool dp_option_equal(const dp_option *opt, const void *a, const void *b)
{
    char x[1024], y[1024];
    return strcmp(dp_option_format(opt, a, x, sizeof x), dp_option_format(opt, b, y, sizeof y)) ==
           0;
}
