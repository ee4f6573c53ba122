/* Helpers of the ONNX tests (onnxutil.h). */
#include "onnxutil.h"

#include "gradcheck.h"

#include "core/rng_mix.h"
#include "onnx/onnx_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *ou_alloc(ou_model *m, size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    void **mem = realloc(m->mem, (m->nmem + 1) * sizeof *mem);
    assert_non_null(p);
    assert_non_null(mem);
    m->mem = mem;
    m->mem[m->nmem++] = p;
    return p;
}

static char *ou_str(ou_model *m, const char *s, size_t n)
{
    char *p = ou_alloc(m, n + 1);
    memcpy(p, s, n);
    return p;
}

/* Appends item to a pointer array grown in the arena. */
static void push(ou_model *m, void ***arr, size_t *n, void *item)
{
    void **grown = ou_alloc(m, (*n + 1) * sizeof *grown);
    if (*n)
        memcpy(grown, *arr, *n * sizeof *grown);
    grown[(*n)++] = item;
    *arr = grown;
}

void ou_begin(ou_model *m, int opset)
{
    memset(m, 0, sizeof *m);
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.domain = (char *)"";
    m->opset.has_version = 1;
    m->opset.version = opset;
    m->opsets[0] = &m->opset;
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.producer_name = (char *)"dptrain tests";
    m->model.graph = &m->graph;
    m->graph.name = (char *)"test";
}

static Onnx__ValueInfoProto *value(ou_model *m, const char *name, int ndim, const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = ou_alloc(m, sizeof *vi);
    onnx__value_info_proto__init(vi);
    vi->name = ou_str(m, name, strlen(name));
    if (ndim < 0)
        return vi;
    Onnx__TypeProto *tp = ou_alloc(m, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = ou_alloc(m, sizeof *tt);
    Onnx__TensorShapeProto *sp = ou_alloc(m, sizeof *sp);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    for (int d = 0; d < ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dim = ou_alloc(m, sizeof *dim);
        onnx__tensor_shape_proto__dimension__init(dim);
        if (dims[d] < 0) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = ou_str(m, "N", 1);
        } else {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = dims[d];
        }
        push(m, (void ***)&sp->dim, &sp->n_dim, dim);
    }
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->type = tp;
    return vi;
}

void ou_input(ou_model *m, const char *name, int ndim, const int64_t *dims)
{
    push(m, (void ***)&m->graph.input, &m->graph.n_input, value(m, name, ndim, dims));
}

void ou_output(ou_model *m, const char *name)
{
    push(m, (void ***)&m->graph.output, &m->graph.n_output, value(m, name, -1, NULL));
}

static Onnx__TensorProto *tensor(ou_model *m, const char *name, int ndim, const int64_t *dims)
{
    Onnx__TensorProto *t = ou_alloc(m, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = ou_str(m, name, strlen(name));
    t->n_dims = (size_t)ndim;
    t->dims = ou_alloc(m, (size_t)ndim * sizeof *t->dims);
    if (ndim) /* a scalar's dims may be NULL */
        memcpy(t->dims, dims, (size_t)ndim * sizeof *dims);
    t->has_data_type = 1;
    push(m, (void ***)&m->graph.initializer, &m->graph.n_initializer, t);
    return t;
}

Onnx__TensorProto *ou_init(ou_model *m, const char *name, int ndim, const int64_t *dims,
                           const float *v)
{
    Onnx__TensorProto *t = tensor(m, name, ndim, dims);
    size_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= (size_t)dims[d];
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->has_raw_data = 1;
    t->raw_data.len = n * 4;
    t->raw_data.data = ou_alloc(m, n * 4);
    memcpy(t->raw_data.data, v, n * 4);
    return t;
}

Onnx__TensorProto *ou_init_i64(ou_model *m, const char *name, int n, const int64_t *v)
{
    int64_t dims[1] = {n};
    Onnx__TensorProto *t = tensor(m, name, 1, dims);
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->n_int64_data = (size_t)n;
    t->int64_data = ou_alloc(m, (size_t)n * sizeof *v);
    memcpy(t->int64_data, v, (size_t)n * sizeof *v);
    return t;
}

/* "a,b,,c" into the arena's strings ("" kept: an optional input left out). */
static void names(ou_model *m, const char *list, char ***out, size_t *n)
{
    *n = 0;
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        push(m, (void ***)out, n, ou_str(m, p, len));
        p = comma ? comma + 1 : NULL;
    }
}

