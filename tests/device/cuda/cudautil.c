/* Helpers of the CUDA tests (see cudautil.h). */
#include "cudautil.h"

#include "dp/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *no_gpu_reason(void)
{
    static char why[96];
    if (!dp_cuda_built())
        return "CPU-only build";
    if (dp_cuda_device_count() == 0) {
        snprintf(why, sizeof why, "cudaGetDeviceCount = 0");
        return why;
    }
    return NULL;
}

/* Deterministic values in [-1, 1). */
void fill_random(float *v, int64_t n, uint64_t seed)
{
    uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (float)((double)(s >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
    }
}

/* max |a - b| / max |b|, the relative error in the max norm. */
double rel_error(const float *a, const float *b, int64_t n)
{
    double diff = tu_max_diff("CUDA vs CPU", a, b, n), ref = tu_max_abs("CPU", b, n);
    return diff / (ref > 1e-30 ? ref : 1e-30);
}

/* What a case gives on one device, on the host. */
typedef struct op_result {
    float *y, *grads[MAX_LEAVES];
    int64_t y_numel, numel[MAX_LEAVES];
    float loss;
} op_result;

static void op_result_free(op_result *r)
{
    free(r->y);
    for (int i = 0; i < MAX_LEAVES; i++)
        free(r->grads[i]);
}

/* Runs op, then a fixed head (flatten, linear to CLASSES, summed
 * cross-entropy) so that every output element gets a gradient, and
 * backpropagates; reads y, the loss and every leaf's gradient. */
static void run_case(const op_case *c, const char *device, op_result *r)
{
    memset(r, 0, sizeof *r);
    dp_device_t *dev;
    assert_int_equal(dp_device_open(&dev, device, 1), 0);
    dp_tape_t *tape;
    assert_int_equal(dp_tape_init(&tape, true), 0);
    dp_tensor_t *leaves[MAX_LEAVES];
    for (int i = 0; i < c->nleaves; i++) {
        const leaf_spec *l = &c->leaves[i];
        int64_t n = 1;
        for (int d = 0; d < l->ndim; d++)
            n *= l->shape[d];
        float *v = malloc((size_t)n * sizeof *v);
        fill_random(v, n, 100 + (uint64_t)i);
        if (l->positive)
            for (int64_t j = 0; j < n; j++)
                v[j] = 0.5f + fabsf(v[j]);
        assert_int_equal(dp_tensor_from_host(&leaves[i], dev, DP_F32, l->ndim, l->shape, v), 0);
        free(v);
        r->numel[i] = n;
        if (!l->positive)
            assert_int_equal(dp_tensor_set_requires_grad(leaves[i], NULL), 0);
    }
    dp_tape_begin(tape);
    dp_tensor_t *y, *flat, *logits, *loss;
    assert_int_equal(c->op(&y, leaves), 0);
    int64_t rows = dp_tensor_dim(y, 0), cols = dp_tensor_numel(y) / rows;
    assert_int_equal(dp_flatten(&flat, y), 0);
    int64_t wshape[2] = {CLASSES, cols};
    float *wv = malloc((size_t)(CLASSES * cols) * sizeof *wv);
    fill_random(wv, CLASSES * cols, 7);
    int32_t *labels = malloc((size_t)rows * sizeof *labels);
    for (int64_t i = 0; i < rows; i++)
        labels[i] = (int32_t)((i * 7 + 3) % CLASSES);
    dp_tensor_t *w, *lab;
    dp_tape_end(tape);
    assert_int_equal(dp_tensor_from_host(&w, dev, DP_F32, 2, wshape, wv), 0);
    assert_int_equal(dp_tensor_from_host(&lab, dev, DP_I32, 1, &rows, labels), 0);
    dp_tape_begin(tape);
    assert_int_equal(dp_linear(&logits, flat, w, NULL, DP_WEIGHT_OUT_IN), 0);
    assert_int_equal(dp_cross_entropy(&loss, logits, lab, DP_REDUCE_SUM), 0);
    assert_int_equal(dp_backward(loss), 0);
    dp_tape_end(tape);
    r->y_numel = dp_tensor_numel(y);
    r->y = malloc((size_t)r->y_numel * sizeof *r->y);
    assert_int_equal(dp_tensor_to_host(y, r->y, (size_t)r->y_numel * sizeof *r->y), 0);
    assert_int_equal(dp_tensor_to_host(loss, &r->loss, sizeof r->loss), 0);
    for (int i = 0; i < c->nleaves; i++) {
        dp_tensor_t *g = dp_tensor_grad(leaves[i]);
        if (!g)
            continue;
        r->grads[i] = malloc((size_t)r->numel[i] * sizeof(float));
        assert_int_equal(dp_tensor_to_host(g, r->grads[i], (size_t)r->numel[i] * sizeof(float)), 0);
    }
    assert_int_equal(dp_device_sync(dev), 0);
    dp_tape_reset(tape);
    dp_tape_close(tape);
    for (int i = 0; i < c->nleaves; i++)
        dp_tensor_free(leaves[i]);
    dp_tensor_free(w);
    dp_tensor_free(lab);
    free(wv);
    free(labels);
    dp_device_close(dev);
}

void compare_case(const op_case *c, double tol_forward, double tol_grad)
{
    op_result cpu, gpu;
    run_case(c, "cpu:0", &cpu);
    run_case(c, "cuda:0", &gpu);
    assert_int_equal(cpu.y_numel, gpu.y_numel);
    double e = rel_error(gpu.y, cpu.y, cpu.y_numel);
    if (e > tol_forward)
        fail_msg("%s: output differs from the CPU device's by %.3g (limit %.1g)", c->name, e,
                 tol_forward);
    tu_assert_close(gpu.loss, cpu.loss, tol_grad, 0.0);
    for (int i = 0; i < c->nleaves; i++) {
        if (!cpu.grads[i])
            continue;
        assert_non_null(gpu.grads[i]);
        e = rel_error(gpu.grads[i], cpu.grads[i], cpu.numel[i]);
        if (e > tol_grad)
            fail_msg("%s: gradient of input %d differs from the CPU device's by %.3g (limit %.1g)",
                     c->name, i, e, tol_grad);
    }
    op_result_free(&cpu);
    op_result_free(&gpu);
}
