/* What the files of src/io/safetensors_*.c share: the format's limits,
 * its dtype names, and a file as the reader holds it. */
#ifndef DP_IO_SAFETENSORS_H
#define DP_IO_SAFETENSORS_H

#include "dp/safetensors.h"

#include "io/json.h"

/* Longer headers are taken for corruption (Python's library uses 100 MB). */
#define ST_MAX_HEADER ((uint64_t)100 << 20)
#define ST_META_KEY "__metadata__"
/* One read() or write() moves at most this much (Linux caps near 2 GiB). */
#define ST_IO_CHUNK ((size_t)1 << 30)
/* Room for "[d0, d1, ..., d7]" with 8 signed 64-bit dimensions. */
#define ST_SHAPE_STR (DP_ST_MAX_DIMS * 22 + 4)

/* "F32", "I32", "I64", "U8"; NULL for a value outside the enum. */
const char *dp__st_dtype_name(dp_st_dtype dtype);
/* The dtype called s: 0, or -1 if none is. */
int dp__st_dtype_from_name(const char *s, dp_st_dtype *out);
/* The byte count of a tensor: element size times the dimensions, multiplied
 * in order with an overflow check at each step (as Python's library does).
 * Dimensions must be non-negative. false on overflow. */
bool dp__st_shape_bytes(dp_st_dtype dtype, int ndim, const int64_t *shape, uint64_t *out);

struct st_entry {
    const char *name;
    dp_st_dtype dtype;
    int ndim;
    int64_t shape[DP_ST_MAX_DIMS];
    uint64_t begin, end; /* [begin, end) in the data section */
};

struct st_meta {
    const char *key, *value;
};

struct st_name {
    const char *name;
    int index; /* into tensors */
};

struct dp_safetensors {
    uint8_t *alloc;      /* the whole file, at an offset that aligns data */
    const uint8_t *data; /* the data section: data_size bytes (NULL: header only) */
    uint64_t data_size;
    uint64_t data_start;      /* file offset of the data section, for messages */
    struct st_entry *tensors; /* n, in file order */
    int n, cap;
    struct st_name *by_name; /* the n names, sorted, for lookup */
    struct st_meta *meta;    /* nmeta, sorted by key after parsing */
    int nmeta, meta_cap;
};

/* Parses the whole header (p holds it) into f's tensors and metadata. */
int dp__st_parse_header(dp__json_parser *p, dp_safetensors_t *f);

#endif
