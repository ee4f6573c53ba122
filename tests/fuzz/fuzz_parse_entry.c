/* The parsers of what users type and the model building behind `dptrain
 * model` (fuzz_entry.h says what an input means): the model command's
 * options, device lists, stage lists, and model files built on the meta
 * device. */
#include "fuzz_entry.h"

#include "../../tools/cli.h"
#include "device/device.h"
#include "dp/dp.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The input as a NUL-terminated string (malloc'd), NULL if it holds a NUL. */
static char *fz_text(const uint8_t *data, size_t size)
{
    if (memchr(data, '\0', size))
        return NULL;
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

/* A failure that logged anything but exactly one one-line error. */
static int fz_one_error(const char *target, int rc)
{
    if (fz_errors != 1 || strchr(fz_last_error, '\n'))
        return fz_bad(target, "returned %d and logged %d errors, the last: %s", rc, fz_errors,
                      fz_last_error);
    return 0;
}

/* ---- model_cli -------------------------------------------------------------- */

enum { FZ_MAX_MODEL_ARGS = 32 };

int fuzz_model_cli_input(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *buf = fz_text(data + 1, size - 1);
    if (!buf)
        return 0;
    static char lenet[] = "lenet", resnet18[] = "resnet18";
    char *argv[FZ_MAX_MODEL_ARGS + 2];
    int argc = 0;
    argv[argc++] = data[0] % 2 ? resnet18 : lenet;
    for (char *p = buf; *p && argc < FZ_MAX_MODEL_ARGS;) {
        argv[argc++] = p;
        char *nl = strchr(p, '\n');
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    argv[argc] = NULL;
    /* The command prints its table and its errors itself: to /dev/null. */
    fflush(stdout);
    fflush(stderr);
    int out = dup(1), err = dup(2), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (out < 0 || err < 0 || null < 0)
        return fz_bad("model_cli", "cannot redirect the output");
    dup2(null, 1);
    dup2(null, 2);
    int rc = cli_model()->run(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(out, 1);
    dup2(err, 2);
    close(out);
    close(err);
    close(null);
    free(buf);
    if (rc != 0 && rc != 1 && rc != 2)
        return fz_bad("model_cli", "dptrain model returned %d", rc);
    return 0;
}

/* ---- devices ---------------------------------------------------------------- */

int fuzz_devices_input(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *spec = fz_text(data + 1, size - 1);
    if (!spec)
        return 0;
    dp_device_t *devs[DP_MAX_DEVICES + 1] = {NULL};
    int n = -1;
    dp__devices_see_cpus(data[0]);
    fz_capture_begin();
    int rc = dp_devices_open(devs, &n, spec, 1);
    fz_capture_end();
    dp__devices_see_cpus(0);
    int result = 0;
    if (rc < 0) {
        result = fz_one_error("devices", rc);
    } else if (n < 1 || n > DP_MAX_DEVICES || devs[DP_MAX_DEVICES]) {
        result = fz_bad("devices", "'%s' opened %d devices", spec, n);
    } else {
        for (int i = 0; result == 0 && i < n; i++)
            for (int j = 0; result == 0 && j < i; j++)
                if (strcmp(dp_device_name(devs[i]), dp_device_name(devs[j])) == 0)
                    result =
                        fz_bad("devices", "'%s' opened %s twice", spec, dp_device_name(devs[i]));
        dp_devices_close(devs, n);
    }
    free(spec);
    return result;
}

/* ---- stages ----------------------------------------------------------------- */

int fuzz_stages_input(const uint8_t *data, size_t size)
{
    if (size < 1 || data[0] == 0)
        return 0;
    int nlayers = data[0];
    size_t bitmap = (size_t)(nlayers + 7) / 8;
    if (size < 1 + bitmap)
        return 0;
    bool can_start[255];
    for (int i = 0; i < nlayers; i++)
        can_start[i] = data[1 + i / 8] >> (i % 8) & 1;
    char *list = fz_text(data + 1 + bitmap, size - 1 - bitmap);
    if (!list)
        return 0;
    int first[DP_PIPELINE_MAX_STAGES + 2], stages = -1;
    first[DP_PIPELINE_MAX_STAGES + 1] = -7; /* a write past the room the header gives */
    fz_capture_begin();
    int rc = dp_pipeline_parse_stages(list, can_start, nlayers, first, &stages);
    fz_capture_end();
    int result = 0;
    if (rc < 0) {
        result = fz_one_error("stages", rc);
    } else if (stages < 1 || stages > DP_PIPELINE_MAX_STAGES || first[0] != 0 ||
               first[stages] != nlayers || first[DP_PIPELINE_MAX_STAGES + 1] != -7) {
        result = fz_bad("stages", "'%s' over %d layers gave %d stages", list, nlayers, stages);
    } else {
        for (int k = 0; result == 0 && k < stages; k++)
            if (first[k] >= first[k + 1] || (k > 0 && !can_start[first[k]]))
                result = fz_bad("stages", "'%s': stage %d starts at %d, where it may not", list, k,
                                first[k]);
    }
    free(list);
    return result;
}

/* ---- model_build ------------------------------------------------------------ */

int fuzz_model_build_input(const uint8_t *data, size_t size)
{
    char *text = fz_text(data, size);
    if (!text)
        return 0;
    dp_model_def *def = NULL;
    dp_layer_summary *rows = NULL;
    int n = 0;
    fz_capture_begin();
    int rc = dp_model_def_parse(&def, text, "model.txt", NULL);
    if (rc == 0)
        rc = dp_model_summary(def, NULL, &rows, &n);
    fz_capture_end();
    free(text);
    int result = 0;
    if (rc < 0) {
        /* The parser's errors and the parameter bound both name the file:
         * a definition that parses and then fails to build is a bug. */
        result = fz_one_error("model_build", rc);
        if (result == 0 && strncmp(fz_last_error, "model.txt: ", 11) != 0)
            result = fz_bad("model_build", "the error does not name the file: %s", fz_last_error);
    } else {
        double params = 0, counted = 0;
        for (int i = 0; i < def->nparams; i++) {
            double numel = 1;
            for (int d = 0; d < def->params[i].ndim; d++)
                numel *= (double)def->params[i].shape[d];
            params += numel;
        }
        for (int i = 0; result == 0 && i < n; i++) {
            counted += (double)rows[i].params;
            if (rows[i].ndim < 1 || rows[i].ndim > DP_MAX_DIMS || rows[i].shape[0] != 1 ||
                rows[i].flops < 0)
                result =
                    fz_bad("model_build", "row %d (%s) has a bad shape or FLOPs", i, rows[i].op);
        }
        if (result == 0 && (n < 1 || counted != params || params > (double)DP_MAX_PARAMS))
            result =
                fz_bad("model_build", "%d rows count %.0f parameters of %.0f", n, counted, params);
    }
    free(rows);
    dp_model_def_free(def);
    return result;
}
