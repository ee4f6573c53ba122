/* The option list (dp/train_option_list.h) made into data: a dp_option
 * per entry, the defaults, and dp_train's checks of the options before a
 * run: each value in its range, then the options that depend on each
 * other. */
#include "train/option_values.h"

#include "core/internal.h"

#include <string.h>

/* ---- each entry's dp_option ----------------------------------------------
 * The check column says what kind of value an entry holds: a number or a
 * bool (its type from the field's own: a field of another type does not
 * compile), an enum (named by a table) or a value with parse and format of
 * its own; and its limits. */
#define DP__FIELD(g, n) (((dp_train_options *)0)->g.n)

#define DP__KIND_RANGE(lo, hi) SCALAR
#define DP__KIND_FROM(lo, hi) SCALAR
#define DP__KIND_ABOVE(lo, hi) SCALAR
#define DP__KIND_BETWEEN(lo, hi) SCALAR
#define DP__KIND_SWITCH(on) SCALAR
#define DP__KIND_ANY SCALAR
#define DP__KIND_TEXT(kind) SCALAR
#define DP__KIND_NAMES(table) ENUM
#define DP__KIND_SWITCH_TO(on, table) ENUM
#define DP__KIND_VALUE(kind) VALUE

#define DP__TYPE_SCALAR(f)                                                                         \
    _Generic((f),                                                                                  \
        bool: DP_OPTION_BOOL,                                                                      \
        int: DP_OPTION_INT,                                                                        \
        int64_t: DP_OPTION_I64,                                                                    \
        uint64_t: DP_OPTION_U64,                                                                   \
        float: DP_OPTION_FLOAT,                                                                    \
        double: DP_OPTION_DOUBLE,                                                                  \
        const char *: DP_OPTION_TEXT)
#define DP__TYPE_ENUM(f) DP_OPTION_ENUM
#define DP__TYPE_VALUE(f) DP_OPTION_VALUE
/* Two steps, so that the kind is expanded before it is pasted. */
#define DP__TYPE_OF_(kind, f) DP__TYPE_##kind(f)
#define DP__TYPE_OF(kind, f) DP__TYPE_OF_(kind, f)

#define DP__LIMITS_RANGE(lo_, hi_) .imin = (lo_), .imax = (hi_), .lo = (lo_), .hi = (hi_)
#define DP__LIMITS_FROM(lo_, hi_) .lo = (lo_), .hi = (hi_)
#define DP__LIMITS_ABOVE(lo_, hi_) .lo = (lo_), .hi = (hi_), .lo_open = true
#define DP__LIMITS_BETWEEN(lo_, hi_) .lo = (lo_), .hi = (hi_), .lo_open = true, .hi_open = true
#define DP__LIMITS_SWITCH(on_) .on = (on_)
#define DP__LIMITS_ANY .parse = NULL
#define DP__LIMITS_TEXT(kind) .parse = dp__option_parse_##kind
#define DP__LIMITS_NAMES(table) .names = &(table)
#define DP__LIMITS_SWITCH_TO(on_, table) .on = (on_), .names = &(table)
#define DP__LIMITS_VALUE(kind) .parse = dp__option_parse_##kind, .format = dp__option_format_##kind

#define DP__GROUP_TITLE(g, title) static const char group_title_##g[] = title;
DP_TRAIN_OPTION_GROUPS(DP__GROUP_TITLE)

