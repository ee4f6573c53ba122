/* libFuzzer target: model files (fuzz_model_entry.c says what they mean). */
#include "fuzz_entry.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fuzz_model_input(data, size) != 0)
        abort();
    return 0;
}
