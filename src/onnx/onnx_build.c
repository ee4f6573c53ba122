/* The ONNX graph builder of the exporter (onnx_build.h). */
#include "onnx/onnx_build.h"

#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *dp__ob_alloc(dp__ob_builder *b, size_t bytes)
{
    if (b->rc)
        return NULL;
    if (b->nmem == b->capmem) {
        size_t cap = b->capmem ? 2 * b->capmem : 64;
        void **mem = realloc(b->mem, cap * sizeof *mem);
        if (!mem) {
            b->rc = DP_ENOMEM;
            return NULL;
        }
        b->mem = mem;
        b->capmem = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        b->rc = DP_ENOMEM;
    else
        b->mem[b->nmem++] = p;
    return p;
}

void dp__ob_free(dp__ob_builder *b)
{
    for (size_t i = 0; i < b->nmem; i++)
        free(b->mem[i]);
    free(b->mem);
}

char *dp__ob_str(dp__ob_builder *b, const char *s)
{
    char *p = dp__ob_alloc(b, strlen(s) + 1);
    if (p)
        strcpy(p, s);
    return p;
}

/* Appends to a growing array of pointers (nodes, initializers). */
void dp__ob_push(dp__ob_builder *b, void ***arr, size_t *n, void *item)
{
    void **grown = dp__ob_alloc(b, (*n + 1) * sizeof *grown);
    if (!grown)
        return;
    if (*n)
        memcpy(grown, *arr, *n * sizeof *grown);
    grown[(*n)++] = item;
    *arr = grown;
}

void dp__ob_attr_ints(dp__ob_builder *b, Onnx__NodeProto *n, const char *name, int count,
                      const int64_t *v, bool scalar)
{
    Onnx__AttributeProto *a = dp__ob_alloc(b, sizeof *a);
    int64_t *ints = dp__ob_alloc(b, (size_t)count * sizeof *ints);
    if (!a || !ints)
        return;
    onnx__attribute_proto__init(a);
    a->name = dp__ob_str(b, name);
    a->has_type = 1;
    if (scalar) {
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
        a->has_i = 1;
        a->i = v[0];
    } else {
        a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
        memcpy(ints, v, (size_t)count * sizeof *ints);
        a->n_ints = (size_t)count;
        a->ints = ints;
    }
    dp__ob_push(b, (void ***)&n->attribute, &n->n_attribute, a);
}

void dp__ob_attr_float(dp__ob_builder *b, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = dp__ob_alloc(b, sizeof *a);
    if (!a)
        return;
    onnx__attribute_proto__init(a);
    a->name = dp__ob_str(b, name);
    a->has_type = 1;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = 1;
    a->f = v;
    dp__ob_push(b, (void ***)&n->attribute, &n->n_attribute, a);
}

/* A node of `op` reading ins[0..nin); its output's fresh name is returned. */
Onnx__NodeProto *dp__ob_node(dp__ob_builder *b, const char *op, const char *const *ins, int nin,
                             const char **out)
{
    Onnx__NodeProto *n = dp__ob_alloc(b, sizeof *n);
    char **in = dp__ob_alloc(b, (size_t)nin * sizeof *in), **outs = dp__ob_alloc(b, sizeof *outs);
    char name[32];
    snprintf(name, sizeof name, "t%d", b->next++);
    if (!n || !in || !outs)
        return NULL;
    onnx__node_proto__init(n);
    for (int i = 0; i < nin; i++)
        in[i] = dp__ob_str(b, ins[i]);
    outs[0] = dp__ob_str(b, name);
    n->n_input = (size_t)nin;
    n->input = in;
    n->n_output = 1;
    n->output = outs;
    n->op_type = dp__ob_str(b, op);
    snprintf(name, sizeof name, "%s_%zu", op, b->nnodes);
    n->name = dp__ob_str(b, name);
    dp__ob_push(b, (void ***)&b->nodes, &b->nnodes, n);
    *out = outs[0];
    return b->rc ? NULL : n;
}

/* A float initializer `name` of shape[0..ndim) holding v. */
void dp__ob_init(dp__ob_builder *b, const char *name, int ndim, const int64_t *shape,
                 const float *v)
{
    Onnx__TensorProto *t = dp__ob_alloc(b, sizeof *t);
    int64_t *dims = dp__ob_alloc(b, (size_t)ndim * sizeof *dims);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++)
        numel *= shape[d];
    uint8_t *raw = dp__ob_alloc(b, (size_t)numel * 4);
    if (!t || !dims || !raw)
        return;
    onnx__tensor_proto__init(t);
    if (ndim) /* a scalar has no shape */
        memcpy(dims, shape, (size_t)ndim * sizeof *dims);
    memcpy(raw, v, (size_t)numel * 4);
    t->n_dims = (size_t)ndim;
    t->dims = dims;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->name = dp__ob_str(b, name);
    t->has_raw_data = 1;
    t->raw_data.len = (size_t)numel * 4;
    t->raw_data.data = raw;
    dp__ob_push(b, (void ***)&b->inits, &b->ninits, t);
}

