/* Helpers of the hostile-input tests (test_hostile_*.c): dptrain run in a
 * child on a file, held to one line naming the file and the cause, a
 * non-zero exit, 1 s of CPU time and 64 MB of peak resident memory beyond
 * the program's own (`dptrain model lenet`, measured by the group setup;
 * wait4's rusage); and protobuf's wire format written back to front, for
 * files too deep or too large for protobuf-c's own packer. */
#ifndef DP_TESTS_HOSTILEUTIL_H
#define DP_TESTS_HOSTILEUTIL_H

#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HU_SANITIZED 1
#endif
#endif
#ifndef HU_SANITIZED
#define HU_SANITIZED 0
#endif

/* The bounds of a refusal: a sanitizer's shadow memory and slower code
 * leave the memory unchecked there and the time four times as long. */
#define HU_HEADROOM_KB (64L * 1024)
#define HU_CPU_S (HU_SANITIZED ? 4.0 : 1.0)

/* What one run of dptrain left. */
typedef struct hu_outcome {
    int status;                /* exit code, or 128 + signal */
    char err[4096], out[4096]; /* stderr's start, stdout's end */
    double cpu_s, wall_s;
    long rss_kb; /* peak resident memory */
} hu_outcome;

/* The group setup: finds dptrain, makes the temp dir, measures
 * `dptrain model lenet`. */
int hu_setup(void **state);
/* Runs `dptrain args...` (NULL-terminated, at most 14), killed past 30 s
 * of CPU. */
void hu_run(const char *const *args, hu_outcome *o);
/* Prints the run's cost and fails past cpu_limit s of CPU, 10 s of wall
 * time, or headroom_kb of memory beyond `dptrain model lenet`'s. */
void hu_within(const char *what, const hu_outcome *o, double cpu_limit, long headroom_kb);
/* `dptrain args...` must end with exit 1..127 and one line on stderr that
 * starts with "dptrain: error: <file>: " and holds each of words[0..]
 * (NULL-ended), within HU_CPU_S and HU_HEADROOM_KB. */
void hu_refused(const char *const *args, const char *file, const char *const *words);

#define HU_WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---- protobuf's wire format, written from the end ---------------------------
 * A message's fields are written last first, each before the ones written
 * already, so that a message's length is known when its header is: a
 * message is closed by hu_msg with the place its content ended. */
typedef struct hu_wire {
    uint8_t *buf;
    size_t at; /* the bytes written are buf[at..cap) */
    size_t cap;
} hu_wire;

void hu_open(hu_wire *w, size_t cap);
void hu_bytes(hu_wire *w, const void *p, size_t n);
void hu_varint(hu_wire *w, uint64_t v);
void hu_tag(hu_wire *w, int field, int type);
void hu_int(hu_wire *w, int field, int64_t v);
void hu_float(hu_wire *w, int field, float v);
void hu_str(hu_wire *w, int field, const char *s);
/* Closes message field `field` whose content was written since w->at
 * was `end`. */
void hu_msg(hu_wire *w, int field, size_t end);
/* Writes the bytes to path and frees them. */
void hu_save(hu_wire *w, const char *path);

#endif
