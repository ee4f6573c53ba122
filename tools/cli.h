/* Shared by the command-line tool's commands. Each command is one file:
 * train_cmd.c (with train_recipe.c, train_tensorboard.c and train_data.c), eval_cmd.c,
 * predict_cmd.c, model_cmd.c, export_cmd.c, demo_cmd.c, devices_cmd.c; dptrain.c dispatches;
 * cli.c parses values. */
#ifndef DP_TOOLS_CLI_H
#define DP_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Each prints "dptrain: error: FLAG VALUE: WANT" and returns 2 on failure. */
int cli_bad_value(const char *flag, const char *value, const char *want);
/* 0 if `value` of --model is an image model (lenet, resnet18) or an
 * existing file (a model in nn.Sequential's syntax), else cli_bad_value's 2. */
int cli_check_model(const char *flag, const char *value);
/* 0 when `value` names a plot PLplot can write (FILE.png or FILE.svg), else
 * cli_bad_value's 2. */
int cli_check_plot_path(const char *flag, const char *value);
int cli_parse_i64(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_float(const char *flag, const char *s, double lo, double hi, bool lo_open,
                    float *out);
struct dp_name_table;
/* A name of the table (dp/option.h) into *out, else "expected a, b or c". */
int cli_parse_name(const char *flag, const char *s, const struct dp_name_table *names, int *out);
/* --dataset's value: one of the library's dataset names. */
int cli_parse_dataset(const char *flag, const char *s, const char **out);
/* For option argv[*i] of `command`: checks that it is one of names[0..n)
 * and has a value, stores the value and steps *i past it. "--name=value"
 * (getopt_long's form) is taken too: argv[*i] is cut to "--name" in place
 * and the value is what followed the '='. Returns 0, or 2 after printing
 * "unknown option" or "needs a value". */
int cli_option_value(const char *command, const char *const *names, size_t n, int argc, char **argv,
                     int *i, const char **value);
/* Reports a failed library call (the detail was logged already); returns 1. */
int cli_fail(int status);
/* --verbose: library notes (DP_LOG_INFO) go to stderr too. */
extern bool cli_verbose;
/* The library names options by what they mean ("the device list", "sync
 * batch norm"), never by this tool's flags: a library message with each
 * such name replaced by its flag ("--devices", "--sync-bn"), into buf.
 * Returns buf, or msg itself when it names no option or does not fit. */
const char *cli_with_flags(const char *msg, char *buf, size_t size);

struct dp_train_options;
/* train_recipe.c: the recipe flags' help lines and names (NULL-ended);
 * cli_train_recipe_flag parses flag f's value v into *o: 0, 2 after the
 * one-line error, or -1 when f is not one of them; cli_train_recipe_check
 * checks them together once all are read (wd_given: --weight-decay was). */
extern const char cli_train_recipe_help[];
extern const char *const cli_train_recipe_flags[];
int cli_train_recipe_flag(const char *f, const char *v, struct dp_train_options *o);
int cli_train_recipe_check(struct dp_train_options *o, bool wd_given);
/* train_tensorboard.c: --tensorboard, the same way (no check together). */
extern const char cli_train_tensorboard_help[];
extern const char *const cli_train_tensorboard_flags[];
int cli_train_tensorboard_flag(const char *f, const char *v, struct dp_train_options *o);
/* train_data.c: --channels, the same way as the recipe's flags. */
extern const char cli_train_data_help[];
extern const char *const cli_train_data_flags[];
int cli_train_data_flag(const char *f, const char *v, struct dp_train_options *o);
/* train_augment.c: --augment and --normalize, the same way. */
extern const char cli_train_augment_help[];
extern const char *const cli_train_augment_flags[];
int cli_train_augment_flag(const char *f, const char *v, struct dp_train_options *o);
/* dptrain train's flags into *o (defaults first). Returns 0, with *help set
 * for -h/--help, or 2 after printing the one-line error. */
int cli_train_parse(int argc, char **argv, struct dp_train_options *o, bool *help);

struct dp_eval_options;
/* dptrain eval's flags into *o, the same way. */
int cli_eval_parse(int argc, char **argv, struct dp_eval_options *o, bool *help, bool *confusion);

/* dptrain demo NAME [options]: which demonstration, with what. */
struct cli_demo_options {
    const char *name;    /* dataparallel, allreduce, async or scratch */
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

int cmd_train(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_export(int argc, char **argv);

struct dp_predict_options;
/* dptrain predict's flags and images into *o, the same way; *topk gets
 * --topk (0: not given), *logits --logits (NULL: not given). */
int cli_predict_parse(int argc, char **argv, struct dp_predict_options *o, int *topk,
                      const char **logits, bool *help);

#endif
