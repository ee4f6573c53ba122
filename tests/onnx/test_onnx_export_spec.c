/* dp_model_export_onnx read as the ONNX specification says, not through
 * dptrain's loader (test_onnx_export's round trip shares the loader's
 * reading of every attribute; ONNX Runtime checks the exports in make
 * test-interop). The file is decoded with protobuf-c alone and run by the
 * small evaluator below, written from the operators' pages of the ONNX
 * specification (opset 17: Conv, BatchNormalization in inference mode,
 * Relu, Selu, HardSigmoid, MaxPool, AveragePool, Flatten, Gemm, with their
 * defaults), which refuses any operator, attribute value or data type it
 * does not know. Its outputs must equal the model's own eval forward
 * within 1e-5 of the largest, on:
 *   - a small nn.Sequential of a strided convolution with a 3 x 2 kernel
 *     and padding on one axis, batch norm, SELU, a ceil-mode max pool,
 *     Flatten, Linear (nn.Linear's (out, in) weight: transB) and
 *     Hardsigmoid (alpha 1/6 against ONNX's default 0.2);
 *   - the seed's LeNet (its (in, out) linear weights: no transB).
 * And each BatchNormalization's momentum is ONNX's: the weight of the
 * running statistic, 1 - PyTorch's 0.1 (inference ignores it, so only this
 * reads it; a graph trained after import would update its statistics with
 * it). */
#include "onnxutil.h"

#include "gradcheck.h"
#include "onnx.pb-c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_VALUES = 64, MAX_DIMS = 4 };

/* A float tensor of the graph, by name. */
typedef struct value {
    const char *name;
    int ndim;
    int64_t shape[MAX_DIMS];
    float *v;
} value;

typedef struct graph_run {
    value vals[MAX_VALUES];
    int n;
} graph_run;

static int64_t numel_of(const value *x)
{
    return count(x->ndim, x->shape);
}

static value *find(graph_run *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->vals[i].name, name) == 0)
            return &g->vals[i];
    fail_msg("no value '%s' in the graph", name);
    return NULL;
}

static value *add(graph_run *g, const char *name, int ndim, const int64_t *shape)
{
    assert_true(g->n < MAX_VALUES && ndim <= MAX_DIMS);
    value *x = &g->vals[g->n++];
    x->name = name;
    x->ndim = ndim;
    memcpy(x->shape, shape, (size_t)ndim * sizeof *shape);
    x->v = calloc((size_t)(count(ndim, shape) ? count(ndim, shape) : 1), sizeof *x->v);
    return x;
}

/* ---- attributes, with the specification's defaults ----------------------- */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t i = 0; i < n->n_attribute; i++)
        if (strcmp(n->attribute[i]->name, name) == 0)
            return n->attribute[i];
    return NULL;
}

static int64_t attr_int(const Onnx__NodeProto *n, const char *name, int64_t dflt)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->i : dflt;
}

static float attr_float(const Onnx__NodeProto *n, const char *name, float dflt)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a ? a->f : dflt;
}

/* ints[k] of attribute `name`, `dflt` when absent; fails on a count other
 * than k's range. */
static void attr_ints(const Onnx__NodeProto *n, const char *name, size_t want, int64_t dflt,
                      int64_t *out)
{
    const Onnx__AttributeProto *a = attr(n, name);
    if (a && a->n_ints != want)
        fail_msg("%s: %s has %zu values, not %zu", n->op_type, name, a->n_ints, want);
    for (size_t k = 0; k < want; k++)
        out[k] = a ? a->ints[k] : dflt;
}

static void no_auto_pad(const Onnx__NodeProto *n)
{
    const Onnx__AttributeProto *a = attr(n, "auto_pad");
    if (a && a->s.len && strncmp((const char *)a->s.data, "NOTSET", a->s.len) != 0)
        fail_msg("%s: auto_pad %.*s", n->op_type, (int)a->s.len, (const char *)a->s.data);
}

