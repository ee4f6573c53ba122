/* The safetensors dtypes: names, sizes and the byte count of a shape. */
#include "io/safetensors.h"

#include "core/internal.h"

#include <string.h>

size_t dp_st_dtype_size(dp_st_dtype dtype)
{
    switch (dtype) {
    case DP_ST_F32:
    case DP_ST_I32:
        return 4;
    case DP_ST_I64:
        return 8;
    case DP_ST_U8:
        return 1;
    }
    return 0;
}

const char *dp__st_dtype_name(dp_st_dtype dtype)
{
    switch (dtype) {
    case DP_ST_F32:
        return "F32";
    case DP_ST_I32:
        return "I32";
    case DP_ST_I64:
        return "I64";
    case DP_ST_U8:
        return "U8";
    }
    return NULL;
}

int dp__st_dtype_from_name(const char *s, dp_st_dtype *out)
{
    static const dp_st_dtype all[] = {DP_ST_F32, DP_ST_I32, DP_ST_I64, DP_ST_U8};
    for (size_t i = 0; i < DP_COUNTOF(all); i++) {
        if (strcmp(s, dp__st_dtype_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

bool dp__st_shape_bytes(dp_st_dtype dtype, int ndim, const int64_t *shape, uint64_t *out)
{
    uint64_t n = dp_st_dtype_size(dtype);
    for (int i = 0; i < ndim; i++) {
        uint64_t d = (uint64_t)shape[i];
        if (d != 0 && n > UINT64_MAX / d)
            return false;
        n *= d;
    }
    *out = n;
    return true;
}
