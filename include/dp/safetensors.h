/* dp/safetensors.h - reading and writing safetensors files.
 *
 * The format (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian header size N, N bytes of JSON
 *   {"W1": {"dtype": "F32", "shape": [20, 1, 3, 3], "data_offsets": [0, 720]},
 *    ..., "__metadata__": {"key": "value", ...}}
 * (padded with spaces to a multiple of 8), then the tensors' bytes,
 * little-endian, each at its [begin, end) offset from the start of the data.
 * PyTorch users load the files with safetensors.torch.load_file. */
#ifndef DP_SAFETENSORS_H
#define DP_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dp_st_dtype {
    DP_ST_F32 = 0, /* "F32" */
    DP_ST_I32 = 1, /* "I32" */
    DP_ST_I64 = 2, /* "I64" */
    DP_ST_U8 = 3,  /* "U8" */
} dp_st_dtype;

#define DP_ST_MAX_DIMS 8
/* The longest tensor name, in bytes without the NUL, that the writer
 * writes and the reader reads. */
#define DP_ST_MAX_NAME 256

typedef struct dp_st_tensor {
    const char *name;
    dp_st_dtype dtype;
    int ndim;
    int64_t shape[DP_ST_MAX_DIMS];
    const void *data; /* element count x dtype size bytes */
    size_t bytes;
} dp_st_tensor;

/* Whether dp_safetensors_write could write `path`: not a directory, and its
 * temporary file ("<path>.tmp.<pid>") can be created beside it (created and
 * removed again). 0, or DP_EIO with one line naming the path and why. */
int dp_safetensors_check_writable(const char *path);

/* Writes `path` atomically: a temporary file in the same directory, fsync,
 * rename over `path`, fsync of the directory. On any failure `path` is left
 * as it was and the temporary file is removed. `meta` holds nmeta key/value
 * pairs (meta[2i] the key, meta[2i+1] the value) for "__metadata__". Names
 * must be unique and non-empty. */
int dp_safetensors_write(const char *path, const dp_st_tensor *tensors, int n,
                         const char *const *meta, int nmeta);

typedef struct dp_safetensors dp_safetensors_t;

/* Reads and validates a whole file: header size within the file, JSON well
 * formed, every tensor's dtype known, shape consistent with its byte range,
 * ranges inside the data, not overlapping, covering it. Errors (DP_ENOENT,
 * DP_EIO, DP_ETRUNC, DP_EFORMAT) are logged with the file name and the
 * tensor or byte offset at fault. */
int dp_safetensors_open(dp_safetensors_t **out, const char *path);
/* The same checks, reading the header alone (the data section's length
 * from the file's size): what a file says of itself, before its tensors
 * are needed. The tensors' data are NULL. */
int dp_safetensors_open_header(dp_safetensors_t **out, const char *path);
void dp_safetensors_close(dp_safetensors_t *f);
int dp_safetensors_count(const dp_safetensors_t *f);
/* The i-th tensor in file order (its data points into the loaded file). */
int dp_safetensors_get(const dp_safetensors_t *f, int i, dp_st_tensor *out);
/* The tensor called `name`: 0, or DP_ENOENT (not logged) if absent. */
int dp_safetensors_find(const dp_safetensors_t *f, const char *name, dp_st_tensor *out);
/* The metadata value for `key`, or NULL. */
const char *dp_safetensors_meta(const dp_safetensors_t *f, const char *key);

/* Bytes of one element of dtype. */
size_t dp_st_dtype_size(dp_st_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
