/* One parser for every command's flags (cli.h): each flag is a dp_option
 * of the command's table, read by dp_option_parse. */
#include "cli.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dp_option cli_like(const char *train_name, size_t offset, size_t size, const char *help)
{
    const dp_option *like = dp_train_option_find(train_name);
    if (!like || like->size != size) {
        fprintf(stderr, "dptrain: %s is no train option of this size\n", train_name);
        abort();
    }
    dp_option o = *like;
    o.offset = offset;
    o.group = o.group_title = NULL;
    o.traits = 0;
    if (help)
        o.help = help;
    return o;
}

int cli_option_index(const cli_command *c, const char *flag)
{
    for (int i = 0; i < c->noptions; i++)
        if (c->options[i].flag && strcmp(c->options[i].flag, flag) == 0)
            return i;
    return -1;
}

/* The option of c whose flag is arg's first len characters, or -1. */
static int flag_index(const cli_command *c, const char *arg, size_t len)
{
    for (int i = 0; i < c->noptions; i++) {
        const char *flag = c->options[i].flag;
        if (flag && strlen(flag) == len && strncmp(flag, arg, len) == 0)
            return i;
    }
    return -1;
}

static int unknown(const cli_command *c, const char *arg)
{
    fprintf(stderr, "dptrain: error: unknown option '%s' for %s (see dptrain %s --help)\n", arg,
            c->name, c->name);
    return 2;
}

int cli_parse(const cli_command *c, int argc, char **argv, void *out, bool *given, bool *help,
              cli_positional_fn positional, void *ctx, int *rest)
{
    *help = false;
    if (rest)
        *rest = argc;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            *help = true;
            return 0;
        }
        if (positional && (arg[0] != '-' || strcmp(arg, "-") == 0)) {
            int rc = positional(ctx, arg);
            if (rc == CLI_REST) {
                *rest = i;
                return 0;
            }
            if (rc)
                return rc;
            continue;
        }
        /* GNU's long form, --name=value, as getopt_long reads it: the
         * value is all after the first '='. */
        const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
        int k = flag_index(c, arg, eq ? (size_t)(eq - arg) : strlen(arg));
        const dp_option *opt = k >= 0 ? &c->options[k] : NULL;
        /* A switch takes no value, in either form. */
        if (!opt || (eq && !opt->metavar))
            return unknown(c, arg);
        if (!opt->metavar) {
            dp_option_switch_on(opt, out);
        } else {
            const char *value = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            char why[256];
            if (!value) {
                fprintf(stderr, "dptrain: error: %s needs a value\n", opt->flag);
                return 2;
            }
            if (dp_option_parse(opt, out, value, why, sizeof why) < 0) {
                char with_flags[512];
                return cli_bad_value(opt->flag, value,
                                     cli_with_flags(c, why, with_flags, sizeof with_flags));
            }
        }
        if (given)
            given[k] = true;
    }
    return 0;
}
