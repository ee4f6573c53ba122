/* dp_image_decode: PNG pixels exactly as written, in planes; the channel
 * conversions of PIL's convert("L") (its integer luma) and
 * convert("RGB"); alpha dropped; JPEG within its loss; and a file that is
 * neither, or cut short, or whose header claims more pixels than are
 * read, refused with one line naming it. */
#include "imageutil.h"
#include "testutil.h"

#include "dp/dp.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { W = 7, H = 5 };

static void pattern(uint8_t *hwc, int channels)
{
    for (int i = 0; i < W * H * channels; i++)
        hwc[i] = (uint8_t)((i * 37 + 11) % 256);
}

static void png_planes_and_conversions(void **state)
{
    (void)state;
    const char *p = tu_tmp_path("x.png");
    uint8_t rgba[W * H * 4], rgb[W * H * 3];
    pattern(rgba, 4);
    for (int i = 0; i < W * H; i++)
        memcpy(rgb + 3 * i, rgba + 4 * i, 3);
    dp_image img;
    for (int with_alpha = 0; with_alpha < 2; with_alpha++) {
        iu_write_png(p, with_alpha ? 4 : 3, W, H, with_alpha ? rgba : rgb);
        assert_int_equal(dp_image_read(p, 0, &img), 0);
        assert_true(img.channels == 3 && img.rows == H && img.cols == W);
        for (int c = 0; c < 3; c++)
            for (int i = 0; i < W * H; i++)
                assert_int_equal(img.pixels[c * W * H + i], rgb[3 * i + c]);
        dp_image_close(&img);
        /* PIL's convert("L"): (19595 R + 38470 G + 7471 B + 0x8000) >> 16 */
        assert_int_equal(dp_image_read(p, 1, &img), 0);
        assert_int_equal(img.channels, 1);
        for (int i = 0; i < W * H; i++) {
            unsigned l = (19595u * rgb[3 * i] + 38470u * rgb[3 * i + 1] + 7471u * rgb[3 * i + 2] +
                          0x8000u) >>
                         16;
            assert_int_equal(img.pixels[i], l);
        }
        dp_image_close(&img);
    }
    /* gray (with alpha): one channel as the file has it, or copied to three */
    uint8_t ga[W * H * 2];
    pattern(ga, 2);
    iu_write_png(p, 2, W, H, ga);
    assert_int_equal(dp_image_read(p, 0, &img), 0);
    assert_int_equal(img.channels, 1);
    for (int i = 0; i < W * H; i++)
        assert_int_equal(img.pixels[i], ga[2 * i]);
    dp_image_close(&img);
    assert_int_equal(dp_image_read(p, 3, &img), 0);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < W * H; i++)
            assert_int_equal(img.pixels[c * W * H + i], ga[2 * i]);
    dp_image_close(&img);
}

/* A JPEG of flat colours comes back within a few levels. */
static void jpeg_within_its_loss(void **state)
{
    (void)state;
    const char *p = tu_tmp_path("x.jpg");
    uint8_t rgb[16 * 16 * 3];
    for (int i = 0; i < 16 * 16; i++) {
        rgb[3 * i] = 200;
        rgb[3 * i + 1] = 40;
        rgb[3 * i + 2] = 90;
    }
    iu_write_jpeg(p, 3, 16, 16, rgb, 100);
    dp_image img;
    assert_int_equal(dp_image_read(p, 0, &img), 0);
    assert_true(img.channels == 3 && img.rows == 16 && img.cols == 16);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 256; i++)
            assert_in_range(img.pixels[c * 256 + i], rgb[c] - 3, rgb[c] + 3);
    dp_image_close(&img);
}

static void expect(const void *buf, size_t n, const char *what)
{
    dp_image img;
    assert_true(dp_image_decode(buf, n, "in.png", 0, &img) < 0);
    const char *e = dp_last_error();
    if (strncmp(e, "in.png: ", 8) != 0 || !strstr(e, what) || strchr(e, '\n'))
        fail_msg("expected one line 'in.png: ...%s...', got: %s", what, e);
}

static void bad_files(void **state)
{
    (void)state;
    tu_quiet_log();
    expect("", 0, "an empty file");
    expect("GIF89a", 6, "not a PNG or JPEG image (it starts with the bytes 47 49 46 38)");
    const char *p = tu_tmp_path("y.png");
    uint8_t px[W * H] = {0};
    iu_write_png(p, 1, W, H, px);
    size_t n;
    uint8_t *f = iu_read_file(p, &n);
    for (size_t cut = 8; cut < n; cut += 7)
        expect(f, cut, "not a readable PNG");
    f[20] ^= 0x40; /* IHDR's CRC no longer matches */
    expect(f, n, "not a readable PNG");
    /* A header of 100000 x 100000 pixels, its CRC right: refused by its
     * size and the limit, not as libpng's "Invalid IHDR data". */
    for (int i = 0; i < 8; i++)
        f[16 + i] = (uint8_t)(100000u >> (24 - 8 * (i % 4)));
    uint32_t crc = (uint32_t)crc32(0L, f + 12, 17);
    for (int i = 0; i < 4; i++)
        f[29 + i] = (uint8_t)(crc >> (24 - 8 * i));
    expect(f, n, "100000x100000 pixels: images of at most 16384x16384 and 67108864 pixels");
    free(f);
    const char *q = tu_tmp_path("y.jpg");
    iu_write_jpeg(q, 1, W, H, px, 90);
    f = iu_read_file(q, &n);
    for (size_t cut = 3; cut < n; cut += 11)
        expect(f, cut, "not a readable JPEG");
    free(f);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(png_planes_and_conversions),
                                       cmocka_unit_test(jpeg_within_its_loss),
                                       cmocka_unit_test(bad_files)};
    return tu_run(argc, argv, tests, tu_setup_tmp, tu_teardown_tmp);
}
