/* nn.Sequential models from text: each line's module checked against the
 * shape the layer before gives, its parameters named and drawn as PyTorch's
 * (sequential_modules.c), and the forward that runs the layers in order. */
#include "nn/sequential/sequential.h"

#include "core/internal.h"
#include "nn/sequential/sequential_modules.h"
#include "nn/sequential/sequential_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void free_seq(dp__seq *s)
{
    if (!s)
        return;
    dp__free(s->layers);
    dp__free(s->params);
    dp__free(s->buffers);
    dp__free(s->names);
    dp__free(s->bn_names);
    dp__free(s->name);
    dp__free(s);
}

/* The definition's release entry: the layers and the arrays it points
 * into, all in its dp__seq. */
static void release(dp_model_def *def)
{
    free_seq((dp__seq *)def->user);
}

/* Modules before the first one with parameters record no op in a training
 * forward (no input of theirs requires a gradient), and every later module
 * records exactly one, whatever it is (a Dropout too: with p = 0 or out of
 * training it records a copy). So rows of dp_model_summary are the modules
 * from that one on, and the leading modules run as part of row 0. */
static int leading_modules(const dp__seq *s)
{
    int lead = 0;
    while (lead < s->nlayers - 1 && s->layers[lead].weight < 0)
        lead++;
    return lead;
}

/* The context of a layer's errors in a forward: "<file>: line N", as the
 * parser's errors begin. */
typedef struct layer_where {
    const dp__seq *s;
    const dp__seq_layer *l;
} layer_where;

static void describe_layer(const void *arg, char *buf, size_t size)
{
    const layer_where *w = arg;
    snprintf(buf, size, "%s: line %d", w->s->name, w->l->line);
}

static int forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                          dp_tensor_t **y)
{
    const dp__seq *s = dp_model_user(m);
    int lead = leading_modules(s), n = s->nlayers - lead;
    if (first < 0 || first > last || last >= n) {
        DP_ERROR("%s: layers %d-%d: the model has layers 0-%d", s->name, first, last, n - 1);
        return DP_EINVAL;
    }
    dp_tensor_t *h = x;
    int rc = 0;
    for (int i = first == 0 ? 0 : lead + first; rc == 0 && i <= lead + last; i++) {
        layer_where w = {s, &s->layers[i]};
        dp__log_context was = dp__log_context_set((dp__log_context){describe_layer, &w});
        rc = dp__seq_layer_forward(&s->layers[i], m, h, train, &h);
        dp__log_context_set(was);
    }
    if (rc == 0)
        *y = h;
    return rc;
}

static int forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits)
{
    const dp__seq *s = dp_model_user(m);
    return forward_layers(m, x, 0, s->nlayers - leading_modules(s) - 1, train, logits);
}

/* Strips a `#` comment and surrounding blanks in place; returns the start. */
static char *strip(char *line)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t' || line[n - 1] == '\r' ||
                     line[n - 1] == '\n'))
        line[--n] = '\0';
    return line;
}

/* The lines that can hold a module: not blank, not only a comment. The
 * arrays are sized by them before parsing, so a file of blank lines costs
 * nothing (a megabyte of newlines took 645 MB, sized by its lines). */
static int count_module_lines(const char *text)
{
    int n = 0;
    for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        p += strspn(p, " \t\r");
        n += *p && *p != '\n' && *p != '#';
    }
    return n;
}

