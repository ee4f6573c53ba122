/* The libFuzzer program of one target: targets.cmake builds this file once
 * per target, with FUZZ_TARGET set to its name (fuzz_table.c). */
#include "fuzz_entry.h"

#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fuzz_entry_fn entry;
    if (!entry && !(entry = fuzz_entry(FUZZ_TARGET))) {
        fprintf(stderr, "fuzz: no target '%s'\n", FUZZ_TARGET);
        abort();
    }
    if (entry(data, size) != 0)
        abort();
    return 0;
}