/* ---- nodes of common shapes ------------------------------------------------ */

const char *dp__ob_scalar(dp__ob_builder *b, float v)
{
    char name[32];
    snprintf(name, sizeof name, "c%d", b->next++);
    dp__ob_init(b, name, 0, NULL, &v);
    return dp__ob_str(b, name);
}

void dp__ob_window(dp__ob_builder *b, Onnx__NodeProto *n, int kh, int kw, int sh, int sw,
                   const int64_t *pads)
{
    if (!n)
        return;
    const int64_t k[2] = {kh, kw}, s[2] = {sh ? sh : 1, sw ? sw : 1};
    dp__ob_attr_ints(b, n, "kernel_shape", 2, k, false);
    dp__ob_attr_ints(b, n, "strides", 2, s, false);
    dp__ob_attr_ints(b, n, "pads", 4, pads, false);
}

/* An int64 initializer (1-D, n values): Unsqueeze's axes. */
const char *dp__ob_init_i64(dp__ob_builder *b, int n, const int64_t *v)
{
    char name[32];
    snprintf(name, sizeof name, "c%d", b->next++);
    Onnx__TensorProto *t = dp__ob_alloc(b, sizeof *t);
    int64_t *dims = dp__ob_alloc(b, sizeof *dims),
            *data = dp__ob_alloc(b, (size_t)n * sizeof *data);
    if (!t || !dims || !data)
        return "";
    onnx__tensor_proto__init(t);
    dims[0] = n;
    memcpy(data, v, (size_t)n * sizeof *data);
    t->n_dims = 1;
    t->dims = dims;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->name = dp__ob_str(b, name);
    t->n_int64_data = (size_t)n;
    t->int64_data = data;
    dp__ob_push(b, (void ***)&b->inits, &b->ninits, t);
    return t->name ? t->name : "";
}

const char *dp__ob_unary(dp__ob_builder *b, const char *op, const char *x)
{
    const char *y = x;
    dp__ob_node(b, op, &x, 1, &y);
    return y;
}

const char *dp__ob_binary(dp__ob_builder *b, const char *op, const char *x1, const char *x2)
{
    const char *ins[2] = {x1, x2}, *y = x1;
    dp__ob_node(b, op, ins, 2, &y);
    return y;
}

/* A float tensor's type: dims[d] < 0 is the symbolic batch "N". */
Onnx__ValueInfoProto *dp__ob_value_info(dp__ob_builder *b, const char *name, int ndim,
                                        const int64_t *dims)
{
    Onnx__ValueInfoProto *vi = dp__ob_alloc(b, sizeof *vi);
    Onnx__TypeProto *tp = dp__ob_alloc(b, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = dp__ob_alloc(b, sizeof *tt);
    Onnx__TensorShapeProto *sp = dp__ob_alloc(b, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dim = dp__ob_alloc(b, (size_t)ndim * sizeof *dim);
    if (!vi || !tp || !tt || !sp || !dim)
        return NULL;
    for (int d = 0; d < ndim; d++) {
        if (!(dim[d] = dp__ob_alloc(b, sizeof **dim)))
            return NULL;
        onnx__tensor_shape_proto__dimension__init(dim[d]);
        if (dims[d] < 0) {
            dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim[d]->dim_param = dp__ob_str(b, "N");
        } else {
            dim[d]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim[d]->dim_value = dims[d];
        }
    }
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    sp->n_dim = (size_t)ndim;
    sp->dim = dim;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = dp__ob_str(b, name);
    vi->type = tp;
    return vi;
}
