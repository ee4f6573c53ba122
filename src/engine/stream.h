/* A stream: a FIFO of commands that one worker thread runs in order.
 *
 * The front end pushes commands and goes on; each push returns a sequence
 * number, and dp__stream_wait(s, seq) blocks until that command has run. A
 * command that fails sets the stream's sticky error, which every later wait
 * returns until dp__stream_take_error; later commands still run (they may
 * free memory).
 *
 * Lock order: a stream's mutex is a leaf; no other lock is taken while it is
 * held. A command waiting on another stream's event waits on that stream's
 * mutex only, never on its own. */
#ifndef DP_ENGINE_STREAM_H
#define DP_ENGINE_STREAM_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of arguments a command carries inline: a convolution's
 * (device/kernels.h's dp__conv2d_args, 496 bytes, with the CUDA backend's
 * 16 of its own) is the largest. */
#define DP__CMD_ARGS_MAX 576

typedef struct dp__stream dp__stream;
/* Runs on the worker; returns 0 or a negative DP_E* code. */
typedef int (*dp__cmd_fn)(void *args, void *worker_ctx);

/* Starts a worker. `worker_init(ctx)` runs first on the worker thread (to set
 * thread counts, say); `ctx` is passed to every command. */
int dp__stream_init(dp__stream **out, const char *name, void (*worker_init)(void *ctx), void *ctx);
/* Drains the queue, stops and joins the worker. NULL is accepted. */
void dp__stream_close(dp__stream *s);

/* Copies `size` bytes of args into the queue (blocking while it is full) and
 * returns the command's sequence number (from 1). */
uint64_t dp__stream_push_named(dp__stream *s, dp__cmd_fn fn, const char *name, const void *args,
                               size_t size);
#define dp__stream_push(s, fn, args, size) dp__stream_push_named(s, fn, #fn, args, size)

/* With DP_PROFILE=1 in the environment each stream times its commands by
 * name; this waits for the commands pushed so far and logs the table (at
 * DP_LOG_INFO), slowest first. */
void dp__stream_log_profile(dp__stream *s);
/* How many times the worker has woken the threads waiting for its
 * commands: once when the least sequence number one of them waits for has
 * run, not after every command (a test's view of the engine's wakeups). */
uint64_t dp__stream_wakeups(dp__stream *s);
/* Sequence number of the last command pushed (0: none). */
uint64_t dp__stream_last(dp__stream *s);
/* Blocks until command `seq` has run; returns the sticky error or 0. */
int dp__stream_wait(dp__stream *s, uint64_t seq);
/* Returns the sticky error (0: none) and clears it, without waiting: a
 * failure of a command still queued sets it again when it runs. */
int dp__stream_take_error(dp__stream *s);
/* dp__stream_wait giving up after `seconds` (>= 0, not NaN) with
 * DP_ETIMEDOUT; nothing is logged. */
int dp__stream_wait_for(dp__stream *s, uint64_t seq, double seconds);
/* Makes `s` wait, on its worker, until `other` has run command `seq`. */
void dp__stream_wait_other(dp__stream *s, dp__stream *other, uint64_t seq);
/* Whether the calling thread is this stream's worker. */
int dp__stream_is_worker(const dp__stream *s);

#endif
