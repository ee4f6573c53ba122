/* The fuzz targets' entry points. The libFuzzer programs (tests/fuzz/fuzz_*.c,
 * `make fuzz`, clang) and the regression test (tests/fuzz/test_fuzz_regress.c,
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
 * What an input means to each target (idx and cifar10 are read in
 * fuzz_data_entry.c; safetensors and checkpoint in fuzz_entry.c; cli in
 * fuzz_cli_entry.c):
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
 *                eval, predict or demo) then its options, through
 *                cli_<cmd>_parse (parsing only; nothing runs).
 *   model        the text of a model file, parsed (fuzz_model_entry.c).
 *
 * and, in fuzz_data_entry.c and fuzz_parse_entry.c:
 *   idx_dataset  an IDX image set's split as dp__idx_dataset_load reads it:
 *                byte 0 is a mode (bit 0: gzip the images file, bit 1: the
 *                labels file, bit 2: the t10k split), bytes 1-2 the images
 *                file's length (little-endian), then the images file, then
 *                the labels file. It must load exactly when both are
 *                well-formed IDX files of [N, R, C] images (N >= 1, sides 1
 *                to 1024) and N labels below 10, sample i being image i.
 *   cifar10_train  CIFAR-10's five-file train split: byte 0 bit 0 puts the
 *                files in cifar-10-batches-bin/, bytes 1-10 are five
 *                little-endian 16-bit lengths, and data_batch_1.bin to
 *                data_batch_5.bin take the rest in turn. It must load
 *                exactly when each file is whole records with labels 0..9,
 *                sample r being the r-th record of the five in order.
 *   model_cli    `dptrain model` with lenet (byte 0 even) or resnet18, then
 *                its options one per line (--input, --pipeline, --stages,
 *                --micro-batches, --schedule): a summary (on the meta
 *                device) or an exit status of 1 or 2, nothing else.
 *   devices      byte 0 is how many CPUs the library sees (0: this
 *                machine's), the rest a device list for dp_devices_open:
 *                1 to DP_MAX_DEVICES distinct devices, or one error.
 *   stages       byte 0 is a layer count (1 to 255), then a bitmap of where
 *                a stage may start, one bit per layer, then a --stages list
 *                for dp_pipeline_parse_stages: stages that cover the layers
 *                in order and start where allowed, or one error.
 *   model_build  the text of a model file, parsed and built as `dptrain
 *                model` builds it (dp_model_summary on the meta device): a
 *                table whose parameters add up to the definition's, at most
 *                DP_MAX_PARAMS, or one error naming the file.
 *
 * and, in fuzz_image_entry.c:
 *   npy          a .npy file through dp_npy_read: read, its data the shape's
 *                bytes and the file's last ones; or one error naming it.
 *   image        byte 0 picks the channels (value % 3: as the file, 1, 3),
 *                the rest is a PNG or JPEG for dp_image_decode: that many
 *                channels of a size within DP_IMAGE_MAX_SIDE and
 *                DP_IMAGE_MAX_PIXELS, the same size with the other channel
 *                count; or one error naming the input.
 *
 * and, in fuzz_onnx_entry.c:
 *   onnx         an ONNX file through dp_model_def_load_onnx: a definition
 *                with named parameters of 1 to 4 dimensions, summarised on
 *                the meta device; or one error naming the file.
 *
 * and, in fuzz_shards_entry.c:
 *   shards       byte 0 is a mode (value % 8 + 1: the shuffle buffer, bit 3:
 *                shuffle), the rest a tar shard through dp_shard_set_open's
 *                index pass and one lane read to its end: exactly the
 *                samples counted, each id once, labels below the class
 *                count; or one error naming the shard.
 *
 * and, in fuzz_transform_entry.c:
 *   transform    bytes 0-2 pick a transform list (byte 0 & 7: the sizing
 *                stage, bit 3: flip, bits 4-5: gray/rgb first; bytes 1-2
 *                the sides, 1 to 64), byte 3 the channels (value % 3: as the
 *                file, 1, 3) and the seed (value >> 2); the rest is a PNG
 *                or JPEG through dp_transform_decode with --jpeg-scale auto
 *                and off: the list's output shape (the same both ways),
 *                floats in [0, 1] (within an ulp); or one error naming the
 *                input. */
#ifndef DP_TESTS_FUZZ_ENTRY_H
#define DP_TESTS_FUZZ_ENTRY_H

#include <stdbool.h>
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
int fuzz_idx_dataset_input(const uint8_t *data, size_t size);
int fuzz_cifar10_train_input(const uint8_t *data, size_t size);
int fuzz_model_cli_input(const uint8_t *data, size_t size);
int fuzz_devices_input(const uint8_t *data, size_t size);
int fuzz_stages_input(const uint8_t *data, size_t size);
int fuzz_model_build_input(const uint8_t *data, size_t size);
int fuzz_npy_input(const uint8_t *data, size_t size);
int fuzz_image_input(const uint8_t *data, size_t size);
/* onnx: an ONNX file (fuzz_onnx_entry.c). */
int fuzz_onnx_input(const uint8_t *data, size_t size);
/* shards: a tar shard (fuzz_shards_entry.c). */
int fuzz_shards_input(const uint8_t *data, size_t size);
/* transform: an image file through the transforms (fuzz_transform_entry.c). */
int fuzz_transform_input(const uint8_t *data, size_t size);

/* The entry of target `name` (fuzz_table.c lists them), or NULL. */
fuzz_entry_fn fuzz_entry(const char *name);
/* How many targets fuzz_entry knows. */
size_t fuzz_target_count(void);

/* Shared by the entries (fuzz_entry.c). Errors the library logs between
 * fz_capture_begin and fz_capture_end are counted, the last one kept. */
enum { FZ_ERROR_MAX = 1024 };
extern _Thread_local int fz_errors;
extern _Thread_local char fz_last_error[FZ_ERROR_MAX];
void fz_capture_begin(void);
void fz_capture_end(void);
/* A broken promise of a reader: said on stderr, returned as -1. */
int fz_bad(const char *target, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A call that returned rc < 0 must have logged an error beginning with
 * "<path>: ". */
int fz_check_failure(const char *target, const char *call, int rc, const char *path);
/* The input's bytes in a memfd; its path (/proc/self/fd/N), or NULL (said
 * on stderr). */
const char *fz_input_file(const char *target, const uint8_t *data, size_t size);
/* A scratch directory, made on first use and removed at exit. */
const char *fz_scratch(const char *target);
/* Whether p[0..n) is a well-formed IDX file by the format's own rules (and
 * the reader's cap); *header gets the header's length, dims[0..*ndims) its
 * sizes (room for 4). */
bool fz_idx_valid(const uint8_t *p, size_t n, size_t *header, int *ndims, int64_t *dims);
/* `src` as one gzip member (level 1), malloc'd; NULL if zlib fails. */
uint8_t *fz_gzip(const uint8_t *src, size_t n, size_t *out_n);

/* Releases what the entries keep between inputs (the input file, the LeNet
 * model and its device), so that a leak checker at exit sees nothing. */
void fuzz_teardown(void);

#endif
