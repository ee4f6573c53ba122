/* dp/nn.h - parameters and models.
 *
 * A model's parameters live in one contiguous buffer on its device and their
 * gradients in another, so that an optimizer step or an allreduce is one
 * call over one buffer; each named parameter is a view into both. */
#ifndef DP_NN_H
#define DP_NN_H

#include "dp/ops.h"
#include "dp/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dp_params dp_params_t;

typedef enum dp_init {
    DP_INIT_ZEROS = 0,
    DP_INIT_NORMAL = 1,  /* N(0, scale^2): the seeds' weights, scale 0.01 */
    DP_INIT_UNIFORM = 2, /* U(-scale, scale): PyTorch's default biases, 1/sqrt(fan_in) */
    DP_INIT_ONES = 3,    /* batch norm's weight and running_var */
    /* every element = scale: nn.PReLU's slopes (init=0.25) */
    DP_INIT_CONSTANT = 4,
} dp_init;

typedef struct dp_param_spec {
    const char *name; /* PyTorch state_dict name, e.g. "W1" or "0.weight" */
    int ndim;
    int64_t shape[DP_MAX_DIMS];
    dp_init init;
    float scale;
} dp_param_spec;

/* How a model's weights (its parameters of two or more dimensions) are
 * drawn, over what its definition says; biases and batch norm keep theirs. */
typedef enum dp_weight_init {
    DP_WEIGHTS_AS_DEFINED = 0, /* PyTorch's default for files: U(+-1/sqrt(fan_in)) */
    DP_WEIGHTS_NORMAL = 1,     /* N(0, std^2): the seeds' init_weights, std 0.01 */
    DP_WEIGHTS_XAVIER = 2,     /* U(+-sqrt(6 / (fan_in + fan_out))): d2l's LeNet chapter */
} dp_weight_init;

/* Rewrites the weight specs among specs[0..n) in place for `init` (std: for
 * DP_WEIGHTS_NORMAL). fan_in and fan_out as PyTorch's: (out, in) or
 * (out, in, kh, kw): in x kh x kw and out x kh x kw. */
void dp_param_specs_set_weight_init(dp_param_spec *specs, int n, dp_weight_init init, float std);

/* The spec of a tensor called `name` of shape[0..ndim), drawn by `init`. */
dp_param_spec dp_param_spec_make(const char *name, int ndim, const int64_t *shape, dp_init init,
                                 float scale);

/* `with_grads` false makes buffers that are not trained (batch norm's
 * running statistics): no gradient buffer. */
int dp_params_init(dp_params_t **out, dp_device_t *dev, const dp_param_spec *specs, int n,
                   bool with_grads);
void dp_params_close(dp_params_t *p);
int dp_params_count(const dp_params_t *p);
dp_tensor_t *dp_params_get(const dp_params_t *p, int i);
const char *dp_params_name(const dp_params_t *p, int i);
/* Index of the tensor called `name`, or -1. */
int dp_params_find(const dp_params_t *p, const char *name);
/* The whole value and gradient buffers as 1-D tensors (grads: NULL for
 * buffers made without gradients). */
dp_tensor_t *dp_params_values(const dp_params_t *p);
dp_tensor_t *dp_params_grads(const dp_params_t *p);
int64_t dp_params_numel(const dp_params_t *p);
/* Draws every parameter from its spec with the counter-based RNG: the same
 * seed gives the same weights on every device and every rank. */
int dp_params_init_random(dp_params_t *p, uint64_t seed);
/* Copies all values in / out (dp_params_numel floats, spec order). */
int dp_params_set(dp_params_t *p, const float *values);
int dp_params_get_all(const dp_params_t *p, float *values);
/* Starts a step: the first gradient contribution of each parameter writes. */
void dp_params_zero_grad(dp_params_t *p);
/* Ends a backward pass: zeroes the gradient of parameters that got none. */
int dp_params_finish_grad(dp_params_t *p);

/* ---- models ----------------------------------------------------------------- */
typedef struct dp_model dp_model_t;
typedef struct dp_model_def dp_model_def;
typedef struct dp_layer_summary dp_layer_summary;

/* The output (N, classes) of a model from its input x (N, C, H, W) (or
 * (N, features)), written with the public ops (dp/ops.h) over the model's
 * parameters (dp_model_params(m), in the definition's order). `train`
 * selects training behaviour: batch statistics, dropout. */
