/* Helpers of the ONNX tests (onnxutil.h). */
#include "onnxutil.h"

#include "core/rng_mix.h"

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

static void fill(uint64_t seed, float *v, int n, float scale, float offset)
{
    for (int i = 0; i < n; i++)
        v[i] = offset +
               scale * (float)((int)(dp__mix64(seed * 1000 + (uint64_t)i) % 2001) - 1000) / 1000.0f;
}

void ou_test_net(ou_model *m, uint64_t seed, bool flatten_as_shape_chain)
{
    float w0[36], b0[4], g1[4], b1[4], rm[4], rv[4], w5[192], b5[3];
    fill(seed + 1, w0, 36, 0.5f, 0);
    fill(seed + 2, b0, 4, 0.1f, 0);
    fill(seed + 3, g1, 4, 0.2f, 1);
    fill(seed + 4, b1, 4, 0.1f, 0);
    fill(seed + 5, rm, 4, 0.1f, 0);
    fill(seed + 6, rv, 4, 0.2f, 1);
    fill(seed + 7, w5, 192, 0.2f, 0);
    fill(seed + 8, b5, 3, 0.1f, 0);
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

/* ---- torchvision's ResNet-18 ------------------------------------------------ */

/* A float initializer `name` of shape dims, U(offset +- scale) from seed. */
static void rn_init(ou_model *m, uint64_t seed, const char *name, int ndim, const int64_t *dims,
                    float scale, float offset)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= dims[d];
    float *v = malloc((size_t)n * sizeof *v);
    assert_non_null(v);
    /* Each tensor its own stream: fill's seed * 1000 + i would repeat a
     * neighbour's values in tensors of more than 1000. */
    for (int64_t i = 0; i < n; i++)
        v[i] = offset +
               scale * (float)(2.0 * (double)(dp__mix64(seed << 32 ^ (uint64_t)i) >> 11) * 0x1p-53 -
                               1.0);
    ou_init(m, name, ndim, dims, v);
    free(v);
}

/* Conv2d(cin, cout, k, stride, padding=k / 2, bias=False) named `module`
 * (its weight "module.weight", He-uniform: U(+-sqrt(6 / fan_in))), as node
 * `node` from `in` to `out`. */
static void rn_conv(ou_model *m, uint64_t *seed, const char *module, const char *node,
                    const char *in, const char *out, int64_t cin, int64_t cout, int64_t k,
                    int64_t stride)
{
    char w[128], ins[512];
    snprintf(w, sizeof w, "%s.weight", module);
    rn_init(m, ++*seed, w, 4, (const int64_t[]){cout, cin, k, k},
            sqrtf(6.0f / (float)(cin * k * k)), 0);
    snprintf(ins, sizeof ins, "%s,%s", in, w);
    Onnx__NodeProto *n = ou_node(m, "Conv", node, ins, out);
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){k, k});
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){stride, stride});
    ou_attr_ints(m, n, "pads", 4, (const int64_t[]){k / 2, k / 2, k / 2, k / 2});
}

/* BatchNorm2d(c) named `module` in training mode, as torch.onnx.export
 * writes it (the running statistics' outputs unread): weight 1, bias 0,
 * running mean 0, running variance 1, as PyTorch starts them. */
static void rn_bn(ou_model *m, const char *module, const char *node, const char *in,
                  const char *out, int64_t c)
{
    static const char *const suffix[4] = {"weight", "bias", "running_mean", "running_var"};
    char names[4][128], ins[640], outs[384];
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof names[i], "%s.%s", module, suffix[i]);
        rn_init(m, 0, names[i], 1, &c, 0, i == 0 || i == 3 ? 1.0f : 0.0f);
    }
    snprintf(ins, sizeof ins, "%s,%s,%s,%s,%s", in, names[0], names[1], names[2], names[3]);
    snprintf(outs, sizeof outs, "%s,%s_mean,%s_var", out, out, out);
    Onnx__NodeProto *n = ou_node(m, "BatchNormalization", node, ins, outs);
    ou_attr_float(m, n, "epsilon", 1e-5f);
    ou_attr_float(m, n, "momentum", 0.9f);
    ou_attr_int(m, n, "training_mode", 1);
}

/* BasicBlock layerL.B from `in` (cin channels) to `out`: conv1 (stride s),
 * bn1, relu, conv2, bn2, downsample (a 1x1 conv of stride s and a batch
 * norm) where the shape changes, Add, relu_1; node and value names as
 * torch.onnx.export gives them ("/layer2/layer2.0/conv1/Conv"). */
