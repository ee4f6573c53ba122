/* Helpers of the test_image_*.c programs: PNG, JPEG and .npy files written
 * with the same Debian libraries the reader uses (libpng, libjpeg-turbo)
 * and by the .npy format's own rules, and a small image folder. */
#ifndef DP_TESTS_IMAGEUTIL_H
#define DP_TESTS_IMAGEUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Interleaved rows x cols x channels bytes (channels 1, 2, 3 or 4: gray,
 * gray + alpha, RGB, RGBA) as a PNG file; fails the test if it cannot. */
void iu_write_png(const char *path, int channels, int cols, int rows, const uint8_t *hwc);
/* The same (channels 1 or 3) as a JPEG of `quality`. */
void iu_write_jpeg(const char *path, int channels, int cols, int rows, const uint8_t *hwc,
                   int quality);
/* A file's bytes (malloc'd; *n its length). */
uint8_t *iu_read_file(const char *path, size_t *n);
/* An .npy file (version 1.0) of descr ("|u1", "<f4", ...) and shape, with
 * `bytes` bytes of data, as np.save writes it. */
void iu_write_npy(const char *path, const char *descr, int ndim, const int64_t *shape,
                  const void *data, size_t bytes);
/* An .npy file whose header dict is `dict` (as given), then `bytes` of data. */
void iu_write_npy_raw(const char *path, const char *dict, const void *data, size_t bytes);

/* DIR/{train,test}/{bright,dark}/N.{png,jpg}: 16 x 14 (width x height) RGB images, dark ones
 * of values 0..40 and bright ones 215..255 (varying by pixel and image),
 * n_train and n_test of each class, every third a JPEG. */
void iu_make_folder(const char *dir, int n_train, int n_test);
/* One image of that folder's kind: bright or dark, as a PNG or JPEG. */
void iu_write_sample(const char *path, bool bright, int index, bool jpeg);

#endif
