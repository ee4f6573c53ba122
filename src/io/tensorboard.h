/* TensorBoard event files, as SummaryWriter writes them: in a directory,
 * events.out.tfevents.<time>.<host>.<pid>.<n>, a sequence of TFRecords
 * (little-endian uint64 length, masked CRC32C of those 8 bytes, the data,
 * masked CRC32C of the data), each holding one protobuf Event
 * (tensorboard.proto): first file_version "brain.Event:2", then summaries
 * of scalar values (Summary.Value.simple_value) at a step.
 *
 * Every record goes to the file in one write(2) as it is made, so that
 * TensorBoard reads it while the run goes on and a process killed at any
 * point (SIGKILL) leaves every record written before it whole; only
 * dp__tb_sync and dp__tb_close wait for the disk (fsync). */
#ifndef DP_IO_TENSORBOARD_H
#define DP_IO_TENSORBOARD_H

#include <stddef.h>
#include <stdint.h>

typedef struct dp__tb_writer dp__tb_writer;

/* CRC32C (Castagnoli, as iSCSI and TFRecord use it) of p[0..n):
 * "123456789" gives 0xE3069283. */
uint32_t dp__crc32c(const void *p, size_t n);
/* TFRecord's masked CRC: crc rotated right by 15 bits, plus 0xa282ead8. */
uint32_t dp__tb_masked_crc(uint32_t crc);
/* `n` bytes of data framed as one TFRecord into out[0..n + 16). */
void dp__tb_frame(const void *data, size_t n, uint8_t *out);

/* The serialized Event holding scalars tags[i] = values[i] (i < n) at
 * `step` and `wall_time` (seconds since the Unix epoch), into out[0..size)
 * when it fits; returns its length either way (0: n is 0 or a tag is
 * NULL or empty). */
size_t dp__tb_encode_scalars(double wall_time, int64_t step, int n, const char *const *tags,
                             const float *values, uint8_t *out, size_t size);

/* Creates `dir` (and its missing parents, as SummaryWriter does) and a new
 * event file in it, and writes its file_version event. DP_EIO with one
 * line naming the directory or file and why. */
int dp__tb_open(dp__tb_writer **out, const char *dir);
/* The event file's path. */
const char *dp__tb_path(const dp__tb_writer *w);
/* One Event of scalars tags[i] = values[i] at `step`, now. */
int dp__tb_scalars(dp__tb_writer *w, int64_t step, int n, const char *const *tags,
                   const float *values);
/* SessionLog START at `step`: TensorBoard forgets what any earlier file
 * of the directory holds at steps >= step. A run resumed from a checkpoint
 * of step S writes this at S + 1, so that the steps a killed run wrote
 * after its checkpoint are not shown twice. */
int dp__tb_start(dp__tb_writer *w, int64_t step);
/* Waits until what was written is on the disk (fsync). */
int dp__tb_sync(dp__tb_writer *w);
/* Syncs and closes; reports the first failed write (DP_EIO) if any. NULL
 * is fine. */
int dp__tb_close(dp__tb_writer *w);

/* Whether an event file can be written in `dir` (made if missing), as
 * dp__tb_open will: 0, or DP_EIO with one line naming the directory and
 * why. Leaves nothing behind: what it made it removes. */
int dp__tb_check_dir(const char *dir);

#endif