Onnx__NodeProto *ou_node(ou_model *m, const char *op, const char *name, const char *ins,
                         const char *outs)
{
    Onnx__NodeProto *n = ou_alloc(m, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = ou_str(m, op, strlen(op));
    n->name = ou_str(m, name, strlen(name));
    names(m, ins, &n->input, &n->n_input);
    names(m, outs, &n->output, &n->n_output);
    push(m, (void ***)&m->graph.node, &m->graph.n_node, n);
    return n;
}

static Onnx__AttributeProto *attr(ou_model *m, Onnx__NodeProto *n, const char *name,
                                  Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = ou_alloc(m, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = ou_str(m, name, strlen(name));
    a->has_type = 1;
    a->type = type;
    push(m, (void ***)&n->attribute, &n->n_attribute, a);
    return a;
}

void ou_attr_ints(ou_model *m, Onnx__NodeProto *n, const char *name, int count, const int64_t *v)
{
    Onnx__AttributeProto *a = attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->n_ints = (size_t)count;
    a->ints = ou_alloc(m, (size_t)count * sizeof *v);
    memcpy(a->ints, v, (size_t)count * sizeof *v);
}

void ou_attr_int(ou_model *m, Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void ou_attr_float(ou_model *m, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    a->has_f = 1;
    a->f = v;
}

uint8_t *ou_pack(ou_model *m, size_t *size)
{
    *size = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = malloc(*size ? *size : 1);
    assert_non_null(buf);
    onnx__model_proto__pack(&m->model, buf);
    return buf;
}

void ou_write(ou_model *m, const char *path)
{
    size_t n;
    uint8_t *buf = ou_pack(m, &n);
    assert_int_equal(tu_write_file(path, buf, n), 0);
    free(buf);
}

void ou_free(ou_model *m)
{
    for (size_t i = 0; i < m->nmem; i++)
        free(m->mem[i]);
    free(m->mem);
    m->mem = NULL;
    m->nmem = 0;
}

const char ou_test_net_text[] = "Conv2d(1, 4, 3, padding=1)\n"
                                "BatchNorm2d(4)\n"
                                "ReLU()\n"
                                "MaxPool2d(2)\n"
                                "Flatten()\n"
                                "Linear(64, 3)\n";

void ou_fill(uint64_t seed, float *v, int64_t n, float scale, float offset)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = offset +
               scale * (float)((int)(dp__mix64(seed * 1000 + (uint64_t)i) % 2001) - 1000) / 1000.0f;
}

Onnx__NodeProto *ou_constant(ou_model *m, const char *out, int ndim, const int64_t *dims,
                             const float *v)
{
    Onnx__NodeProto *n = ou_node(m, "Constant", out, "", out);
    Onnx__AttributeProto *a = attr(m, n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    size_t count = 1;
    a->t = ou_alloc(m, sizeof *a->t);
    onnx__tensor_proto__init(a->t);
    a->t->n_dims = (size_t)ndim;
    a->t->dims = ou_alloc(m, (size_t)ndim * sizeof *dims);
    for (int d = 0; d < ndim; d++)
        count *= (size_t)(a->t->dims[d] = dims[d]);
    a->t->has_data_type = 1;
    a->t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    a->t->n_float_data = count;
    a->t->float_data = ou_alloc(m, count * sizeof *v);
    memcpy(a->t->float_data, v, count * sizeof *v);
    return n;
}

Onnx__NodeProto *ou_constant_i64(ou_model *m, const char *out, int n, const int64_t *v)
{
    Onnx__NodeProto *node = ou_node(m, "Constant", out, "", out);
    Onnx__AttributeProto *a = attr(m, node, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = ou_alloc(m, sizeof *a->t);
    onnx__tensor_proto__init(a->t);
    a->t->n_dims = 1;
    a->t->dims = ou_alloc(m, sizeof *a->t->dims);
    a->t->dims[0] = n;
    a->t->has_data_type = 1;
    a->t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    a->t->n_int64_data = (size_t)n;
    a->t->int64_data = ou_alloc(m, (size_t)n * sizeof *v);
    memcpy(a->t->int64_data, v, (size_t)n * sizeof *v);
    return node;
}

void ou_attr_string(ou_model *m, Onnx__NodeProto *n, const char *name, const char *v)
{
    Onnx__AttributeProto *a = attr(m, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.len = strlen(v);
    a->s.data = (uint8_t *)ou_str(m, v, a->s.len);
}

void ou_test_net(ou_model *m, uint64_t seed, bool flatten_as_shape_chain)
{
    float w0[36], b0[4], g1[4], b1[4], rm[4], rv[4], w5[192], b5[3];
    ou_fill(seed + 1, w0, 36, 0.5f, 0);
    ou_fill(seed + 2, b0, 4, 0.1f, 0);
    ou_fill(seed + 3, g1, 4, 0.2f, 1);
    ou_fill(seed + 4, b1, 4, 0.1f, 0);
    ou_fill(seed + 5, rm, 4, 0.1f, 0);
    ou_fill(seed + 6, rv, 4, 0.2f, 1);
    ou_fill(seed + 7, w5, 192, 0.2f, 0);
    ou_fill(seed + 8, b5, 3, 0.1f, 0);
    ou_begin(m, 17);
    ou_input(m, "input", 4, (const int64_t[]){-1, 1, 8, 8});
    ou_init(m, "0.weight", 4, (const int64_t[]){4, 1, 3, 3}, w0);
    ou_init(m, "0.bias", 1, (const int64_t[]){4}, b0);
    ou_init(m, "1.weight", 1, (const int64_t[]){4}, g1);
    ou_init(m, "1.bias", 1, (const int64_t[]){4}, b1);
    ou_init(m, "1.running_mean", 1, (const int64_t[]){4}, rm);
    ou_init(m, "1.running_var", 1, (const int64_t[]){4}, rv);
    ou_init(m, "5.weight", 2, (const int64_t[]){3, 64}, w5);
    ou_init(m, "5.bias", 1, (const int64_t[]){3}, b5);
    Onnx__NodeProto *n = ou_node(m, "Conv", "/0/Conv", "input,0.weight,0.bias", "c");
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){3, 3});
    ou_attr_ints(m, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    n = ou_node(m, "BatchNormalization", "/1/BatchNormalization",
                "c,1.weight,1.bias,1.running_mean,1.running_var", "bn,bn_mean,bn_var");
    ou_attr_float(m, n, "epsilon", 1e-5f);
    ou_attr_float(m, n, "momentum", 0.9f);
    ou_attr_int(m, n, "training_mode", 1);
    ou_node(m, "Relu", "/2/Relu", "bn", "r");
    n = ou_node(m, "MaxPool", "/3/MaxPool", "r", "p");
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){2, 2});
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){2, 2});
    if (flatten_as_shape_chain) {
        ou_init_i64(m, "zero", 1, (const int64_t[]){0});
        ou_init_i64(m, "minus_one", 1, (const int64_t[]){-1});
        ou_node(m, "Shape", "/4/Shape", "p", "s");
        ou_node(m, "Gather", "/4/Gather", "s,zero", "n1");
        ou_node(m, "Squeeze", "/4/Squeeze", "n1,zero", "n0");
        ou_node(m, "Unsqueeze", "/4/Unsqueeze", "n0,zero", "n");
        ou_node(m, "Concat", "/4/Concat", "n,minus_one", "shape");
        ou_attr_int(m, m->graph.node[m->graph.n_node - 1], "axis", 0);
        ou_node(m, "Reshape", "/4/Reshape", "p,shape", "f");
    } else {
        n = ou_node(m, "Flatten", "/4/Flatten", "p", "f");
        ou_attr_int(m, n, "axis", 1);
    }
    n = ou_node(m, "Gemm", "/5/Gemm", "f,5.weight,5.bias", "logits");
    ou_attr_int(m, n, "transB", 1);
    ou_output(m, "logits");
}

