/* ONNX graphs as model definitions: the graph read (onnx.h), its nodes
 * sorted into an order that runs (onnx_model.c), each node one call of
 * the public ops through the table of operators (onnx_ops.c), and the
 * graph written back with trained weights (onnx_export.c). */
#ifndef DP_ONNX_ONNX_MODEL_H
#define DP_ONNX_ONNX_MODEL_H

#include "dp/nn.h"
#include "onnx/onnx.h"

/* 64: DenseNet-201 concatenates 49 feature maps in one node. */
enum { DP__ONNX_MAX_IO = 64 };

/* A value computed on the host, never on a device: the shapes and indices
 * a graph computes from constants and from tensors' shapes (Shape, Gather,
 * Unsqueeze, Concat of such), and Clip's bounds, Reshape's target. */
typedef struct dp__onnx_host {
    int ndim;
    int64_t shape[DP__ONNX_MAX_RANK];
    int64_t numel;
    bool is_float;
    float *f;   /* numel values when is_float */
    int64_t *i; /* else */
} dp__onnx_host;

typedef enum dp__onnx_where {
    DP__OV_INPUT,  /* a graph input: index among them */
    DP__OV_PARAM,  /* a trained initializer: index among the parameters */
    DP__OV_BUFFER, /* batch norm's running statistics: index among the buffers */
    DP__OV_CONST,  /* an initializer or Constant read on the host: index among consts */
    DP__OV_NODE,   /* a node's output */
} dp__onnx_where;

typedef struct dp__onnx_value {
    const char *name;
    dp__onnx_where where;
    int index;
    int producer; /* the node making it, by its place in g->nodes; else -1 */
    int readers;  /* the node inputs and graph outputs reading it (dp__onnx_count_readers) */
    bool host;    /* computed on the host (dp__onnx_host), else a device tensor */
    int init;     /* its initializer in the graph, or -1 */
} dp__onnx_value;

struct dp__onnx_op;

/* One node: its value indices (-1: an optional input left out; in and
 * out point into the graph's one array of them, g->ports) and the
 * settings its operator read from its attributes at load. A node is some
 * 200 bytes, whatever its inputs: a chain of 100,000 nodes takes 20 MB. */
typedef struct dp__onnx_node {
    const Onnx__NodeProto *proto;
    const struct dp__onnx_op *op;
    int *in, nin; /* nin at most DP__ONNX_MAX_IO */
    int *out, nout;
    int layer; /* its place among the batch norm or the dropout layers */
    union {    /* by the operator: Conv, ConvTranspose, the pools */
        dp_conv2d_params conv;
        dp_conv_transpose2d_params deconv;
        dp_pool2d_params pool;
    };
    float a, b;   /* an activation's parameters, dropout's ratio, bn's eps and momentum */
    int64_t axis; /* Flatten, Gather, Concat */
    int64_t ints[DP__ONNX_MAX_RANK];
    int nints; /* Unsqueeze's and Squeeze's axes, Shape's start and end */
    int kind;  /* the dp_activation_kind, the weight layout, ... */
} dp__onnx_node;

typedef struct dp__onnx_graph {
    dp_model_def def; /* what dp_model_def_load_onnx gives; its user is this */
    char *name;
    Onnx__ModelProto *model; /* kept: the names point into it, export rewrites it */
    int64_t opset;
    dp__onnx_value *values;
    int nvalues;
    dp__onnx_node *nodes; /* in an order that runs */
    int nnodes;
    int *ports;                             /* every node's inputs, then outputs, as values */
    int inputs[DP__ONNX_MAX_IO], ninputs;   /* the graph's inputs, as values */
    int outputs[DP__ONNX_MAX_IO], noutputs; /* and outputs */
    dp_param_spec *params, *buffers;
    int nparams, nbuffers;
    int *param_init, *buffer_init; /* each one's initializer */
    const char **bn_names;
    char *bn_store; /* their text */
    int nbn, ndropout;
    dp__onnx_host *consts;
    int nconsts;
    float *init_values; /* the parameters' starting values, then the buffers' */
    const float *buffer_values;
    /* The first input's declared shape; -1 where it is symbolic. */
    int in_rank;
    int64_t in_shape[DP__ONNX_MAX_RANK];
    /* Where a pipeline may cut the graph (onnx_stages.c); NULL: nowhere. */
    struct dp__onnx_stages *stages;
} dp__onnx_graph;

