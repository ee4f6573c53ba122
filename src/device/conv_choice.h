/* The process's table of convolution kernel choices: for each shape
 * (batch size aside) and precision, which implementation each pass runs.
 * DP_CONV_ALGO_AUTO fills it by measurement the first time a shape is seen
 * (cuDNN's benchmark mode, for every backend); dp_conv_choices_load fills
 * it from a checkpoint or from MPI rank 0. One table per process, so every
 * device of the process runs the one choice. */
#ifndef DP_DEVICE_CONV_CHOICE_H
#define DP_DEVICE_CONV_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum dp__conv_pass {
    DP__CONV_FORWARD = 0,
    DP__CONV_BACKWARD_DATA = 1,
    DP__CONV_BACKWARD_WEIGHTS = 2,
    DP__CONV_PASSES
} dp__conv_pass;

/* The implementations a backend may offer for a pass. */
typedef enum dp__conv_impl {
    DP__CONV_DIRECT = 0,   /* direct, activations in NHWC */
    DP__CONV_BLOCKED = 1,  /* direct in the backend's blocked layout, reordered in and out */
    DP__CONV_WINOGRAD = 2, /* Winograd F(4x4, 3x3), float32 */
    DP__CONV_GEMM = 3,     /* im2col and one matrix product */
    DP__CONV_IMPLS
} dp__conv_impl;

/* "direct", "blocked", "winograd", "gemm"; "forward", "backward_data",
 * "backward_weights". */
const char *dp__conv_impl_name(dp__conv_impl impl);
const char *dp__conv_pass_name(dp__conv_pass pass);

/* A convolution without its batch size: x (C, H, W), w (K, C / groups, R,
 * S), padding pad_h above, pad_w left, pad_bottom and pad_right; dilation
 * and groups at least 1 (kernels.h's dp__conv2d_args). Compared whole
 * (memcmp): every field set. */
typedef struct dp__conv_shape {
    /* the operands' precision (dp_precision): the table holds f32 and bf16
     * choices; the reference bf16 path, which always runs direct, appears
     * in the trace only */
    int32_t precision;
    int32_t c, h, w, k, r, s;
    int32_t stride_h, stride_w, pad_h, pad_w;
    int32_t pad_bottom, pad_right, dilation_h, dilation_w, groups;
} dp__conv_shape;

/* The shape's key as the text has it: "f32 64x28x28 k64 3x3 s1x1 p1x1",
 * with the padding as "p<top>x<left>x<bottom>x<right>" where the sides
 * differ, then " d<h>x<w>" where the dilation is not 1 and " g<groups>"
 * where the groups are not 1. Returns snprintf's count. */
int dp__conv_shape_str(char *buf, size_t size, const dp__conv_shape *s);

/* Fills *best with the fastest implementation of a pass; returns 0 or a
 * negative code. Called with the table locked. */
typedef int (*dp__conv_measure_fn)(void *ctx, dp__conv_impl *best);

/* The implementation of `pass` for shape s: the table's, or, the first time,
 * what measure(ctx) picks, which is then the table's. The table stays
 * locked while measure runs, so another device of the process asking for
 * the same shape waits and gets the same choice. */
int dp__conv_choose(const dp__conv_shape *s, dp__conv_pass pass, dp__conv_measure_fn measure,
                    void *ctx, dp__conv_impl *out);

/* The table's implementation of `pass` for s, or -1 when it has none. */
int dp__conv_choice_find(const dp__conv_shape *s, dp__conv_pass pass);

/* The table as text (dp_conv_choices_save's format), malloc'd. */
char *dp__conv_choices_text(void);
/* Installs the text's lines, all or none (DP_EINVAL naming a bad line). */
int dp__conv_choices_parse(const char *text);
void dp__conv_choices_reset(void);

/* For tests: a hook that gives the chooser each candidate's time, in
 * place of the clock's, so that a test can hand the candidates timings of
 * its choosing and see which one is kept. dp__conv_timing returns the
 * hook's figure for (pass, impl), or `measured` when no hook is set (NULL,
 * the default). Set it before the convolutions that measure run. */
typedef double (*dp__conv_timing_fn)(dp__conv_pass pass, dp__conv_impl impl, double measured);
void dp__conv_set_timing_hook(dp__conv_timing_fn hook);
double dp__conv_timing(dp__conv_pass pass, dp__conv_impl impl, double measured);

/* For tests: while tracing is on, every convolution pass that runs is
 * recorded once per (device, shape, pass) with the implementation it ran;
 * dp__conv_trace_find returns that implementation, or -1 when the device
 * ran no such pass (or, with conflicting = true, -2 when it ran it with two
 * implementations). dp__conv_trace(true) also clears the record. */
void dp__conv_trace(bool on);
void dp__conv_trace_record(const void *dev, const dp__conv_shape *s, dp__conv_pass pass,
                           dp__conv_impl impl);
int dp__conv_trace_find(const void *dev, const dp__conv_shape *s, dp__conv_pass pass);
/* The i-th recorded (device, shape, pass), for a test to walk them; false
 * past the end. */
bool dp__conv_trace_get(int i, const void **dev, dp__conv_shape *s, dp__conv_pass *pass,
                        dp__conv_impl *impl);

/* For tests: how many convolution passes ran a backend's reference kernel
 * (oneDNN's "ref:" implementations, which the chooser never times) since
 * the process started; a backend counts each such run. */
void dp__conv_note_reference_run(void);
long dp__conv_reference_runs(void);

#endif