char ou_last_error[1024];
int ou_errors;

static void capture(dp_log_level level, const char *msg, void *user)
{
    (void)user;
    if (level == DP_LOG_ERROR) {
        ou_errors++;
        snprintf(ou_last_error, sizeof ou_last_error, "%s", msg);
    }
}

void ou_capture(void)
{
    ou_errors = 0;
    ou_last_error[0] = '\0';
    dp_log_set(capture, NULL);
}

struct dp__onnx_graph *ou_load(ou_model *m, const char *name)
{
    size_t n;
    uint8_t *bytes = ou_pack(m, &n);
    ou_free(m);
    dp__onnx_graph *g = NULL;
    ou_capture();
    int rc = dp__onnx_load_bytes(&g, bytes, n, name, NULL);
    dp_log_set(NULL, NULL);
    free(bytes);
    if (rc < 0)
        fail_msg("%s: refused: %s", name, ou_last_error);
    return g;
}

void ou_refused(ou_model *m, const char *name, const char *const *words)
{
    size_t n;
    uint8_t *bytes = ou_pack(m, &n);
    ou_free(m);
    dp__onnx_graph *g = NULL;
    ou_capture();
    int rc = dp__onnx_load_bytes(&g, bytes, n, name, NULL);
    dp_log_set(NULL, NULL);
    free(bytes);
    printf("%s\n", ou_last_error);
    if (rc == 0) {
        dp__onnx_graph_free(g);
        fail_msg("%s: loaded; it should be refused", name);
    }
    assert_int_equal(ou_errors, 1);
    assert_null(strchr(ou_last_error, '\n'));
    assert_int_equal(strncmp(ou_last_error, name, strlen(name)), 0);
    for (int i = 0; words[i]; i++)
        if (!strstr(ou_last_error, words[i]))
            fail_msg("'%s' is not in: %s", words[i], ou_last_error);
}

