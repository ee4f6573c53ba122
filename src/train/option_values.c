/* The option list's own kinds of value (dp/train_option_list.h's TEXT
 * and VALUE checks): how each is read from text and written back, and the
 * names of the run's enums. Each parse says what it expected in `why` and
 * leaves the field as it was on failure; nothing is logged here. */
#include "train/option_values.h"

#include "core/internal.h"
#include "dp/transform.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const dp_named_value on_error_names[] = {{"stop", DP_ON_ERROR_STOP},
                                                {"continue", DP_ON_ERROR_CONTINUE}};
const dp_name_table dp_on_error_names = DP_NAME_TABLE(on_error_names);

static const dp_named_value progress_names[] = {
    {"auto", DP_PROGRESS_AUTO}, {"always", DP_PROGRESS_ALWAYS}, {"never", DP_PROGRESS_NEVER}};
const dp_name_table dp_progress_mode_names = DP_NAME_TABLE(progress_names);

static const dp_named_value weight_init_names[] = {{"as-defined", DP_WEIGHTS_AS_DEFINED},
                                                   {"normal", DP_WEIGHTS_NORMAL},
                                                   {"xavier", DP_WEIGHTS_XAVIER}};
const dp_name_table dp__weight_init_names = DP_NAME_TABLE(weight_init_names);

static const dp_named_value jpeg_scale_names[] = {{"auto", DP_JPEG_SCALE_AUTO},
                                                  {"off", DP_JPEG_SCALE_OFF}};
const dp_name_table dp__jpeg_scale_names = DP_NAME_TABLE(jpeg_scale_names);

static const dp_named_value transform_recipe_names[] = {{"none", DP__TRANSFORM_NONE},
                                                        {"imagenet", DP__TRANSFORM_IMAGENET}};
const dp_name_table dp__transform_recipe_names = DP_NAME_TABLE(transform_recipe_names);

static const dp_named_value bad_images_names[] = {{"stop", DP_BAD_IMAGES_STOP},
                                                  {"skip", DP_BAD_IMAGES_SKIP}};
const dp_name_table dp__bad_images_names = DP_NAME_TABLE(bad_images_names);

static int expected(char *why, size_t size, const char *what)
{
    snprintf(why, size, "%s", what);
    return DP_EINVAL;
}

/* ---- strings checked before they are taken ------------------------------- */

/* A built-in model, or a model file that can be read. */
int dp__option_parse_model(const char *text, void *field, char *why, size_t size)
{
    (void)field;
    if (strcmp(text, "lenet") == 0 || strcmp(text, "resnet18") == 0 || access(text, R_OK) == 0)
        return 0;
    /* A path (a slash or an extension) that cannot be read says why, which
     * "unknown model" would hide: a typo in a directory, a file not readable. */
    if (strchr(text, '/') || strchr(text, '.')) {
        snprintf(why, size, "cannot read the model file: %s", strerror(errno));
        return DP_EINVAL;
    }
    return expected(why, size,
                    "unknown model (known: lenet, resnet18, or a readable file of nn.Sequential "
                    "modules or an ONNX model)");
}

/* A transform list (dp_transform_parse's syntax, docs/transforms.md). */
int dp__option_parse_transform(const char *text, void *field, char *why, size_t size)
{
    dp_transform_list l;
    /* Its line names the stage that is wrong: it becomes why, not a
     * second line. */
    dp__log_hold(true);
    int rc = dp_transform_parse(text, &l);
    dp__log_hold(false);
    if (rc < 0)
        return expected(why, size, dp_last_error());
    memcpy(field, &l, sizeof l);
    return 0;
}

const char *dp__option_format_transform(const void *field, char *buf, size_t size)
{
    return dp_transform_str(field, buf, size);
}

int dp__option_parse_dataset(const char *text, void *field, char *why, size_t size)
{
    (void)field;
    for (const char *const *n = dp_dataset_names(); *n; n++)
        if (strcmp(text, *n) == 0)
            return 0;
    return expected(why, size,
                    "unknown dataset (known: fashion-mnist, mnist, cifar10, folder, npy, tar)");
}

/* A file PLplot can write: FILE.png or FILE.svg. */
int dp__option_parse_plot(const char *text, void *field, char *why, size_t size)
{
    (void)field;
    size_t len = strlen(text);
    if (len < 5 || (strcmp(text + len - 4, ".png") != 0 && strcmp(text + len - 4, ".svg") != 0))
        return expected(why, size, "the file name must end in .png or .svg");
    return 0;
}

int dp__option_parse_directory(const char *text, void *field, char *why, size_t size)
{
    (void)field;
    return text[0] ? 0 : expected(why, size, "expected a directory");
}

/* ---- values of their own ------------------------------------------------- */