/* ---- the operators ---------------------------------------------------------- */

/* Conv: X (N, C, H, W), W (M, C / group, kH, kW), B (M); pads [top, left,
 * bottom, right]. */
static void conv(graph_run *g, const Onnx__NodeProto *n)
{
    value *x = find(g, n->input[0]), *w = find(g, n->input[1]);
    value *b = n->n_input > 2 && n->input[2][0] ? find(g, n->input[2]) : NULL;
    int64_t k[2], s[2], d[2], p[4], group = attr_int(n, "group", 1);
    no_auto_pad(n);
    attr_ints(n, "kernel_shape", 2, 0, k);
    attr_ints(n, "strides", 2, 1, s);
    attr_ints(n, "dilations", 2, 1, d);
    attr_ints(n, "pads", 4, 0, p);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t M = w->shape[0], Cg = w->shape[1], R = w->shape[2], S = w->shape[3];
    if ((k[0] && (k[0] != R || k[1] != S)) || Cg * group != C || M % group != 0)
        fail_msg("Conv: kernel_shape %lldx%lld, group %lld against weight [%lld, %lld, %lld, "
                 "%lld] and %lld channels",
                 (long long)k[0], (long long)k[1], (long long)group, (long long)M, (long long)Cg,
                 (long long)R, (long long)S, (long long)C);
    int64_t P = (H + p[0] + p[2] - (d[0] * (R - 1) + 1)) / s[0] + 1;
    int64_t Q = (W + p[1] + p[3] - (d[1] * (S - 1) + 1)) / s[1] + 1;
    value *y = add(g, n->output[0], 4, (int64_t[]){N, M, P, Q});
    for (int64_t i = 0; i < N; i++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t r = 0; r < P; r++)
                for (int64_t q = 0; q < Q; q++) {
                    double acc = b ? b->v[m] : 0;
                    int64_t c0 = m / (M / group) * Cg;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t u = 0; u < R; u++)
                            for (int64_t v = 0; v < S; v++) {
                                int64_t h = r * s[0] - p[0] + u * d[0];
                                int64_t x_ = q * s[1] - p[1] + v * d[1];
                                if (h >= 0 && h < H && x_ >= 0 && x_ < W)
                                    acc += (double)x->v[((i * C + c0 + c) * H + h) * W + x_] *
                                           w->v[((m * Cg + c) * R + u) * S + v];
                            }
                    y->v[((i * M + m) * P + r) * Q + q] = (float)acc;
                }
}

/* MaxPool and AveragePool (count_include_pad 0 by default): the output
 * size floor or, with ceil_mode, ceil of (H + pads - span) / stride + 1. */
static void pool(graph_run *g, const Onnx__NodeProto *n, bool max)
{
    value *x = find(g, n->input[0]);
    int64_t k[2], s[2], d[2], p[4];
    no_auto_pad(n);
    attr_ints(n, "kernel_shape", 2, 0, k);
    attr_ints(n, "strides", 2, 1, s);
    attr_ints(n, "dilations", 2, 1, d);
    attr_ints(n, "pads", 4, 0, p);
    bool ceil_mode = attr_int(n, "ceil_mode", 0), include_pad = attr_int(n, "count_include_pad", 0);
    if (!k[0] || attr_int(n, "storage_order", 0) != 0)
        fail_msg("%s: no kernel_shape, or a storage order", n->op_type);
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], out[2];
    for (int a = 0; a < 2; a++) {
        int64_t span = d[a] * (k[a] - 1) + 1, in = a ? W : H, room = in + p[a] + p[a + 2] - span;
        out[a] = (ceil_mode ? (room + s[a] - 1) / s[a] : room / s[a]) + 1;
    }
    value *y = add(g, n->output[0], 4, (int64_t[]){N, C, out[0], out[1]});
    for (int64_t i = 0; i < N * C; i++)
        for (int64_t r = 0; r < out[0]; r++)
            for (int64_t q = 0; q < out[1]; q++) {
                double acc = max ? -INFINITY : 0;
                int64_t cnt = 0;
                for (int64_t u = 0; u < k[0]; u++)
                    for (int64_t v = 0; v < k[1]; v++) {
                        int64_t h = r * s[0] - p[0] + u * d[0], w = q * s[1] - p[1] + v * d[1];
                        bool in = h >= 0 && h < H && w >= 0 && w < W;
                        bool padded = h >= -p[0] && h < H + p[2] && w >= -p[1] && w < W + p[3];
                        if (in) {
                            double e = x->v[(i * H + h) * W + w];
                            acc = max ? fmax(acc, e) : acc + e;
                        }
                        cnt += in || (include_pad && padded);
                    }
                y->v[(i * out[0] + r) * out[1] + q] = (float)(max ? acc : acc / (double)cnt);
            }
}

