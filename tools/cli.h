/* Shared by the command-line tool's commands. Each command is one file
 * (train_cmd.c, eval_cmd.c, predict_cmd.c, model_cmd.c, export_cmd.c,
 * devices_cmd.c, demo_cmd.c) that describes itself as a cli_command: its
 * flags are dp_option tables (dp/option.h) over an options struct of its
 * own, train's the library's option list. One parser (cli_parse.c) reads
 * every command's flags, and one printer (cli_help.c) writes each
 * command's --help, its part of docs/cli.md and its man page. dptrain.c
 * dispatches; help_cmd.c prints the reference; cli.c shows the library's
 * messages with the flags. */
#ifndef DP_TOOLS_CLI_H
#define DP_TOOLS_CLI_H

#include "dp/option.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* An argument that is not a flag (a model's name, a demo's), for help. */
typedef struct cli_arg {
    const char *name, *help;
} cli_arg;

typedef struct cli_command {
    const char *name;    /* "train" */
    const char *summary; /* dptrain --help's line: "train a model on ..." */
    const char *usage;   /* "dptrain train [options]" */
    /* What it does: lines of at most 79 characters as --help prints them;
     * an empty line between paragraphs. */
    const char *about;
    const cli_arg *args; /* nargs arguments besides the flags, or NULL */
    int nargs;
    /* The flags: options with a flag (the others are a program's own). */
    const dp_option *options;
    int noptions;
    const void *defaults; /* an options struct holding the defaults: the help's [brackets] */
    int (*run)(int argc, char **argv);
} cli_command;

/* Every command, in dptrain --help's order; NULL-terminated. */
const cli_command *const *cli_commands(void);
/* The commands themselves (each *_cmd.c). */
const cli_command *cli_train(void);
const cli_command *cli_eval(void);
const cli_command *cli_predict(void);
const cli_command *cli_model(void);
const cli_command *cli_export(void);
const cli_command *cli_devices(void);
const cli_command *cli_demo(void);
const cli_command *cli_data(void);
const cli_command *cli_shards(void);
/* help_cmd.c: `dptrain help`, the reference for the build (not listed). */
int cli_help_run(int argc, char **argv);

/* A flag of a command's own options struct `st`: its field, and the name
 * messages give it (the option list's, where the library names it). */
#define CLI_FIELD(st, field, name_)                                                                \
    .name = name_, .offset = offsetof(st, field), .size = sizeof(((st *)0)->field)

/* A flag of a command's own options struct `st` that is `dptrain train`'s
 * option `train_name` (its flag, metavar, type, range and check: the field
 * must be of the same type) at that field, with its own help (NULL: the
 * option list's). */
#define CLI_LIKE(st, field, train_name, help_)                                                     \
    cli_like(train_name, offsetof(st, field), sizeof(((st *)0)->field), help_)
dp_option cli_like(const char *train_name, size_t offset, size_t size, const char *help);

/* ---- cli_parse.c ----------------------------------------------------------- */

/* What an argument that is not a flag does: 0 taken, 2 refused (after
 * its one-line error), CLI_REST: it and every argument after it are the
 * caller's (cli_parse's *rest). */
enum { CLI_REST = 1 };
typedef int (*cli_positional_fn)(void *ctx, const char *arg);

/* Reads a command's flags from argv[0..argc) into *out (which holds the
 * defaults): "--flag VALUE" and GNU's "--flag=VALUE" (the value is all
 * after the first '='), a switch alone. given[i] is set for each option i
 * given (given may be NULL). Another argument goes to `positional` (NULL:
 * it is an unknown option); where that returns CLI_REST, *rest is its
 * index, else argc. Returns 0, with *help set for -h or --help (the rest
 * unread), or 2 after printing the one-line error: "unknown option",
 * "needs a value", or "FLAG VALUE: expected ..." */
int cli_parse(const cli_command *c, int argc, char **argv, void *out, bool *given, bool *help,
              cli_positional_fn positional, void *ctx, int *rest);
/* The option of c whose flag is `flag`, or -1. */
int cli_option_index(const cli_command *c, const char *flag);

/* ---- cli_help.c ------------------------------------------------------------ */

/* `dptrain COMMAND --help` (c NULL: dptrain --help). */
void cli_print_help(const cli_command *c, FILE *out);
/* The command line's reference as Markdown: every command (docs/cli.md). */
void cli_print_markdown(FILE *out);
/* The man page dptrain-COMMAND(1) (c NULL: dptrain(1)), in roff. */
void cli_print_man(const cli_command *c, FILE *out);
/* Option text (a help, a library message) with each `name` of an option
 * replaced by c's flag for it, else `dptrain train`'s; into buf. */
const char *cli_with_flags(const cli_command *c, const char *text, char *buf, size_t size);

/* ---- cli.c ----------------------------------------------------------------- */

/* Prints "dptrain: error: FLAG VALUE: WANT"; returns 2. */
int cli_bad_value(const char *flag, const char *value, const char *want);
/* Reports a failed library call (the detail was logged already); returns 1. */
int cli_fail(int status);
/* --verbose: library notes (DP_LOG_INFO) go to stderr too. */
extern bool cli_verbose;
/* The command running: its flags name the options in library messages. */
extern const cli_command *cli_running;

/* ---- the commands' parsers, which the fuzz targets call too ------------- */

struct dp_train_options;
/* dptrain train's flags into *o (defaults first), with the command line's
 * own defaults that depend on other flags, then dp_train_options_check.
 * Returns 0, with *help set for -h/--help, or 2 after the one-line error. */
int cli_train_parse(int argc, char **argv, struct dp_train_options *o, bool *help);

struct dp_eval_options;
/* dptrain eval's flags into *o, the same way. */
int cli_eval_parse(int argc, char **argv, struct dp_eval_options *o, bool *help, bool *confusion);

/* dptrain demo NAME [options]: which demonstration, with what. */
struct cli_demo_options {
    const char *name;    /* dataparallel, allreduce, async, scratch or pipeline */
    const char *devices; /* for dataparallel, allreduce and scratch */
    const char *algo;    /* ring or naive */
    int64_t ops;         /* small ops for async */
    int64_t steps;       /* training steps for scratch and pipeline */
    /* pipeline: the model, stages, micro-batches, dp_pipeline_schedule,
     * batch and the Gantt chart's file (NULL: none) */
    const char *model;
    int64_t pipeline, micro_batches;
    int schedule;
    int64_t batch;
    const char *plot;
    const char *checkpoint; /* scratch: device 0's weights to this file (NULL: none) */
};
/* dptrain demo's name and flags into *o, the same way; an unknown name is
 * an error here, so the command only dispatches. */
int cli_demo_parse(int argc, char **argv, struct cli_demo_options *o, bool *help);

struct dp_predict_options;
/* dptrain predict's flags and images into *o, the same way; *topk gets
 * --topk (0: not given), *logits --logits (NULL: not given). */
int cli_predict_parse(int argc, char **argv, struct dp_predict_options *o, int *topk,
                      const char **logits, bool *help);

#endif
