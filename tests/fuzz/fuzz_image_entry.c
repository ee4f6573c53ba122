/* Your own data's readers (fuzz_entry.h says what an input means): a .npy
 * file through dp_npy_read, and a PNG or JPEG through dp_image_decode. */
#include "fuzz_entry.h"

#include "dp/dp.h"

#include <string.h>

/* ---- npy ------------------------------------------------------------------- */

int fuzz_npy_input(const uint8_t *data, size_t size)
{
    const char *path = fz_input_file("npy", data, size);
    if (!path)
        return -1;
    dp_npy a;
    fz_capture_begin();
    int rc = dp_npy_read(path, &a);
    fz_capture_end();
    if (rc < 0)
        return fz_check_failure("npy", "dp_npy_read", rc, path);
    /* Read: the shape's bytes, and they are the file's last ones. */
    static const size_t item[] = {
        [DP_NPY_U8] = 1, [DP_NPY_I32] = 4, [DP_NPY_I64] = 8, [DP_NPY_F32] = 4};
    int result = 0;
    uint64_t bytes = item[a.dtype];
    for (int d = 0; d < a.ndim; d++)
        bytes *= (uint64_t)a.shape[d];
    if (a.ndim < 0 || a.ndim > DP_NPY_MAX_DIMS || bytes != a.size || a.size > size)
        result =
            fz_bad("npy", "read %d dims of %zu bytes, inconsistent with the shape", a.ndim, a.size);
    else if (size < 10 || memcmp(data, "\x93NUMPY", 6) != 0)
        result = fz_bad("npy", "read a file without the magic");
    else if (a.size && memcmp(a.data, data + size - a.size, a.size) != 0)
        result = fz_bad("npy", "read, but not the file's last %zu bytes", a.size);
    dp_npy_close(&a);
    return result;
}

/* ---- image ------------------------------------------------------------------ */

int fuzz_image_input(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const int modes[] = {0, 1, 3};
    int channels = modes[data[0] % 3];
    dp_image img;
    fz_capture_begin();
    int rc = dp_image_decode(data + 1, size - 1, "in.img", channels, &img);
    fz_capture_end();
    if (rc < 0) {
        if (fz_errors != 1 || strncmp(fz_last_error, "in.img: ", 8) != 0 ||
            strchr(fz_last_error, '\n'))
            return fz_bad("image", "failed (%d) without one line naming the input: %s", rc,
                          fz_last_error);
        return 0;
    }
    int result = 0;
    if ((channels && img.channels != channels) || (img.channels != 1 && img.channels != 3) ||
        img.rows < 1 || img.cols < 1 || img.rows > DP_IMAGE_MAX_SIDE ||
        img.cols > DP_IMAGE_MAX_SIDE || (int64_t)img.rows * img.cols > DP_IMAGE_MAX_PIXELS)
        result = fz_bad("image", "decoded %d channels of %dx%d for %d asked", img.channels,
                        img.cols, img.rows, channels);
    /* Every pixel is read, so ASan sees any that are not there; the same
     * file with the other channel count decodes to the same size. */
    volatile unsigned sum = 0;
    for (size_t i = 0; i < (size_t)img.channels * (size_t)img.rows * (size_t)img.cols; i++)
        sum += img.pixels[i];
    dp_image again;
    fz_capture_begin();
    rc = dp_image_decode(data + 1, size - 1, "in.img", img.channels == 1 ? 3 : 1, &again);
    fz_capture_end();
    if (result == 0 && (rc < 0 || again.rows != img.rows || again.cols != img.cols))
        result = fz_bad("image", "decoded once, not again with other channels: %s",
                        rc < 0 ? fz_last_error : "another size");
    if (rc == 0)
        dp_image_close(&again);
    dp_image_close(&img);
    return result;
}
