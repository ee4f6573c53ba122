/* The ONNX target's entry (fuzz_entry.h): the input is an ONNX file, loaded
 * as `dptrain model` loads it (dp_model_def_load_onnx) and, when it loads,
 * summarised on the meta device (dp_model_summary: every node run on
 * shapes, no memory for its values). A file either loads into a definition
 * whose parameters have names, shapes of 1 to 4 positive dimensions and a
 * count within DP_MAX_PARAMS' bound, or fails with one line that begins
 * with the file's name; a summary that fails logs its errors and returns,
 * never crashes. */
#include "fuzz_entry.h"

#include "dp/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int onnx_check_def(const dp_model_def *def, const char *path)
{
    if (def->nparams < 1 || !def->forward || strcmp(def->name, path) != 0)
        return fz_bad("onnx", "a loaded definition lacks parameters, a forward or its name");
    for (int i = 0; i < def->nparams; i++) {
        const dp_param_spec *s = &def->params[i];
        if (!s->name || s->ndim < 1 || s->ndim > DP_MAX_DIMS)
            return fz_bad("onnx", "parameter %d has no name or %d dimensions", i, s->ndim);
        for (int d = 0; d < s->ndim; d++)
            if (s->shape[d] < 0)
                return fz_bad("onnx", "parameter '%s' has a negative dimension", s->name);
    }
    return 0;
}

int fuzz_onnx_input(const uint8_t *data, size_t size)
{
    const char *path = fz_input_file("onnx", data, size);
    if (!path)
        return -1;
    fz_capture_begin();
    dp_model_def *def = NULL;
    int rc = dp_model_def_load_onnx(&def, path, NULL);
    fz_capture_end();
    if (rc < 0) {
        if (fz_errors != 1)
            return fz_bad("onnx", "a failed load logged %d errors (%s)", fz_errors, fz_last_error);
        return fz_check_failure("onnx", "dp_model_def_load_onnx", rc, path);
    }
    int result = onnx_check_def(def, path);
    if (result == 0) {
        dp_layer_summary *rows = NULL;
        int n = 0;
        fz_capture_begin();
        dp_model_summary(def, NULL, &rows, &n);
        fz_capture_end();
        free(rows);
    }
    dp_model_def_free(def);
    return result;
}