/* BatchNormalization in inference mode: (x - mean) / sqrt(var + epsilon)
 * scale + B, per channel (axis 1). */
static void batch_norm(graph_run *g, const Onnx__NodeProto *n)
{
    if (attr_int(n, "training_mode", 0) != 0 || n->n_output != 1)
        fail_msg("BatchNormalization: training mode");
    value *x = find(g, n->input[0]), *in[4];
    for (int i = 0; i < 4; i++)
        in[i] = find(g, n->input[i + 1]); /* scale, B, mean, var */
    double eps = attr_float(n, "epsilon", 1e-5f);
    value *y = add(g, n->output[0], x->ndim, x->shape);
    int64_t C = x->shape[1], inner = numel_of(x) / x->shape[0] / C;
    for (int64_t i = 0; i < numel_of(x); i++) {
        int64_t c = i / inner % C;
        y->v[i] = (float)(((double)x->v[i] - in[2]->v[c]) / sqrt((double)in[3]->v[c] + eps) *
                              in[0]->v[c] +
                          in[1]->v[c]);
    }
}

/* Flatten: [prod(dims before axis), prod(dims from axis)]. */
static void flatten(graph_run *g, const Onnx__NodeProto *n)
{
    value *x = find(g, n->input[0]);
    int64_t axis = attr_int(n, "axis", 1), outer = 1;
    for (int64_t i = 0; i < axis; i++)
        outer *= x->shape[i];
    value *y = add(g, n->output[0], 2, (int64_t[]){outer, numel_of(x) / outer});
    memcpy(y->v, x->v, (size_t)numel_of(x) * sizeof *y->v);
}

/* Gemm: alpha A' B' + beta C, A' = A or its transpose (transA), B' likewise;
 * C of (N) or (M, N). */
static void gemm(graph_run *g, const Onnx__NodeProto *n)
{
    value *a = find(g, n->input[0]), *b = find(g, n->input[1]);
    value *c = n->n_input > 2 && n->input[2][0] ? find(g, n->input[2]) : NULL;
    bool ta = attr_int(n, "transA", 0), tb = attr_int(n, "transB", 0);
    double alpha = attr_float(n, "alpha", 1), beta = attr_float(n, "beta", 1);
    int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
    int64_t Kb = tb ? b->shape[1] : b->shape[0], N = tb ? b->shape[0] : b->shape[1];
    if (K != Kb || (c && numel_of(c) != N && numel_of(c) != M * N))
        fail_msg("Gemm: A [%lld, %lld] (transA %d), B [%lld, %lld] (transB %d) do not fit",
                 (long long)a->shape[0], (long long)a->shape[1], ta, (long long)b->shape[0],
                 (long long)b->shape[1], tb);
    value *y = add(g, n->output[0], 2, (int64_t[]){M, N});
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)a->v[ta ? k * M + i : i * K + k] * b->v[tb ? j * K + k : k * N + j];
            double bias = c ? c->v[numel_of(c) == N ? j : i * N + j] : 0;
            y->v[i * N + j] = (float)(alpha * acc + beta * bias);
        }
}

