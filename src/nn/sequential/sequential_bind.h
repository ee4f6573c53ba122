/* How the modules of nn.Sequential files read their arguments: a line of
 * the module list as sequential_modules.c's table holds it, the arguments
 * of one call bound to its names, and the helpers that read and check them
 * (sequential_bind.c), each refusing a bad value with one line naming the
 * file, the line and the argument. */
#ifndef DP_NN_SEQUENTIAL_BIND_H
#define DP_NN_SEQUENTIAL_BIND_H

#include "nn/sequential/sequential_layers.h"
#include "nn/sequential/sequential_parse.h"

typedef struct dp__seq_module_info dp__seq_module_info;
typedef struct dp__seq_bound dp__seq_bound;

/* A line of the module list (nn/sequential/module_list.h). */
struct dp__seq_module_info {
    const char *name;
    int required;
    const char *const *args;
    /* Reads the bound arguments into l (the model's layer idx) and makes *sh
     * the sample's shape after it; NULL: bind_op. */
    int (*bind)(dp__seq_bound *b, dp__seq *s, dp__seq_layer *l, int idx, dp__seq_shape *sh);
    /* *y = the layer's output for x; NULL: op or op_number. */
    int (*forward)(const dp__seq_layer *l, dp_model_t *m, dp_tensor_t *x, bool train,
                   dp_tensor_t **y);
    int (*op)(dp_tensor_t **y, dp_tensor_t *x);
    int (*op_number)(dp_tensor_t **y, dp_tensor_t *x, float number);
    double number; /* op_number's argument when not given */
};

enum { DP__SEQ_MAX_BOUND = 10 };

/* The arguments of one call by the module's argument order (NULL: not
 * given, PyTorch's default applies). */
struct dp__seq_bound {
    const dp__seq_module_info *info;
    const dp__seq_arg *v[DP__SEQ_MAX_BOUND];
    const dp__seq *s;
    const dp__seq_call *call;
};

/* Logs "FILE: line N: <message>" and returns DP_EFORMAT. */
int dp__seq_bad(const dp__seq_bound *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Binds the call's arguments to b->info's names: positional, then by
 * keyword; each once; the required ones given. */
int dp__seq_bind_args(dp__seq_bound *b);
/* A positive integer (or pair of them, both must be equal unless `pair`
 * is given) at argument j, else `fallback`. min: the least value. */
int dp__seq_get_ints(const dp__seq_bound *b, int j, int64_t fallback, int64_t min, int64_t *first,
                     int64_t *second);
/* A number in [lo, hi] at argument j, else `fallback`. */
int dp__seq_get_float(const dp__seq_bound *b, int j, double fallback, double lo, double hi,
                      float *out);
/* True or False at argument j, else `fallback`. */
int dp__seq_get_bool(const dp__seq_bound *b, int j, bool fallback, bool *out);
/* Refuses an argument whose value dptrain does not implement. */
int dp__seq_only(const dp__seq_bound *b, int j, bool supported, const char *what);
/* Adds the parameter (or buffer) "<layer>.<suffix>"; returns its index. */
int dp__seq_add_spec(dp__seq *s, bool buffer, int layer, const char *suffix, int ndim,
                     const int64_t *shape, dp_init init, float scale);
bool dp__seq_is_images(const dp__seq_shape *sh);
/* 0 when the layer before gives images, else the one-line refusal. */
int dp__seq_need_images(const dp__seq_bound *b, const dp__seq_shape *sh);
/* Output size of a window spanning k over n with stride st and `pad`
 * padding in all (both sides together), PyTorch's floor mode. */
int dp__seq_window_out(const dp__seq_bound *b, int64_t n, int64_t k, int64_t st, int64_t pad,
                       int64_t *out);

#endif