typedef int (*dp_forward_fn)(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits);

/* A model, as PyTorch's DataParallel sees any module: its parameters, its
 * buffers and its forward. Everything it points to must outlive the models
 * built from it. The built-in models are definitions like any other
 * (dp_model_builtin); a program defines its own (examples/custom_model.c),
 * and a file in nn.Sequential's syntax or an ONNX model is loaded into one
 * (dp_model_def_load).
 *
 * A definition is the one interface of every kind of model, as a device's
 * table is of every backend: its data (name, specs, user) and its entries
 * (forward, then the optional ones, NULL where the default named at each
 * serves). Callers ask the definition through these entries; none asks
 * which kind of model it is. A program that fills only the fields before
 * `release` gets every default. */
struct dp_model_def {
    const char *name;            /* kept in checkpoints: "lenet", a file's path, ... */
    const dp_param_spec *params; /* trained, in state_dict order */
    int nparams;
    const dp_param_spec *buffers; /* not trained (batch norm's running statistics); NULL: none */
    int nbuffers;
    /* The batch norm layers' names ("1", "resnet_block1.0.bn1"), in the order
     * their forward calls dp_model_bn_params: their num_batches_tracked
     * entries and SyncBatchNorm groups. NULL: none. */
    const char *const *bn_names;
    int nbn;
    dp_forward_fn forward;
    const void *user; /* the kind's own data, for its entries (dp_model_user) */
    /* Optional, for pipeline stages: runs only ops first..last (rows of
     * dp_model_summary) of a forward from x, the output of op first - 1 (the
     * model's input when first is 0); *y is op last's output. A range may
     * start only where dp_layer_summary.can_start is true. NULL: the model
     * cannot be split. */
    int (*forward_layers)(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                          dp_tensor_t **y);
    /* Optional starting values of the parameters and of the buffers (all
     * of them, spec order, as dp_params_set takes them: an ONNX model's
     * initializers) in place of the specs' draws. NULL: drawn. */
    const float *param_values, *buffer_values;

    /* ---- the other optional entries ----------------------------------- */
    /* Frees the definition and what it points to (dp_model_def_free calls
     * it once no model of it is left). NULL: dp_model_def_free leaves the
     * definition alone (static storage, a program's own). */
    void (*release)(dp_model_def *def);
    /* Writes a model of this definition as ONNX, dp_model_export_onnx's
     * contract (its current weights, batch norm in inference mode, any
     * batch size). NULL: dp_model_export_onnx runs the forward once on the
     * meta device for inputs in_chw and writes each op it records by that
     * op's export rule, the initializers named and ordered as the
     * parameters and buffers; an op with no ONNX form is refused by name. */
    int (*export_onnx)(dp_model_t *m, const int64_t *in_chw, const char *path);
    /* The (C, H, W) of one sample that the definition itself declares
     * (dp_model_def_input_chw): 0, or DP_ENOENT (not logged) when it
     * declares none. NULL: it declares none; the data decide. */
    int (*input_chw)(const dp_model_def *def, int64_t chw[3]);
    /* Where pipeline stages may start, for a model whose forward_layers
     * cuts elsewhere than the tape shows: sets can_start of the n rows of
     * its dp_model_summary. NULL: the tape's answer stands (a stage may
     * start before op i when no op from i on reads a tensor made before op
     * i - 1). */
    void (*stage_starts)(const dp_model_def *def, dp_layer_summary *rows, int n);
};

/* The most parameters one model may have: 2^30, 4 GiB of float32 weights
 * (training keeps their gradients and the optimizer's state beside them).
 * A definition with more is refused with its count before anything is
 * allocated. */
#define DP_MAX_PARAMS ((int64_t)1 << 30)

/* The largest sample a model is built for: (C, H, W) up to (4096, 65536,
 * 65536), the most `dptrain model --input` takes and an ONNX graph's input
 * may declare (a summary traces such a sample on the meta device, with no
 * memory for its values). */
#define DP_MAX_INPUT_CHANNELS 4096
#define DP_MAX_INPUT_SIDE 65536