int dp__option_parse_channels(const char *text, void *field, char *why, size_t size)
{
    if (strcmp(text, "1") != 0 && strcmp(text, "3") != 0)
        return expected(why, size, "expected 1 (grayscale) or 3 (RGB)");
    *(int *)field = text[0] - '0';
    return 0;
}

const char *dp__option_format_channels(const void *field, char *buf, size_t size)
{
    snprintf(buf, size, "%d", *(const int *)field);
    return buf;
}

/* "B1,B2", each in [0, 1). */
int dp__option_parse_betas(const char *text, void *field, char *why, size_t size)
{
    char *end;
    double b1 = strtod(text, &end), b2 = *end == ',' ? strtod(end + 1, &end) : NAN;
    if (*end != '\0' || !(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1))
        return expected(why, size, "expected B1,B2 each in [0, 1), e.g. 0.9,0.999");
    *(dp_adam_betas *)field = (dp_adam_betas){(float)b1, (float)b2};
    return 0;
}

const char *dp__option_format_betas(const void *field, char *buf, size_t size)
{
    const dp_adam_betas *b = field;
    char b1[32], b2[32];
    dp__format_real(b->beta1, true, b1, sizeof b1);
    dp__format_real(b->beta2, true, b2, sizeof b2);
    snprintf(buf, size, "%s,%s", b1, b2);
    return buf;
}

/* "E1,E2,...": up to DP_LR_MAX_MILESTONES increasing epochs from 1; "none". */
int dp__option_parse_milestones(const char *text, void *field, char *why, size_t size)
{
    dp_lr_milestones m = {0};
    const char *p = strcmp(text, "none") == 0 ? "" : text;
    while (*p) {
        char *end;
        long long e = strtoll(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0') || e < 1 || e > DP_MAX_EPOCHS ||
            m.n == DP_LR_MAX_MILESTONES || (m.n > 0 && e <= m.epochs[m.n - 1]))
            return expected(why, size, "expected up to 32 increasing epochs, e.g. 30,60");
        m.epochs[m.n++] = e;
        p = *end == ',' ? end + 1 : end;
    }
    if (m.n == 0 && p == text)
        return expected(why, size, "expected at least one epoch");
    *(dp_lr_milestones *)field = m;
    return 0;
}

const char *dp__option_format_milestones(const void *field, char *buf, size_t size)
{
    const dp_lr_milestones *m = field;
    size_t used = 0;
    snprintf(buf, size, "none");
    for (int i = 0; i < m->n && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? "," : "",
                                 (long long)m->epochs[i]);
    return buf;
}

/* --augment's and --normalize's syntax (dp/data.h); each option holds its
 * own part of a dp_augment_options, which the loaders put together. */
int dp__option_parse_augment(const char *text, void *field, char *why, size_t size)
{
    if (dp_augment_parse(text, field) < 0)
        return expected(why, size,
                        "expected crop:PAD (1 to 1024) and/or flip, comma-separated, e.g. "
                        "crop:4,flip; or none");
    return 0;
}

const char *dp__option_format_augment(const void *field, char *buf, size_t size)
{
    return dp_augment_str(field, buf, size);
}

int dp__option_parse_normalize(const char *text, void *field, char *why, size_t size)
{
    if (dp_normalize_parse(text, field) < 0)
        return expected(why, size,
                        "expected one mean per channel, then one std (> 0) per channel, e.g. "
                        "0.2860,0.3530 or 0.4914,0.4822,0.4465,0.2470,0.2435,0.2616");
    return 0;
}

const char *dp__option_format_normalize(const void *field, char *buf, size_t size)
{
    return dp_normalize_str(field, buf, size);
}

/* ---- sizes in bytes --------------------------------------------------------- */

/* "8G", "512M", "1.5T", "1000000": bytes, the suffixes powers of 1024. */
int dp__option_parse_memory_size(const char *text, void *field, char *why, size_t size)
{
    static const char suffixes[] = "KMGT";
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    const char *s = *end ? strchr(suffixes, *end) : NULL;
    if (s && *s)
        v *= pow(1024.0, (double)(s - suffixes + 1)), end++;
    if (end == text || *end || errno == ERANGE || !(v >= 0) || v > 9.2e18)
        return expected(why, size,
                        "expected a size in bytes, with K, M, G or T (powers of 1024), "
                        "e.g. 8G; 0 = what this machine has available");
    *(int64_t *)field = (int64_t)v;
    return 0;
}

const char *dp__option_format_memory_size(const void *field, char *buf, size_t size)
{
    int64_t v = *(const int64_t *)field;
    /* suffix[u]: the unit of 1024^u bytes ("" for bytes). A plain string
     * argument: GCC 12's printf checks crash on "%.*s" of a conditional
     * pointer under -fsanitize=address. */
    static const char *const suffix[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (u < 4 && v != 0 && v % 1024 == 0)
        v /= 1024, u++;
    snprintf(buf, size, "%lld%s", (long long)v, suffix[u]);
    return buf;
}
