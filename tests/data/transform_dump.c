/* tests/tools/test_transforms_torchvision.py's dptrain side: each image
 * file through dp_transform_decode, its floats written to OUT/N.npy
 * ([C, H, W] float32, dp_npy_write) and one JSON line a file on stdout
 * with the draws and the numbers they consumed, for the test to replay
 * through torchvision's RandomResizedCrop.get_params:
 *
 *   {"index": N, "file": F, "rows": R, "cols": C, "shape": [c, h, w],
 *    "boxes": [[top, left, h, w], ...], "flips": [0|1, ...],
 *    "draws": [[stage, bound, value], ...]}
 *
 * (bound 0: a uniform in [0, 1); above 0: randint(0, bound); -1 / -2: a
 * flip drawn / not). Usage: transform_dump SPEC auto|off SEED EPOCH OUT FILE...
 * The sample index of the k-th file is k. */
#include "data/transform_internal.h"

#include "dp/core.h"
#include "dp/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    *n = buf ? fread(buf, 1, (size_t)size, f) : 0;
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s SPEC auto|off SEED EPOCH OUT FILE...\n", argv[0]);
        return 2;
    }
    dp_transform_list l;
    if (dp_transform_parse(argv[1], &l) < 0) {
        fprintf(stderr, "%s\n", dp_last_error());
        return 1;
    }
    dp_jpeg_scale scale = strcmp(argv[2], "off") == 0 ? DP_JPEG_SCALE_OFF : DP_JPEG_SCALE_AUTO;
    uint64_t seed = strtoull(argv[3], NULL, 10);
    int64_t epoch = strtoll(argv[4], NULL, 10);
    for (int k = 6; k < argc; k++) {
        int64_t index = k - 6;
        size_t len;
        uint8_t *buf = read_all(argv[k], &len);
        dp_image img;
        if (!buf || dp_image_decode(buf, len, argv[k], 0, &img) < 0) {
            fprintf(stderr, "%s: %s\n", argv[k], dp_last_error());
            return 1;
        }
        dp_transform_draws d;
        static dp__transform_trace trace;
        dp__transform_draw_traced(&l, seed, epoch, index, img.rows, img.cols, &d, &trace);
        int chw[3];
        dp_transform_output_shape(&l, img.channels, img.rows, img.cols, chw);
        size_t n = (size_t)chw[0] * chw[1] * chw[2];
        float *out = malloc(n * sizeof *out);
        int got[3];
        if (!out ||
            dp_transform_decode(&l, scale, buf, len, argv[k], 0, seed, epoch, index, out, n, got) <
                0 ||
            memcmp(got, chw, sizeof chw) != 0) {
            fprintf(stderr, "%s: %s\n", argv[k], dp_last_error());
            return 1;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%lld.npy", argv[5], (long long)index);
        dp_npy a = {.dtype = DP_NPY_F32,
                    .ndim = 3,
                    .shape = {chw[0], chw[1], chw[2]},
                    .data = out,
                    .size = n * sizeof *out};
        if (dp_npy_write(path, &a) < 0) {
            fprintf(stderr, "%s\n", dp_last_error());
            return 1;
        }
        printf("{\"index\": %lld, \"file\": \"%s\", \"rows\": %d, \"cols\": %d, "
               "\"shape\": [%d, %d, %d], \"boxes\": [",
               (long long)index, argv[k], img.rows, img.cols, chw[0], chw[1], chw[2]);
        for (int i = 0; i < l.n; i++)
            printf("%s[%d, %d, %d, %d]", i ? ", " : "", d.box[i][0], d.box[i][1], d.box[i][2],
                   d.box[i][3]);
        printf("], \"flips\": [");
        for (int i = 0; i < l.n; i++)
            printf("%s%d", i ? ", " : "", d.flip[i]);
        printf("], \"draws\": [");
        for (int i = 0; i < trace.n && i < DP__TRANSFORM_TRACE_MAX; i++)
            printf("%s[%d, %lld, %.17g]", i ? ", " : "", trace.draw[i].stage,
                   (long long)trace.draw[i].bound, trace.draw[i].value);
        printf("]}\n");
        free(out);
        free(buf);
        dp_image_close(&img);
    }
    return 0;
}