/* Builds a model of `def` on `dev`, weights drawn from `seed`. */
int dp_model_init(dp_model_t **out, const dp_model_def *def, dp_device_t *dev, uint64_t seed);
const dp_model_def *dp_model_definition(const dp_model_t *m);
const void *dp_model_user(const dp_model_t *m);
/* Parameters for batch norm layer `layer` (dp_model_def.bn_names order) in a
 * forward: training or not, and, under DataParallel's sync_bn, the
 * SyncBatchNorm group of the replicas with this replica's place in it. */
void dp_model_bn_params(const dp_model_t *m, int layer, bool train, dp_batch_norm_params *p);
/* Parameters for dropout layer `layer` (0, 1, ... in forward order) with
 * probability `prob`: its mask keyed by the seed and step of
 * dp_model_set_step and each sample's index in the whole batch, so that one
 * device and N devices drop the same elements. */
void dp_model_dropout_params(const dp_model_t *m, int layer, float prob, bool train,
                             dp_dropout_params *p);
/* Before a training forward: the run's seed, the step, and the index in the
 * global batch of x's first sample (DataParallel adds each replica's
 * offset; under mpirun the rank's). */
void dp_model_set_step(dp_model_t *m, uint64_t seed, uint64_t step, int64_t sample_offset);

/* Names of the built-in models, NULL-terminated: "lenet" (the seeds' LeNet),
 * "resnet18" (d2l's), "tutorial" (the DataParallel tutorial's Linear(5, 2)). */
const char *const *dp_model_names(void);
/* The built-in model `name` for inputs of shape in_chw = (C, H, W), NULL:
 * (1, 28, 28). lenet takes any C and H, W >= 14; resnet18 any C; tutorial
 * takes (N, 5) whatever in_chw says. */
int dp_model_builtin(const dp_model_def **out, const char *name, const int64_t *in_chw);
/* A built-in name, or else the path of an ONNX model (ending in ".onnx",
 * dp_model_def_load_onnx) or of a file of nn.Sequential modules, one a line
 * (DESIGN: the nn.Sequential text parser), for inputs in_chw. */
int dp_model_def_load(const dp_model_def **out, const char *name_or_path, const int64_t *in_chw);
/* The SHA-256 of model file `path` (64 hex digits and a NUL into hex), as
 * dp_model_def_load read it when it loaded that path, else read now: what
 * a checkpoint records of the file it was trained from, and checks a model
 * file against. DP_EINVAL for a built-in name. */
int dp_model_sha256(const char *path, char hex[65]);
/* A definition from `text`, the body of an nn.Sequential: one module a
 * line in PyTorch's constructor syntax (`Conv2d(1, 6, kernel_size=5,
 * padding=2)`, with or without `nn.`, `#` comments), for inputs in_chw
 * (NULL: 1x28x28). Parameters are named as nn.Sequential's state_dict
 * ("0.weight", "5.running_mean") and drawn as PyTorch draws each module's
 * by default; `name` (e.g. the file's path) names the model and starts
 * every error: "lenet.txt: line 8: Linear(400, 120) expects 400 inputs, the
 * layer before gives 784". Free it with dp_model_def_free once no model of
 * it is left. */
int dp_model_def_parse(dp_model_def **out, const char *text, const char *name,
                       const int64_t *in_chw);
/* A definition from an ONNX model file (what torch.onnx.export writes, opsets
 * 6 to 17): its nodes run in an order that respects their inputs, each as
 * one call of the ops of dp/ops.h; its float initializers that nodes read
 * as tensors are the parameters, named by the initializers' names (for
 * torch.onnx.export, the module's state_dict keys) and starting from their
 * values (param_values; dptrain train's --init-* draws them instead); batch
 * norm's running statistics are buffers, trained as PyTorch's training mode
 * does. One input, one output. A file that cannot be read, a node whose
 * operator or settings dptrain does not run, a value no node gives, a
 * cycle: DP_EFORMAT with one line naming the file (and the node). in_chw:
 * the data's (C, H, W), checked against the graph's input (NULL: not
 * checked). Free it with dp_model_def_free. dp_model_def_load reads a path
 * ending in ".onnx" with it. */
int dp_model_def_load_onnx(dp_model_def **out, const char *path, const int64_t *in_chw);
/* The (C, H, W) of one sample that a definition declares (its input_chw
 * entry: an ONNX model's input (N, C, H, W)): 0, or DP_ENOENT (not logged)
 * when it declares none or leaves C, H or W symbolic. */
