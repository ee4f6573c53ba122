/* dp/option.h - options as data: the names of an enum's values, and the
 * fields of an options struct described one by one (name, type, place,
 * command-line flag, help, range), so that one parser, one printer and one
 * range check serve them all: dp_train's option list (dp/train.h), the
 * command line's flags and its help, man pages and CLI reference, and a
 * binding's keyword arguments.
 *
 *     const dp_option *batch = dp_train_option_find("batch_size");
 *     char why[160];
 *     if (dp_option_parse(batch, &options, "64", why, sizeof why) < 0)
 *         printf("%s 64: %s\n", batch->flag, why); // "expected an integer from ..."
 */
#ifndef DP_OPTION_H
#define DP_OPTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the names of an enum's values --------------------------------------
 * One table per enum, beside the enum (dp_optimizer_kind_names,
 * dp_precision_names, ...), in the order its choices are offered. */
typedef struct dp_named_value {
    const char *name;
    int value;
} dp_named_value;

typedef struct dp_name_table {
    const dp_named_value *entries;
    int count;
} dp_name_table;

#define DP_NAME_TABLE(entries)                                                                     \
    {                                                                                              \
        (entries), (int)(sizeof(entries) / sizeof((entries)[0]))                                   \
    }

/* The value named `name` into *value: 0, or DP_EINVAL (nothing logged) for
 * a name the table lacks (NULL included). */
int dp_name_parse(const dp_name_table *t, const char *name, int *value);
/* The name of `value`, or NULL when it has none. */
const char *dp_name_of(const dp_name_table *t, int value);
/* The names as a choice, "sgd, adam or adamw", into buf; returns buf. */
const char *dp_name_choices(const dp_name_table *t, char *buf, size_t size);

/* ---- options --------------------------------------------------------------- */

typedef enum dp_option_type {
    DP_OPTION_BOOL,   /* bool */
    DP_OPTION_INT,    /* int */
    DP_OPTION_I64,    /* int64_t */
    DP_OPTION_U64,    /* uint64_t */
    DP_OPTION_FLOAT,  /* float */
    DP_OPTION_DOUBLE, /* double */
    DP_OPTION_TEXT,   /* const char *: the caller's string (never copied); NULL: none */
    DP_OPTION_ENUM,   /* an enum of int's size, named by `names` */
    DP_OPTION_VALUE,  /* anything else: `parse` and `format` read and write it */
} dp_option_type;

/* What else an option is (dp_option.traits). */
enum {
    DP_OPTION_AGREE = 1 << 0,       /* every rank of mpirun must be given the same value */
    DP_OPTION_RECORD = 1 << 1,      /* kept in checkpoints, as the metadata "dptrain.<name>" */
    DP_OPTION_RESUME_WARN = 1 << 2, /* recorded: resuming with another value warns */
};

typedef struct dp_option {
    const char *name;        /* "batch_size": the field, and how messages name it: `batch_size` */
    const char *group;       /* "data": the sub-struct that holds it ("" for none) */
    const char *group_title; /* "the data": the group's heading in help */
    const char *flag;        /* "--batch-size"; NULL: not on the command line */
    /* "B": what the flag's value is; NULL: a switch, which takes no value
     * and sets the field to `on` */
    const char *metavar;
    /* A sentence; other options named as `name`. The default follows in
     * brackets, formatted from the defaults, unless the help ends with its
     * own "[...]" (a default that the other options decide). */
    const char *help;
    dp_option_type type;
    size_t offset, size; /* of the field in its options struct */
    /* Integers: imin <= value <= imax. Floating point: lo <= value <= hi,
     * either end open (lo < value, value < hi) where said. */
    int64_t imin, imax;
    double lo, hi;
    bool lo_open, hi_open;
    const dp_name_table *names; /* DP_OPTION_ENUM */
    int on;                     /* a switch: the value it sets (true, false, an enum's) */
    /* DP_OPTION_VALUE: the text into the field; DP_OPTION_TEXT: an
     * optional check of the text before it is stored. 0, or DP_EINVAL
     * with what was expected ("expected 1 (grayscale) or 3 (RGB)") in
     * why[0..size). Nothing is logged. */
    int (*parse)(const char *text, void *field, char *why, size_t size);
    /* DP_OPTION_VALUE: the field as parse reads it; returns buf. */
    const char *(*format)(const void *field, char *buf, size_t size);
    unsigned traits; /* DP_OPTION_AGREE, DP_OPTION_RECORD, ... */
} dp_option;

/* The option's value in *options from text, as a command line gives it:
 * a number (range checked), a name of the enum, "true" or "false" (also
 * "on" and "off") for a bool, the text itself for a string, or what the
 * option's own parse takes. 0, or DP_EINVAL with why[0..size) saying what
 * was expected ("expected an integer from 1 to 1000"); the field is left
 * as it was. Nothing is logged: the caller names the option its own way
 * (a flag, a keyword). */
int dp_option_parse(const dp_option *opt, void *options, const char *text, char *why, size_t size);
/* A switch (metavar NULL): the field set to the switch's `on`. */
void dp_option_switch_on(const dp_option *opt, void *options);
/* The same, logging a failure as "`name` TEXT: expected ..." (what the
 * library's messages say; dptrain shows the flag instead). */
int dp_option_set(const dp_option *opt, void *options, const char *text);
/* The value in *options as text that dp_option_parse reads back to the
 * same value: numbers in the fewest digits that do, a bool as "on" or
 * "off", a NULL string as "none"; returns buf. */
const char *dp_option_format(const dp_option *opt, const void *options, char *buf, size_t size);
/* Whether the value in *options is one the option takes (in range, a
 * named value of the enum): 0, or DP_EINVAL with why[0..size) as
 * dp_option_parse says it. Strings and other values are not checked. */
int dp_option_check(const dp_option *opt, const void *options, char *why, size_t size);
/* Whether the field holds the same value in both structs. */
bool dp_option_equal(const dp_option *opt, const void *a, const void *b);

#ifdef __cplusplus
}
#endif
#endif /* DP_OPTION_H */
