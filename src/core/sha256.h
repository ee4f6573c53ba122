/* SHA-256 of a stream of bytes (sha256.c). */
#ifndef DP_CORE_SHA256_H
#define DP_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct dp__sha256 {
    uint32_t h[8];
    uint64_t bytes; /* hashed so far */
    uint8_t block[64];
} dp__sha256;

void dp__sha256_init(dp__sha256 *s);
void dp__sha256_update(dp__sha256 *s, const void *data, size_t n);
/* The digest as 64 lowercase hex digits and a NUL; s is spent. */
void dp__sha256_hex(dp__sha256 *s, char hex[65]);

#endif