static void rn_block(ou_model *m, uint64_t *seed, int layer, int block, const char *in,
                     const char *out, int64_t cin, int64_t cout, int64_t stride)
{
    char mod[32], path[80], a[8][160], node[160];
    snprintf(mod, sizeof mod, "layer%d.%d", layer, block);
    snprintf(path, sizeof path, "/layer%d/%s", layer, mod);
    static const char *const part[8] = {"conv1/Conv",
                                        "bn1/BatchNormalization",
                                        "relu/Relu",
                                        "conv2/Conv",
                                        "bn2/BatchNormalization",
                                        "downsample/downsample.0/Conv",
                                        "downsample/downsample.1/BatchNormalization",
                                        "Add"};
    for (int i = 0; i < 8; i++)
        snprintf(a[i], sizeof a[i], "%s/%s_output_0", path, part[i]);
    char w[96];
#define NODE(i) (snprintf(node, sizeof node, "%s/%s", path, part[i]), node)
    snprintf(w, sizeof w, "%s.conv1", mod);
    rn_conv(m, seed, w, NODE(0), in, a[0], cin, cout, 3, stride);
    snprintf(w, sizeof w, "%s.bn1", mod);
    rn_bn(m, w, NODE(1), a[0], a[1], cout);
    ou_node(m, "Relu", NODE(2), a[1], a[2]);
    snprintf(w, sizeof w, "%s.conv2", mod);
    rn_conv(m, seed, w, NODE(3), a[2], a[3], cout, cout, 3, 1);
    snprintf(w, sizeof w, "%s.bn2", mod);
    rn_bn(m, w, NODE(4), a[3], a[4], cout);
    const char *shortcut = in;
    if (stride != 1 || cin != cout) {
        snprintf(w, sizeof w, "%s.downsample.0", mod);
        rn_conv(m, seed, w, NODE(5), in, a[5], cin, cout, 1, stride);
        snprintf(w, sizeof w, "%s.downsample.1", mod);
        rn_bn(m, w, NODE(6), a[5], a[6], cout);
        shortcut = a[6];
    }
    char ins[400];
    snprintf(ins, sizeof ins, "%s,%s", a[4], shortcut);
    ou_node(m, "Add", NODE(7), ins, a[7]);
#undef NODE
    snprintf(node, sizeof node, "%s/relu_1/Relu", path);
    ou_node(m, "Relu", node, a[7], out);
}

void ou_resnet18(ou_model *m, uint64_t seed, const int64_t *chw, int64_t classes)
{
    ou_begin(m, 17);
    ou_input(m, "input", 4, (const int64_t[]){-1, chw[0], chw[1], chw[2]});
    rn_conv(m, &seed, "conv1", "/conv1/Conv", "input", "/conv1/Conv_output_0", chw[0], 64, 7, 2);
    rn_bn(m, "bn1", "/bn1/BatchNormalization", "/conv1/Conv_output_0",
          "/bn1/BatchNormalization_output_0", 64);
    ou_node(m, "Relu", "/relu/Relu", "/bn1/BatchNormalization_output_0", "/relu/Relu_output_0");
    Onnx__NodeProto *n = ou_node(m, "MaxPool", "/maxpool/MaxPool", "/relu/Relu_output_0",
                                 "/maxpool/MaxPool_output_0");
    ou_attr_ints(m, n, "kernel_shape", 2, (const int64_t[]){3, 3});
    ou_attr_ints(m, n, "strides", 2, (const int64_t[]){2, 2});
    ou_attr_ints(m, n, "pads", 4, (const int64_t[]){1, 1, 1, 1});
    char in[96] = "/maxpool/MaxPool_output_0", out[96];
    int64_t c = 64;
    for (int layer = 1; layer <= 4; layer++)
        for (int block = 0; block < 2; block++) {
            int64_t cout = 64 << (layer - 1);
            snprintf(out, sizeof out, "/layer%d/layer%d.%d/relu_1/Relu_output_0", layer, layer,
                     block);
            rn_block(m, &seed, layer, block, in, out, c, cout, layer > 1 && block == 0 ? 2 : 1);
            snprintf(in, sizeof in, "%s", out);
            c = cout;
        }
    ou_node(m, "GlobalAveragePool", "/avgpool/GlobalAveragePool", in,
            "/avgpool/GlobalAveragePool_output_0");
    n = ou_node(m, "Flatten", "/Flatten", "/avgpool/GlobalAveragePool_output_0",
                "/Flatten_output_0");
    ou_attr_int(m, n, "axis", 1);
    float bound = 1.0f / sqrtf(512.0f);
    rn_init(m, ++seed, "fc.weight", 2, (const int64_t[]){classes, 512}, bound, 0);
    rn_init(m, ++seed, "fc.bias", 1, &classes, bound, 0);
    n = ou_node(m, "Gemm", "/fc/Gemm", "/Flatten_output_0,fc.weight,fc.bias", "logits");
    ou_attr_int(m, n, "transB", 1);
    ou_output(m, "logits");
}
