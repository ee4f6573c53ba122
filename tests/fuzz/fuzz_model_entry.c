/* The model-file target's entry (fuzz_entry.h): the input is the text of a
 * model file in nn.Sequential's syntax, parsed for 1x28x28 inputs. A file
 * either parses into a definition whose every parameter has a name of the
 * form "<layer>.<what>" and a positive shape, or fails with a one-line
 * error that begins with the file's name and its line number. Parsing only:
 * nothing is allocated for the weights, which a file may make huge. */
#include "fuzz_entry.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char last_error[512];
static int errors;

static void capture(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_ERROR) {
        errors++;
        snprintf(last_error, sizeof last_error, "%s", msg);
    }
}

static int bad(const char *fmt, const char *detail)
{
    fprintf(stderr, "fuzz model: ");
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
    return -1;
}

static int check_def(const dp_model_def *def)
{
    if (def->nparams < 1 || !def->forward || strcmp(def->name, "model.txt") != 0)
        return bad("a parsed definition lacks parameters, a forward or its name (%s)", def->name);
    for (int i = 0; i < def->nparams; i++) {
        const dp_param_spec *s = &def->params[i];
        const char *dot = strchr(s->name, '.');
        if (!dot || dot == s->name || s->ndim < 1 || s->ndim > DP_MAX_DIMS)
            return bad("parameter '%s' is not <layer>.<what> of 1 to 4 dimensions", s->name);
        for (int d = 0; d < s->ndim; d++)
            if (s->shape[d] < 1)
                return bad("parameter '%s' has a dimension below 1", s->name);
        for (int j = 0; j < i; j++)
            if (strcmp(def->params[j].name, s->name) == 0)
                return bad("parameter '%s' named twice", s->name);
    }
    return 0;
}

int fuzz_model_input(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return bad("out of memory for %s", "the text");
    memcpy(text, data, size);
    text[size] = '\0';
    errors = 0;
    dp_log_set(capture, NULL);
    dp_model_def *def = NULL;
    int rc = dp_model_def_parse(&def, text, "model.txt", NULL);
    dp_log_set(NULL, NULL);
    free(text);
    if (rc == 0) {
        int result = check_def(def);
        dp_model_def_free(def);
        return result;
    }
    if (errors != 1)
        return bad("a failed parse logged no error or several (%s)", last_error);
    if (strncmp(last_error, "model.txt: ", 11) != 0 || strchr(last_error, '\n'))
        return bad("the error is not one line starting with the file's name: %s", last_error);
    return 0;
}
