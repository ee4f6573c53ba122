/* The fuzz targets' entry points. The libFuzzer programs (tests/fuzz/fuzz_*.c,
 * `make fuzz`, clang) and the regression test (tests/test_fuzz_regress.c,
 * every file of tests/fuzz/corpus/ and tests/fuzz/regress/, gcc and
 * ASan+UBSan in `make test`) call the same functions, so an input that once
 * crashed a target keeps being checked without libFuzzer.
 *
 * Each entry feeds one input to a reader or parser and returns 0 when that
 * ended cleanly: success with a consistent result, or a failure with a
 * status (a negative DP_E* code, or the command line's 2) and a one-line
 * error that begins with the file's name. Anything else is a bug: a
 * sanitizer report, an abort, or a nonzero return with a message on stderr
 * saying which check failed.
 *
 * What an input means to each target:
 *   idx          byte 0 is a mode, the rest an IDX file. Mode bit 0 clear:
 *                the file as it is (a gzip stream if it starts with 1f 8b).
 *                Bit 0 set: the rest is gzip-compressed first, then bit 1
 *                corrupts the stream's CRC and bits 2..7 cut that many bytes
 *                off its end. The file goes through dp_idx_read.
 *   cifar10      a CIFAR-10 batch file (label byte, then 3 x 32 x 32 pixel
 *                bytes, per record), read as test_batch.bin of a scratch
 *                directory by dp_cifar10_load: it must read exactly when it
 *                is whole records with labels 0..9, sample r being record r.
 *   safetensors  a safetensors file, through dp_safetensors_open and every
 *                accessor; one that opens is written back with
 *                dp_safetensors_write and must read back the same.
 *   checkpoint   a safetensors file, loaded with dp_checkpoint_model,
 *                dp_checkpoint_load_weights and dp_checkpoint_load (with an
 *                SGD momentum buffer) into a model on cpu:0: the tutorial's
 *                Linear(5, 2) if the file names it, else LeNet.
 *   cli          a command line, one argument per line: the command (train,
 *                eval or demo) then its options, through cli_<cmd>_parse
 *                (parsing only; nothing runs). */
#ifndef DP_TESTS_FUZZ_ENTRY_H
#define DP_TESTS_FUZZ_ENTRY_H

#include <stddef.h>
#include <stdint.h>

typedef int (*fuzz_entry_fn)(const uint8_t *data, size_t size);

int fuzz_idx_input(const uint8_t *data, size_t size);
int fuzz_safetensors_input(const uint8_t *data, size_t size);
int fuzz_checkpoint_input(const uint8_t *data, size_t size);
int fuzz_cli_input(const uint8_t *data, size_t size);
int fuzz_cifar10_input(const uint8_t *data, size_t size);
/* model: the text of a model file (fuzz_model_entry.c). */
int fuzz_model_input(const uint8_t *data, size_t size);

/* The entry of target `name` ("idx", "safetensors", "checkpoint", "cli",
 * "cifar10", "model"), or
 * NULL. */
fuzz_entry_fn fuzz_entry(const char *name);

/* Releases what the entries keep between inputs (the input file, the LeNet
 * model and its device), so that a leak checker at exit sees nothing. */
void fuzz_teardown(void);

#endif