/* What a node sees while it runs: each value's tensor or host value. */
typedef struct dp__onnx_slot {
    dp_tensor_t *t;
    dp__onnx_host *h;
    bool owned; /* h was made by this run */
} dp__onnx_slot;

typedef struct dp__onnx_run {
    const dp__onnx_graph *g;
    dp_model_t *m; /* NULL: no model (batch norm unsynced, dropout keyed by layer only) */
    bool train;
    dp_tensor_t *const *params, *const *buffers;
    dp__onnx_slot *slots;
} dp__onnx_run;

/* One operator: its ONNX op type, how many inputs it needs, which inputs it reads on the host (bit
 * i: input i must be a constant or a shape), which are batch norm's
 * running statistics (buffers), whether it computes on the host when all
 * its inputs are host values (fold), and its two functions: prep reads
 * the node's attributes at load (a one-line error naming the node for a
 * setting it cannot run), run makes its outputs. */
typedef struct dp__onnx_op {
    const char *type;
    int min_inputs; /* the inputs it cannot run without */
    unsigned host_inputs, buffer_inputs;
    int fold; /* 0: never; 1: when its inputs are host values; 2: always (Shape, Constant) */
    int (*prep)(const dp__onnx_graph *g, dp__onnx_node *n);
    int (*run)(dp__onnx_run *r, const dp__onnx_node *n);
    /* Bit i: input i may also be a host value of one number, a constant
     * operand (torch.onnx.export writes x * 0.5 as Mul of a Constant). */
    unsigned scalar_inputs;
} dp__onnx_op;

/* The operator of `type`, or NULL (onnx_ops.c). */
const dp__onnx_op *dp__onnx_find_op(const char *type);
/* The GELU that nn.GELU's exported sub-graph stands for (onnx_fuse.c),
 * exact or its tanh approximation. */
const dp__onnx_op *dp__onnx_gelu_op(bool tanh_form);
/* nn.GELU's sub-graphs become one GELU node each (onnx_fuse.c), before
 * the other nodes' operators are found. */
void dp__onnx_fuse_gelu(dp__onnx_graph *g);
/* torch's Pad of zeros before an AveragePool becomes the pool's padding
 * (onnx_fuse.c), after the nodes' attributes are read. */
void dp__onnx_fuse_pad_pool(dp__onnx_graph *g);
/* "Add, AveragePool, ...": the supported op types, for the refusal. */
const char *dp__onnx_op_names(void);

/* The node's name for messages: its name, or "#i" by its place. */
const char *dp__onnx_node_name(const dp__onnx_graph *g, const dp__onnx_node *n, char *buf,
                               size_t size);
/* Logs "<file>: node 'NAME' (TYPE): <what>" and returns DP_EFORMAT. */
int dp__onnx_node_error(const dp__onnx_graph *g, const dp__onnx_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Runs node n's operator, every error it logs (an op's own included)
 * beginning with the file and the node as dp__onnx_node_error's do. */
int dp__onnx_run_node(dp__onnx_run *r, const dp__onnx_node *n);
/* Attribute `name` of the node, or NULL. */
const Onnx__AttributeProto *dp__onnx_attr(const dp__onnx_node *n, const char *name);
int64_t dp__onnx_attr_int(const dp__onnx_node *n, const char *name, int64_t dflt);
float dp__onnx_attr_float(const dp__onnx_node *n, const char *name, float dflt);

/* Counts each value's readers anew (g->values[v].readers), after the
 * nodes' inputs change; O(nodes + inputs). */
void dp__onnx_count_readers(dp__onnx_graph *g);
/* The node whose output v is, or NULL. */
dp__onnx_node *dp__onnx_producer(const dp__onnx_graph *g, int v);
/* Binds the sorted nodes (onnx_bind.c): operators, places, roles, specs. */
int dp__onnx_bind(dp__onnx_graph *g);
/* A host value holding a tensor of the file (an initializer, a Constant). */
int dp__onnx_host_from_tensor(dp__onnx_host *h, const Onnx__TensorProto *t);
/* The operators computed on the host (onnx_fold.c): Constant, Shape,
 * Gather, Unsqueeze, Squeeze, Concat, Cast. */
