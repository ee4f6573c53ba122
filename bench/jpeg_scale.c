/* What --jpeg-scale auto saves over off: each JPEG file given through
 * dp_transform_decode with both, one thread, for each transform list;
 * prints images/s (the median of 5 passes over the files, the files read
 * into memory first) and how far auto's floats are from off's (mean and
 * largest absolute difference over every pixel of every image, in 1/255).
 * bench/jpeg_scale.sh makes the files and runs it.
 * Usage: bench_jpeg_scale SPEC[;SPEC...] FILE... */
#include "dp/core.h"
#include "dp/data.h"
#include "dp/transform.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct file {
    uint8_t *buf;
    size_t len;
    const char *name;
} file;

static int read_all(const char *path, file *f)
{
    FILE *in = fopen(path, "rb");
    if (!in)
        return -1;
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    fseek(in, 0, SEEK_SET);
    f->buf = malloc(n > 0 ? (size_t)n : 1);
    f->len = f->buf ? fread(f->buf, 1, (size_t)n, in) : 0;
    f->name = path;
    fclose(in);
    return f->buf && f->len == (size_t)n ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One pass over the files with `scale`; out[i] gets file i's floats when
 * outs is not NULL. Returns images/s, or -1 on an error. */
static double pass(const dp_transform_list *l, dp_jpeg_scale scale, const file *files, int n,
                   float *buf, size_t cap, float **outs)
{
    double t0 = dp_time_seconds();
    for (int i = 0; i < n; i++) {
        int chw[3];
        if (dp_transform_decode(l, scale, files[i].buf, files[i].len, files[i].name, 3, 1, 0, i,
                                outs ? outs[i] : buf, cap, chw) < 0) {
            fprintf(stderr, "%s\n", dp_last_error());
            return -1;
        }
    }
    return n / (dp_time_seconds() - t0);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s SPEC[;SPEC...] FILE...\n", argv[0]);
        return 2;
    }
    int n = argc - 2;
    file *files = calloc((size_t)n, sizeof *files);
    for (int i = 0; i < n; i++)
        if (read_all(argv[2 + i], &files[i]) < 0) {
            fprintf(stderr, "%s: cannot read\n", argv[2 + i]);
            return 1;
        }
    char specs[4096];
    snprintf(specs, sizeof specs, "%s", argv[1]);
    for (char *save, *spec = strtok_r(specs, ";", &save); spec; spec = strtok_r(NULL, ";", &save)) {
        dp_transform_list l;
        int rows, cols;
        if (dp_transform_parse(spec, &l) < 0 || !dp_transform_fixed_size(&l, &rows, &cols)) {
            fprintf(stderr, "%s: not a list of one output size\n", spec);
            return 1;
        }
        size_t cap = (size_t)3 * rows * cols;
        float *buf = malloc(cap * sizeof *buf);
        float **off = malloc((size_t)n * sizeof *off), **autos = malloc((size_t)n * sizeof *autos);
        for (int i = 0; i < n; i++) {
            off[i] = malloc(cap * sizeof **off);
            autos[i] = malloc(cap * sizeof **autos);
        }
        double rate[2][5];
        for (int r = 0; r < 5; r++) { /* alternating, so both see the same machine */
            rate[0][r] = pass(&l, DP_JPEG_SCALE_OFF, files, n, buf, cap, r ? NULL : off);
            rate[1][r] = pass(&l, DP_JPEG_SCALE_AUTO, files, n, buf, cap, r ? NULL : autos);
            if (rate[0][r] < 0 || rate[1][r] < 0)
                return 1;
        }
        qsort(rate[0], 5, sizeof(double), cmp_double);
        qsort(rate[1], 5, sizeof(double), cmp_double);
        double sum = 0, worst = 0;
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < cap; k++) {
                double d = fabs((double)off[i][k] - (double)autos[i][k]);
                sum += d;
                worst = d > worst || isnan(d) ? d : worst;
            }
        printf("%-28s off %7.1f images/s  auto %7.1f images/s (%.2fx)  auto - off: mean %.3f/255, "
               "max %.3f/255 over %d images\n",
               spec, rate[0][2], rate[1][2], rate[1][2] / rate[0][2], sum / ((double)n * cap) * 255,
               worst * 255, n);
        for (int i = 0; i < n; i++) {
            free(off[i]);
            free(autos[i]);
        }
        free(off);
        free(autos);
        free(buf);
    }
    for (int i = 0; i < n; i++)
        free(files[i].buf);
    free(files);
    return 0;
}