static void unary(graph_run *g, const Onnx__NodeProto *n)
{
    value *x = find(g, n->input[0]);
    value *y = add(g, n->output[0], x->ndim, x->shape);
    const char *op = n->op_type;
    double alpha =
        attr_float(n, "alpha", strcmp(op, "Selu") == 0 ? 1.67326319217681884765625f : 0.2f);
    double gamma = attr_float(n, "gamma", 1.05070102214813232421875f);
    double beta = attr_float(n, "beta", 0.5f);
    for (int64_t i = 0; i < numel_of(x); i++) {
        double e = x->v[i];
        if (strcmp(op, "Relu") == 0)
            e = e > 0 ? e : 0;
        else if (strcmp(op, "Selu") == 0)
            e = gamma * (e > 0 ? e : alpha * (exp(e) - 1));
        else /* HardSigmoid */
            e = fmax(0, fmin(1, alpha * e + beta));
        y->v[i] = (float)e;
    }
}

/* ---- the graph -------------------------------------------------------------- */

static void load_initializer(graph_run *g, const Onnx__TensorProto *t)
{
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || t->n_dims > MAX_DIMS)
        fail_msg("initializer '%s': data type %d, %zu dims", t->name, (int)t->data_type, t->n_dims);
    value *x = add(g, t->name, (int)t->n_dims, t->dims);
    int64_t n = numel_of(x);
    if (t->has_raw_data && t->raw_data.len == (size_t)n * 4) /* little-endian floats */
        memcpy(x->v, t->raw_data.data, t->raw_data.len);
    else if (!t->has_raw_data && t->n_float_data == (size_t)n)
        memcpy(x->v, t->float_data, (size_t)n * sizeof *x->v);
    else
        fail_msg("initializer '%s': its data does not hold its %lld values", t->name, (long long)n);
}

/* The file's graph on x (N, C, H, W): its output (malloc'd), *n its count. */
static float *run_file(const char *path, const float *xv, const int64_t *xs, int64_t *n,
                       int *bn_nodes)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static uint8_t buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(len > 0 && len < sizeof buf);
    Onnx__ModelProto *mp = onnx__model_proto__unpack(NULL, len, buf);
    assert_non_null(mp);
    const Onnx__GraphProto *gp = mp->graph;
    assert_true(mp->n_opset_import == 1 && mp->opset_import[0]->version == 17);
    assert_true(gp->n_input == 1 && gp->n_output == 1);
    graph_run *g = calloc(1, sizeof *g);
    for (size_t i = 0; i < gp->n_initializer; i++)
        load_initializer(g, gp->initializer[i]);
    value *x = add(g, gp->input[0]->name, 4, xs);
    memcpy(x->v, xv, (size_t)count(4, xs) * sizeof *xv);
    *bn_nodes = 0;
    for (size_t i = 0; i < gp->n_node; i++) {
        const Onnx__NodeProto *node = gp->node[i];
        const char *op = node->op_type;
        if (node->domain && node->domain[0])
            fail_msg("node %zu: domain '%s'", i, node->domain);
        if (strcmp(op, "Conv") == 0)
            conv(g, node);
        else if (strcmp(op, "MaxPool") == 0 || strcmp(op, "AveragePool") == 0)
            pool(g, node, op[0] == 'M');
        else if (strcmp(op, "BatchNormalization") == 0) {
            batch_norm(g, node);
            /* ONNX: running = running * momentum + batch * (1 - momentum) */
            tu_assert_close(attr_float(node, "momentum", 0.9f), 0.9, 0, 1e-6);
            ++*bn_nodes;
        } else if (strcmp(op, "Flatten") == 0)
            flatten(g, node);
        else if (strcmp(op, "Gemm") == 0)
            gemm(g, node);
        else if (strcmp(op, "Relu") == 0 || strcmp(op, "Selu") == 0 ||
                 strcmp(op, "HardSigmoid") == 0)
            unary(g, node);
        else
            fail_msg("node %zu: %s is not an operator this check evaluates", i, op);
    }
    value *y = find(g, gp->output[0]->name);
    *n = numel_of(y);
    float *out = malloc((size_t)*n * sizeof *out);
    memcpy(out, y->v, (size_t)*n * sizeof *out);
    for (int i = 0; i < g->n; i++)
        free(g->vals[i].v);
    free(g);
    onnx__model_proto__free_unpacked(mp, NULL);
    return out;
}