int dp__onnx_prep_constant(const dp__onnx_graph *g, dp__onnx_node *n);
int dp__onnx_run_constant(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_shape(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_gather(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_unsqueeze(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_squeeze(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_concat(dp__onnx_run *r, const dp__onnx_node *n);
int dp__onnx_run_cast(dp__onnx_run *r, const dp__onnx_node *n);
/* A new host value for output k of n, owned by the run: NULL when out of
 * memory. */
dp__onnx_host *dp__onnx_new_host(dp__onnx_run *r, const dp__onnx_node *n, int k, int ndim,
                                 const int64_t *shape, bool is_float);
/* Frees a run's slots (g->nvalues of them) and the host values it made. */
void dp__onnx_free_slots(const dp__onnx_graph *g, dp__onnx_slot *slots);

/* Builds g from g->model (onnx_model.c): its values, its nodes in an order
 * that runs, bound to their operators; the first input's declared shape
 * read and checked against in_chw (NULL: not checked). */
int dp__onnx_build(dp__onnx_graph *g, const int64_t *in_chw);
/* Loads `path` for inputs in_chw (NULL: the graph's own shape)
 * (onnx_load.c). */
int dp__onnx_load(dp__onnx_graph **out, const char *path, const int64_t *in_chw);
/* The same from bytes (the fuzz target); `name` names the model. */
int dp__onnx_load_bytes(dp__onnx_graph **out, const uint8_t *data, size_t size, const char *name,
                        const int64_t *in_chw);
void dp__onnx_graph_free(dp__onnx_graph *g);

/* Runs the graph on inputs[0..g->ninputs) with the parameters and buffers
 * given (spec order); outputs[0..g->noutputs) get the outputs' tensors. A
 * model's forward is this with its own; the conformance test calls it
 * with tensors of its own. m may be NULL. */
int dp__onnx_run_graph(const dp__onnx_graph *g, dp_model_t *m, dp_tensor_t *const *params,
                       dp_tensor_t *const *buffers, dp_tensor_t *const *inputs, bool train,
                       dp_tensor_t **outputs);

/* ---- pipeline stages (onnx_stages.c) -------------------------------------
 * Cut c lies between node c - 1 and node c of the run order (cut 0 before
 * the first node, cut nnodes after the last). The device values that cross
 * it are those made before it (the graph's input among them) that are
 * needed from it on: read by a node at or after it, a graph output, or
 * read by a host node before it whose value is needed from it on (a later
 * stage computes host values again, so a Shape's tensor crosses too).
 * Parameters, buffers and constants never cross: every replica holds them.
 * A stage may start or end at a cut where exactly one device value
 * crosses. Rows are those of dp_model_summary: the ops a training forward
 * records, one for each device node that has an input needing a gradient
 * (none for host nodes and for Identity, which passes its tensor on). */
typedef struct dp__onnx_stages {
    int *ncross;    /* nnodes + 1: how many device values cross cut c */
    int *cross;     /* nnodes + 1: that value where ncross[c] is 1, else -1 */
    int *node_rows; /* nnodes + 1: the rows of the nodes before cut c */
    int *row_cut;   /* nrows + 1: the cut where a stage from row r starts, -1: none */
    int nrows;
} dp__onnx_stages;

/* Fills g->stages from the bound graph (one allocation, freed with g). */
int dp__onnx_plan_stages(dp__onnx_graph *g);
/* The definition's forward_layers: rows first..last, from the cut before
 * row first (x: the value crossing it; the graph's input for row 0) to the
 * cut after row last (*y: the value crossing it; the graph's output). */
int dp__onnx_forward_layers(dp_model_t *m, dp_tensor_t *x, int first, int last, bool train,
                            dp_tensor_t **y);
/* The definition's stage_starts: can_start of dp_model_summary's n rows
 * for an ONNX graph (def->user): row 0, and the rows where a cut of one
 * crossing value begins. */
void dp__onnx_stage_starts(const dp_model_def *def, dp_layer_summary *rows, int n);

/* The definition's export_onnx (onnx_rewrite.c): an ONNX model's own
 * graph, the initializers holding m's weights, batch norm in inference
 * mode, any batch size (in_chw unused: the graph declares its input). */
int dp__onnx_export_graph(dp_model_t *m, const int64_t *in_chw, const char *path);

#endif