int dp_model_def_input_chw(const dp_model_def *def, int64_t chw[3]);
/* Frees a loaded or parsed definition through its release entry; NULL and
 * definitions without one are left alone. */
void dp_model_def_free(dp_model_def *def);
/* Writes a model with its current weights as an ONNX file that ONNX Runtime
 * runs, batch norm in inference mode, for a batch of any size: through the
 * definition's export_onnx entry (an ONNX model: its own graph with its
 * initializers replaced), else (opset 17) the graph of the ops its forward
 * runs on inputs in_chw (NULL: 1x28x28), each written as torch.onnx.export
 * writes it. DP_ENOTSUP (logged, naming the op) for a forward that runs an
 * op with no ONNX form. */
int dp_model_export_onnx(dp_model_t *m, const int64_t *in_chw, const char *path);
/* One row of a model's summary, as torchinfo.summary prints it: each op
 * of a forward of one sample, in order. */
struct dp_layer_summary {
    char op[24];                /* "conv2d", "batch_norm2d", "linear", ... */
    int ndim;                   /* of the output, batch dimension included */
    int64_t shape[DP_MAX_DIMS]; /* the output for one sample: shape[0] = 1 */
    int64_t params;             /* parameters the op uses for the first time */
    int64_t flops;              /* 2 per multiply-add (conv2d, linear), else 1 per
                                   output element */
    /* A pipeline stage may start here: from the ops before it, only the
     * previous op's output (the input, for op 0) is read by this op or any
     * later one. False inside a residual block, whose sum reads the block's
     * input. */
    bool can_start;
};

/* Runs a forward of one sample of in_chw (NULL: 1x28x28) through a model of
 * `def` on the meta device (tensors with shapes and no memory, kernels that
 * run nothing: any size costs the same; a forward must not read values
 * back) and records each op: *rows (free with free()) gets *n rows. Every
 * parameter is counted once, so the rows' params sum to the model's
 * parameter count, at most DP_MAX_PARAMS. */
int dp_model_summary(const dp_model_def *def, const int64_t *in_chw, dp_layer_summary **rows,
                     int *n);

/* dp_model_builtin(name, NULL) then dp_model_init. */
int dp_model_init_builtin(dp_model_t **out, const char *name, dp_device_t *dev, uint64_t seed);
void dp_model_close(dp_model_t *m);
const char *dp_model_name(const dp_model_t *m);
dp_params_t *dp_model_params(dp_model_t *m);
/* The model's buffers (batch norm's running statistics), or NULL. */
dp_params_t *dp_model_buffers(dp_model_t *m);
/* Training forwards so far: batch norm's num_batches_tracked. */
int64_t dp_model_batches_tracked(const dp_model_t *m);
void dp_model_set_batches_tracked(dp_model_t *m, int64_t n);
/* The names of the batch norm layers ("1", "resnet_block1.0.bn1", ...), for
 * their num_batches_tracked entries; *n receives the count. */
const char *const *dp_model_bn_names(const dp_model_t *m, int *n);
dp_device_t *dp_model_device(const dp_model_t *m);
/* The output (N, classes) from x: images (N, 1, 28, 28) for lenet, (N, 5)
 * for tutorial; `train` selects training behaviour (batch statistics) where
 * a model has any. */
int dp_model_forward(dp_model_t *m, dp_tensor_t *x, bool train, dp_tensor_t **logits);
/* The ops first..last of m's forward (dp_model_def.forward_layers): DP_ENOTSUP
 * (logged) for a definition without it, DP_EINVAL (logged, naming the layer)
 * for a range out of bounds or starting or ending inside a residual block. A
 * training forward whose range starts at op 0 counts as one batch for
 * batch norm's num_batches_tracked, as dp_model_forward does; the forward
 * hook is not called. */
int dp_model_forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                            dp_tensor_t **y);

/* Called after every forward with its input and output, like PyTorch's
 * register_forward_hook (the DataParallel tutorial prints sizes here).
 * Replicas made by dp_replicate inherit it. */
typedef void (*dp_forward_hook)(const dp_model_t *m, const dp_tensor_t *input,
                                const dp_tensor_t *output, void *user);
void dp_model_set_forward_hook(dp_model_t *m, dp_forward_hook hook, void *user);

#ifdef __cplusplus
}
#endif
#endif