#define DP__OPTION_INFO(g, n, ctype, def, flag_, metavar_, check, traits_, help_)                  \
    {.name = #n,                                                                                   \
     .group = #g,                                                                                  \
     .group_title = group_title_##g,                                                               \
     .flag = flag_,                                                                                \
     .metavar = metavar_,                                                                          \
     .help = help_,                                                                                \
     .type = DP__TYPE_OF(DP__KIND_##check, DP__FIELD(g, n)),                                       \
     .offset = offsetof(dp_train_options, g.n),                                                    \
     .size = sizeof(ctype),                                                                        \
     .traits = traits_,                                                                            \
     DP__LIMITS_##check},
#define DP__GROUP_INFO(g, title) DP_TRAIN_OPTIONS_##g(DP__OPTION_INFO)

static const dp_option options[] = {DP_TRAIN_OPTION_GROUPS(DP__GROUP_INFO)};
_Static_assert(sizeof options / sizeof *options == DP_TRAIN_OPTION_COUNT, "one entry per option");
_Static_assert(DP_MAX_EPOCHS == 1000, "the list's help says epochs are 1 to 1000");

/* An enum is read and written as an int. */
#define DP__ENUM_SIZE(g, n, ctype, def, flag_, metavar_, check, traits_, help_)                    \
    _Static_assert(DP__TYPE_OF(DP__KIND_##check, DP__FIELD(g, n)) != DP_OPTION_ENUM ||             \
                       sizeof(ctype) == sizeof(int),                                               \
                   #n ": an enum of int's size");
#define DP__GROUP_ENUM_SIZES(g, title) DP_TRAIN_OPTIONS_##g(DP__ENUM_SIZE)
DP_TRAIN_OPTION_GROUPS(DP__GROUP_ENUM_SIZES)

const dp_option *dp_train_option_list(int *count)
{
    *count = (int)DP_COUNTOF(options);
    return options;
}

const dp_option *dp_train_option_find(const char *name)
{
    for (size_t i = 0; name && i < DP_COUNTOF(options); i++)
        if (strcmp(options[i].name, name) == 0)
            return &options[i];
    return NULL;
}

int dp_train_option_set(dp_train_options *o, const char *name, const char *text)
{
    const dp_option *opt = dp_train_option_find(name);
    if (!opt) {
        DP_ERROR("no option `%s` (dp/train_option_list.h lists them)", name ? name : "");
        return DP_EINVAL;
    }
    return dp_option_set(opt, o, text);
}

void dp_train_options_default(dp_train_options *o)
{
    memset(o, 0, sizeof *o);
#define DP__OPTION_DEFAULT(g, n, ctype, def, ...) o->g.n = def;
#define DP__GROUP_DEFAULTS(g, title) DP_TRAIN_OPTIONS_##g(DP__OPTION_DEFAULT)
    DP_TRAIN_OPTION_GROUPS(DP__GROUP_DEFAULTS)
}

/* ---- the options before a run --------------------------------------------- */

/* What only the options together can tell, one line each naming them. */
static int check_together(const dp_train_options *o)
{
    const char *bad = NULL;
    const dp_train_schedule_options *s = &o->schedule;
    if (o->optim.nesterov && (o->optim.optimizer != DP_OPTIMIZER_SGD || !(o->optim.momentum > 0)))
        bad = "`nesterov` needs `optimizer` sgd and `momentum` above 0 (as torch.optim.SGD)";
    else if (s->warmup_epochs > 0 && s->warmup_steps > 0)
        bad = "`warmup_steps` and `warmup_epochs` exclude each other";
    else if (s->lr_schedule == DP_LR_ONECYCLE && (s->warmup_epochs > 0 || s->warmup_steps > 0))
        bad = "`lr_schedule` onecycle warms up by itself (`pct_start`); give no `warmup_steps` "
              "or `warmup_epochs`";
    else if (s->lr_schedule == DP_LR_MULTISTEP && s->lr_milestones.n == 0)
        bad = "`lr_schedule` multistep needs `lr_milestones`";
    else if (o->checkpoint.resume_path && o->net.init_path)
        bad = "`resume_path` and `init_path` exclude each other";
    else if (!o->parallel.pipeline && (o->parallel.stages || o->parallel.micro_batches ||
                                       o->parallel.pipeline_schedule != DP_PIPELINE_1F1B))
        bad = "`stages`, `micro_batches` and `pipeline_schedule` need `pipeline` K";
    else if (o->output.log_steps && !o->output.metrics_path)
        bad = "`log_steps` needs `metrics_path` FILE";
    else if (o->data.augment.norm_channels > 0 || o->data.normalize.crop_pad ||
             o->data.normalize.flip)
        bad = "`augment` holds the crop and the flip, `normalize` the normalisation: each "
              "its own part (dp_augment_parse, dp_normalize_parse)";
    if (bad) {
        DP_ERROR("%s", bad);
        return DP_EINVAL;
    }
    return 0;
}

int dp_train_options_check(const dp_train_options *o)
{
    dp_train_options defaults;
    dp_train_options_default(&defaults);
    for (size_t i = 0; i < DP_COUNTOF(options); i++) {
        const dp_option *opt = &options[i];
        char why[256], value[256];
        /* A default is taken: 0 is "off" for many a range from 1. */
        if (dp_option_equal(opt, o, &defaults) || dp_option_check(opt, o, why, sizeof why) == 0)
            continue;
        DP_ERROR("`%s` %s: %s", opt->name, dp_option_format(opt, o, value, sizeof value), why);
        return DP_EINVAL;
    }
    return check_together(o);
}
