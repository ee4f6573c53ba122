/* An imported ONNX model written back (dp__onnx_export_graph): a copy of
 * its own ModelProto whose trained initializers hold the model's current
 * values, batch norm in inference mode (training_mode 0, one output), the
 * batch dimension of its inputs and outputs left free, and no stale
 * value_info. Everything else is the graph as it was read. */
#include "onnx/onnx_model.h"

#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

/* Replaces t's data by n floats (the allocator protobuf-c frees with). */
static int set_floats(Onnx__TensorProto *t, const float *v, int64_t n)
{
    uint8_t *raw = malloc((size_t)DP_MAX(n, 1) * 4);
    if (!raw)
        return DP_ENOMEM;
    memcpy(raw, v, (size_t)n * 4);
    free(t->float_data);
    free(t->double_data);
    t->float_data = NULL;
    t->double_data = NULL;
    t->n_float_data = t->n_double_data = 0;
    if (t->has_raw_data)
        free(t->raw_data.data);
    t->has_raw_data = 1;
    t->raw_data.data = raw;
    t->raw_data.len = (size_t)n * 4;
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    return 0;
}

static int set_from(Onnx__GraphProto *gp, dp_params_t *p, const int *init)
{
    if (!p)
        return 0;
    int64_t total = dp_params_numel(p);
    float *v = dp__malloc((size_t)DP_MAX(total, 1) * sizeof *v);
    if (!v)
        return DP_ENOMEM;
    int rc = dp_params_get_all(p, v);
    for (int i = 0, off = 0; rc == 0 && i < dp_params_count(p); i++) {
        int64_t n = dp_tensor_numel(dp_params_get(p, i));
        rc = set_floats(gp->initializer[init[i]], v + off, n);
        off += (int)n;
    }
    dp__free(v);
    return rc;
}

static int free_batch(Onnx__ValueInfoProto *vi)
{
    if (!vi->type || vi->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !vi->type->tensor_type || !vi->type->tensor_type->shape ||
        vi->type->tensor_type->shape->n_dim == 0)
        return 0;
    Onnx__TensorShapeProto__Dimension *d = vi->type->tensor_type->shape->dim[0];
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM)
        return 0;
    char *n = malloc(2);
    if (!n)
        return DP_ENOMEM;
    strcpy(n, "N");
    d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
    d->dim_param = n;
    return 0;
}

static void inference_bn(Onnx__GraphProto *gp)
{
    for (size_t i = 0; i < gp->n_node; i++) {
        Onnx__NodeProto *n = gp->node[i];
        if (!n->op_type || strcmp(n->op_type, "BatchNormalization") != 0)
            continue;
        for (size_t a = 0; a < n->n_attribute; a++)
            if (n->attribute[a]->name && strcmp(n->attribute[a]->name, "training_mode") == 0)
                n->attribute[a]->i = 0;
        for (size_t k = 1; k < n->n_output; k++)
            free(n->output[k]);
        n->n_output = DP_MIN(n->n_output, 1);
    }
}

int dp__onnx_export_graph(dp_model_t *m, const int64_t *in_chw, const char *path)
{
    (void)in_chw;
    const dp__onnx_graph *g = dp_model_user(m);
    size_t size = onnx__model_proto__get_packed_size(g->model);
    uint8_t *bytes = dp__malloc(size ? size : 1);
    if (!bytes)
        return DP_ENOMEM;
    onnx__model_proto__pack(g->model, bytes);
    Onnx__ModelProto *copy = onnx__model_proto__unpack(NULL, size, bytes);
    dp__free(bytes);
    if (!copy)
        return DP_ENOMEM;
    Onnx__GraphProto *gp = copy->graph;
    int rc = set_from(gp, dp_model_params(m), g->param_init);
    if (rc == 0)
        rc = set_from(gp, dp_model_buffers(m), g->buffer_init);
    inference_bn(gp);
    for (size_t i = 0; rc == 0 && i < gp->n_input; i++)
        rc = free_batch(gp->input[i]);
    for (size_t i = 0; rc == 0 && i < gp->n_output; i++)
        rc = free_batch(gp->output[i]);
    for (size_t i = 0; i < gp->n_value_info; i++)
        onnx__value_info_proto__free_unpacked(gp->value_info[i], NULL);
    gp->n_value_info = 0;
    if (rc == 0)
        rc = dp__onnx_write(copy, path);
    onnx__model_proto__free_unpacked(copy, NULL);
    return rc;
}
