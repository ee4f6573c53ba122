/* The fuzz targets by name: libFuzzer's programs, the regression test and
 * tests/fuzz/targets.cmake's list name the same ones. */
#include "fuzz_entry.h"

#include <string.h>

static const struct {
    const char *name;
    fuzz_entry_fn fn;
} fz_entries[] = {
    {"idx", fuzz_idx_input},
    {"safetensors", fuzz_safetensors_input},
    {"checkpoint", fuzz_checkpoint_input},
    {"cli", fuzz_cli_input},
    {"cifar10", fuzz_cifar10_input},
    {"model", fuzz_model_input},
    {"idx_dataset", fuzz_idx_dataset_input},
    {"cifar10_train", fuzz_cifar10_train_input},
    {"model_cli", fuzz_model_cli_input},
    {"devices", fuzz_devices_input},
    {"stages", fuzz_stages_input},
    {"model_build", fuzz_model_build_input},
    {"npy", fuzz_npy_input},
    {"image", fuzz_image_input},
    {"onnx", fuzz_onnx_input},
    {"shards", fuzz_shards_input},
    {"transform", fuzz_transform_input},
};

size_t fuzz_target_count(void)
{
    return sizeof fz_entries / sizeof *fz_entries;
}

fuzz_entry_fn fuzz_entry(const char *name)
{
    for (size_t i = 0; i < sizeof fz_entries / sizeof *fz_entries; i++)
        if (strcmp(name, fz_entries[i].name) == 0)
            return fz_entries[i].fn;
    return NULL;
}