void ou_tensors(const dp__onnx_graph *g, dp_device_t *dev, dp_tensor_t **params,
                dp_tensor_t **buffers)
{
    const float *v = g->init_values;
    for (int i = 0; i < g->nparams + g->nbuffers; i++) {
        const dp_param_spec *s = i < g->nparams ? &g->params[i] : &g->buffers[i - g->nparams];
        dp_tensor_t **t = i < g->nparams ? &params[i] : &buffers[i - g->nparams];
        OK(dp_tensor_from_host(t, dev, DP_F32, s->ndim, s->shape, v));
        v += dp_tensor_numel(*t);
    }
}

void ou_free_tensors(dp_tensor_t **t, int n)
{
    for (int i = 0; i < n; i++)
        dp_tensor_free(t[i]);
}

float *ou_run(const dp__onnx_graph *g, dp_device_t *dev, dp_tensor_t *const *xs, int64_t *n,
              int64_t *shape, const char *error)
{
    enum { MAX = 64 };
    dp_tensor_t *params[MAX] = {0}, *buffers[MAX] = {0}, *outs[DP__ONNX_MAX_IO] = {0};
    assert_true(g->nparams <= MAX && g->nbuffers <= MAX);
    ou_tensors(g, dev, params, buffers);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    ou_capture();
    int rc = dp__onnx_run_graph(g, NULL, params, buffers, xs, false, outs);
    dp_log_set(NULL, NULL);
    float *v = NULL;
    if (error) {
        printf("%s\n", ou_last_error);
        assert_true(rc < 0);
        assert_int_equal(ou_errors, 1);
        assert_null(strchr(ou_last_error, '\n'));
        if (!strstr(ou_last_error, error))
            fail_msg("'%s' is not in: %s", error, ou_last_error);
    } else {
        if (rc < 0)
            fail_msg("the graph did not run: %s", ou_last_error);
        *n = dp_tensor_numel(outs[0]);
        for (int d = 0; shape && d < 4; d++)
            shape[d] = d < dp_tensor_ndim(outs[0]) ? dp_tensor_dim(outs[0], d) : 0;
        v = malloc((size_t)(*n ? *n : 1) * sizeof *v);
        assert_non_null(v);
        OK(dp_tensor_to_host(outs[0], v, (size_t)*n * sizeof *v));
    }
    dp_tape_end(tape);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    ou_free_tensors(params, g->nparams);
    ou_free_tensors(buffers, g->nbuffers);
    return v;
}

/* gc_run's build: the graph on in[0] with in[1..] as its parameters. */
static int build_graph(dp_tensor_t **out, dp_tensor_t *const *in, const void *ctx)
{
    const dp__onnx_graph *g = ctx;
    dp_tensor_t *outs[DP__ONNX_MAX_IO];
    int rc = dp__onnx_run_graph(g, NULL, in + 1, NULL, in, false, outs);
    *out = rc == 0 ? outs[0] : NULL;
    return rc;
}

void ou_gradcheck(const dp__onnx_graph *g, const char *name, int ndim, const int64_t *xs,
                  uint64_t seed, bool kink)
{
    assert_true(g->nparams + 1 <= GC_MAX_IN && g->nbuffers == 0 && g->ninputs == 1);
    /* A piecewise linear graph may kink anywhere (a clamp's bounds, not only
     * 0): steps of 1e-3 cross few of them, and retry closer where they do. */
    gc_problem p = {.name = name,
                    .build = build_graph,
                    .ctx = g,
                    .kink = kink,
                    .eps = kink ? 1e-3 : 0,
                    .seed = seed};
    int64_t numel = count(ndim, xs);
    float *x = malloc((size_t)numel * sizeof *x);
    ou_fill(seed, x, numel, 1.0f, 0.0f);
    p.in[p.nin++] = input("x", ndim, xs, x, true);
    const float *v = g->init_values;
    for (int i = 0; i < g->nparams; i++) {
        const dp_param_spec *s = &g->params[i];
        int64_t k = count(s->ndim, s->shape);
        float *w = malloc((size_t)k * sizeof *w);
        memcpy(w, v, (size_t)k * sizeof *w);
        v += k;
        p.in[p.nin++] = input(s->name, s->ndim, s->shape, w, true);
    }
    gc_run(&p);
}