int dp_model_def_parse(dp_model_def **out, const char *text, const char *name,
                       const int64_t *in_chw)
{
    static const int64_t fashion_mnist[3] = {1, 28, 28};
    const int64_t *chw = in_chw ? in_chw : fashion_mnist;
    if (!text || !name) {
        DP_ERROR("model definition: needs a text and a name");
        return DP_EINVAL;
    }
    int cap = DP_MAX(count_module_lines(text), 1);
    dp__seq *s = dp__calloc(1, sizeof *s);
    char *copy = dp__malloc(strlen(text) + 1);
    if (s) {
        s->name = dp__malloc(strlen(name) + 1);
        s->layers = dp__calloc((size_t)cap, sizeof *s->layers);
        /* At most 2 parameters, 2 buffers and one batch norm name a layer. */
        s->params = dp__calloc((size_t)cap * 2, sizeof *s->params);
        s->buffers = dp__calloc((size_t)cap * 2, sizeof *s->buffers);
        s->names = dp__calloc((size_t)cap * 5, sizeof *s->names);
        s->bn_names = dp__calloc((size_t)cap, sizeof *s->bn_names);
    }
    if (!s || !copy || !s->name || !s->layers || !s->params || !s->buffers || !s->names ||
        !s->bn_names) {
        free_seq(s);
        dp__free(copy);
        return DP_ENOMEM;
    }
    strcpy(s->name, name);
    strcpy(copy, text);
    dp__seq_shape shape = {.rank = 3, .c = chw[0], .h = chw[1], .w = chw[2]};
    int rc = 0, lineno = 0, last_line = 0;
    for (char *line = copy, *next; rc == 0 && line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        lineno++;
        char *body = strip(line);
        if (!*body)
            continue;
        dp__seq_call call;
        const char *why;
        if (dp__seq_parse_line(body, &call, &why) != 0) {
            DP_ERROR("%s: line %d: %s: %s", name, lineno, why, body);
            rc = DP_EFORMAT;
            break;
        }
        call.line = lineno;
        snprintf(call.source, sizeof call.source, "%s", body);
        rc = dp__seq_add_layer(s, &call, &shape);
        last_line = lineno;
    }
    dp__free(copy);
    if (rc == 0 && s->nlayers == 0) {
        DP_ERROR("%s: no modules (one a line, e.g. Linear(784, 10))", name);
        rc = DP_EFORMAT;
    }
    if (rc == 0 && s->nparams == 0) {
        DP_ERROR("%s: no module with parameters (Conv2d, Linear, BatchNorm2d, BatchNorm1d)", name);
        rc = DP_EFORMAT;
    }
    if (rc == 0 && shape.rank != 1) {
        DP_ERROR("%s: line %d: the last module gives (%lld, %lld, %lld) per sample; a "
                 "classifier ends in (classes): add Flatten() and a Linear",
                 name, last_line, (long long)shape.c, (long long)shape.h, (long long)shape.w);
        rc = DP_EFORMAT;
    }
    if (rc < 0) {
        free_seq(s);
        return rc;
    }
    s->def = (dp_model_def){.name = s->name,
                            .params = s->params,
                            .nparams = s->nparams,
                            .buffers = s->nbuffers ? s->buffers : NULL,
                            .nbuffers = s->nbuffers,
                            .bn_names = s->nbn ? s->bn_names : NULL,
                            .nbn = s->nbn,
                            .forward = forward,
                            .forward_layers = forward_layers,
                            .user = s,
                            .release = release};
    *out = &s->def;
    return 0;
}

/* Model files are small: more than this is not one. */
#define MAX_FILE_BYTES (1 << 20)

int dp_sequential_load(dp_model_def **out, const char *path, const int64_t *in_chw)
{
    int fd = dp__open_regular(path, NULL);
    if (fd < 0)
        return fd;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        DP_ERROR("%s: cannot open the model file", path);
        return DP_ENOMEM;
    }
    char *text = dp__malloc(MAX_FILE_BYTES + 1);
    size_t n = text ? fread(text, 1, MAX_FILE_BYTES + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (!text)
        return DP_ENOMEM;
    int rc = 0;
    if (bad) {
        DP_ERROR("%s: cannot read the model file", path);
        rc = DP_EIO;
    } else if (n > MAX_FILE_BYTES) {
        DP_ERROR("%s: over %d bytes, not a model file", path, MAX_FILE_BYTES);
        rc = DP_EFORMAT;
    } else if (memchr(text, '\0', n)) {
        DP_ERROR("%s: holds a NUL byte, not a model file", path);
        rc = DP_EFORMAT;
    } else {
        text[n] = '\0';
        rc = dp_model_def_parse(out, text, path, in_chw);
    }
    dp__free(text);
    return rc;
}