/* m exported, then run by the evaluator on a batch of 3: the model's own
 * eval outputs within 1e-5 of the largest. */
static void export_runs_as_specified(dp_model_t *m, const int64_t *chw, const char *what,
                                     int want_bn)
{
    /* batch norm's running statistics away from 0 and 1 */
    dp_params_t *buffers = dp_model_buffers(m);
    int64_t nb = buffers ? dp_params_numel(buffers) : 0;
    if (nb) {
        float *v = malloc((size_t)nb * sizeof *v);
        ou_fill(5, v, nb, 0.5f, 1.0f);
        OK(dp_params_set(buffers, v));
        free(v);
    }
    int64_t xs[4] = {3, chw[0], chw[1], chw[2]}, nx = count(4, xs), n, ny;
    float *xv = malloc((size_t)nx * sizeof *xv);
    ou_fill(9, xv, nx, 2.0f, 0.0f);
    dp_tensor_t *x = upload(4, xs, xv);
    dp_tape_t *tape;
    OK(dp_tape_init(&tape, false));
    dp_tape_begin(tape);
    dp_tensor_t *y;
    OK(dp_model_forward(m, x, false, &y));
    ny = dp_tensor_numel(y);
    float *want = malloc((size_t)ny * sizeof *want);
    OK(dp_tensor_to_host(y, want, (size_t)ny * sizeof *want));
    dp_tape_end(tape);
    dp_tape_close(tape);
    const char *path = tu_tmp_path("spec.onnx");
    OK(dp_model_export_onnx(m, chw, path));
    int bn;
    float *got = run_file(path, xv, xs, &n, &bn);
    assert_int_equal(n, ny);
    assert_int_equal(bn, want_bn);
    double d = tu_max_rel_diff_of(what, got, want, n);
    printf("%-44s %lld outputs as the ONNX specification reads the file: %.2g of the largest "
           "from the model's own; %d BatchNormalization momentum 0.9\n",
           what, (long long)n, d, bn);
    tu_assert_at_most(d, 1e-5);
    free(want), free(got), free(xv);
    dp_tensor_free(x);
}

static void small_sequential(void **state)
{
    (void)state;
    static const char text[] = "Conv2d(1, 2, (3, 2), stride=(2, 1), padding=(1, 0))\n"
                               "BatchNorm2d(2)\n"
                               "SELU()\n"
                               "MaxPool2d(2, ceil_mode=True)\n"
                               "Flatten()\n"
                               "Linear(8, 3)\n"
                               "Hardsigmoid()\n";
    const int64_t chw[3] = {1, 6, 5};
    dp_model_def *def;
    OK(dp_model_def_parse(&def, text, "small.txt", chw));
    dp_model_t *m;
    OK(dp_model_init(&m, def, gc_dev, 3));
    export_runs_as_specified(m, chw, "conv, batch norm, SELU, pool, linear", 1);
    dp_model_close(m);
    dp_model_def_free(def);
}

static void seed_lenet(void **state)
{
    (void)state;
    const int64_t chw[3] = {1, 28, 28};
    dp_model_t *m;
    OK(dp_model_init_builtin(&m, "lenet", gc_dev, 4));
    export_runs_as_specified(m, chw, "the seed's LeNet", 0);
    dp_model_close(m);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_sequential),
        cmocka_unit_test(seed_lenet),
    };
    return tu_run(argc, argv, tests, gc_open_device_and_tmp, gc_close_device_and_tmp);
}
