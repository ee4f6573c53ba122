/* Helpers of the safetensors tests (test_safetensors_format.c,
 * test_safetensors_broken.c, test_safetensors_write.c): files written byte
 * by byte into the test's temp directory (tu_tmp), and checks of what the
 * reader hands back and of its error messages. */
#ifndef DP_TESTS_SAFETENSORSUTIL_H
#define DP_TESTS_SAFETENSORSUTIL_H

#include "testutil.h"

#include "dp/safetensors.h"

#include <stddef.h>
#include <stdint.h>

/* The whole file; caller frees. NULL if it cannot be read. */
unsigned char *read_all(const char *path, size_t *len);
/* The entries of `dir` whose name contains ".tmp.". */
int count_temp_files(const char *dir);
/* tu_tmp_path(name) holding the 8-byte little-endian size field, then the
 * header and data as given; returns that path. */
const char *write_raw(const char *name, uint64_t size_field, const char *hdr, size_t hlen,
                      const void *data, size_t n);
/* A file with `hdr` padded with spaces to a multiple of 8 and n data bytes
 * (zeros when data is NULL). */
const char *write_st(const char *name, const char *hdr, const void *data, size_t n);
/* Fails unless the library's last error contains `want` (NULL: anything). */
void assert_error_has(const char *want);
/* Opening `path` fails with `rc`, and the message has both substrings. */
void expect_open_fails(const char *path, int rc, const char *want1, const char *want2);
/* A tensor of `dtype` and `shape` over `data`, its byte count computed. */
dp_st_tensor make_tensor(const char *name, dp_st_dtype dtype, int ndim, const int64_t *shape,
                         const void *data);
/* Fails unless a and b have the same name, dtype, shape and bytes. */
void assert_same_tensor(const dp_st_tensor *a, const dp_st_tensor *b);

#endif
