/* One line of an nn.Sequential file read into its module's name and
 * arguments (sequential_parse.c), before anything checks what they mean. */
#ifndef DP_NN_SEQUENTIAL_PARSE_H
#define DP_NN_SEQUENTIAL_PARSE_H

#include <stdbool.h>

enum { DP__SEQ_MAX_ARGS = 8, DP__SEQ_NAME = 24 };

/* One argument as written: a number (integer arithmetic allowed), a pair
 * `(a, b)`, True/False, None, or a quoted string; `key` empty when positional. */
typedef struct dp__seq_arg {
    char key[DP__SEQ_NAME];
    enum { DP__ARG_NUMBER, DP__ARG_PAIR, DP__ARG_BOOL, DP__ARG_STRING, DP__ARG_NONE } kind;
    bool is_int;             /* a number without a decimal point or exponent */
    double value;            /* number, bool (0/1), first of a pair */
    double second;           /* second of a pair */
    char text[DP__SEQ_NAME]; /* a string's content */
} dp__seq_arg;

/* One line: `[nn.]Name(args)`. */
typedef struct dp__seq_call {
    char module[DP__SEQ_NAME];
    dp__seq_arg args[DP__SEQ_MAX_ARGS];
    int nargs;
    int line;        /* 1-based line number in the file */
    char source[96]; /* the line as written, trimmed, for messages */
} dp__seq_call;

/* Parses one line (no comment, not blank). 0, or DP_EFORMAT with *why set to
 * a static phrase ("missing ')'", ...). */
int dp__seq_parse_line(const char *text, dp__seq_call *call, const char **why);

#endif
