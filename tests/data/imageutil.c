/* The writers of imageutil.h. */
#include "imageutil.h"

#include "testutil.h"

#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <stdlib.h>

#include <jpeglib.h>
#include <png.h>
#include <string.h>
#include <sys/stat.h>

void iu_write_png(const char *path, int channels, int cols, int rows, const uint8_t *hwc)
{
    static const png_uint_32 formats[] = {PNG_FORMAT_GRAY, PNG_FORMAT_GA, PNG_FORMAT_RGB,
                                          PNG_FORMAT_RGBA};
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)cols;
    img.height = (png_uint_32)rows;
    img.format = formats[channels - 1];
    if (!png_image_write_to_file(&img, path, 0, hwc, 0, NULL))
        fail_msg("cannot write %s: %s", path, img.message);
}

void iu_write_jpeg(const char *path, int channels, int cols, int rows, const uint8_t *hwc,
                   int quality)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)cols;
    c.image_height = (JDIMENSION)rows;
    c.input_components = channels;
    c.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(hwc + (size_t)c.next_scanline * (size_t)cols * (size_t)channels);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    assert_int_equal(fclose(f), 0);
}

uint8_t *iu_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

void iu_write_npy_raw(const char *path, const char *dict, const void *data, size_t bytes)
{
    /* magic, version 1.0, u16 length, the dict padded with spaces and a
     * newline to a multiple of 64 bytes, as numpy does */
    size_t dl = strlen(dict), hl = 10 + dl + 1;
    size_t pad = (64 - hl % 64) % 64;
    size_t hlen = dl + pad + 1;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    uint8_t len[2] = {(uint8_t)(hlen & 0xff), (uint8_t)(hlen >> 8)};
    fwrite(len, 1, 2, f);
    fwrite(dict, 1, dl, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    if (bytes)
        fwrite(data, 1, bytes, f);
    assert_int_equal(fclose(f), 0);
}

void iu_write_npy(const char *path, const char *descr, int ndim, const int64_t *shape,
                  const void *data, size_t bytes)
{
    char dict[512], dims[256] = "";
    size_t at = 0;
    for (int d = 0; d < ndim; d++)
        at += (size_t)snprintf(dims + at, sizeof dims - at, "%s%lld", d ? ", " : "",
                               (long long)shape[d]);
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s%s), }", descr,
             dims, ndim == 1 ? "," : "");
    iu_write_npy_raw(path, dict, data, bytes);
}

enum { IU_COLS = 16, IU_ROWS = 14 };

void iu_write_sample(const char *path, bool bright, int index, bool jpeg)
{
    uint8_t px[IU_ROWS * IU_COLS * 3];
    for (int i = 0; i < IU_ROWS * IU_COLS * 3; i++) {
        int v = (i * 7 + index * 13) % 41;
        px[i] = (uint8_t)(bright ? 255 - v : v);
    }
    if (jpeg)
        iu_write_jpeg(path, 3, IU_COLS, IU_ROWS, px, 90);
    else
        iu_write_png(path, 3, IU_COLS, IU_ROWS, px);
}

void iu_make_folder(const char *dir, int n_train, int n_test)
{
    static const char *const splits[] = {"train", "test"};
    static const char *const classes[] = {"bright", "dark"};
    char path[1024];
    mkdir(dir, 0755);
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/%s", dir, splits[s]);
        mkdir(path, 0755);
        for (int c = 0; c < 2; c++) {
            snprintf(path, sizeof path, "%s/%s/%s", dir, splits[s], classes[c]);
            mkdir(path, 0755);
            for (int i = 0; i < (s ? n_test : n_train); i++) {
                bool jpeg = i % 3 == 2;
                snprintf(path, sizeof path, "%s/%s/%s/%d.%s", dir, splits[s], classes[c], i,
                         jpeg ? "jpg" : "png");
                iu_write_sample(path, c == 0, i + 100 * s, jpeg);
            }
        }
    }
}
