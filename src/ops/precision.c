/* Mixed precision: the precision of convolutions and matrix products for
 * the ops the calling thread issues (torch.autocast is per thread too), and
 * the process-wide way convolutions pick their kernels (as
 * torch.backends.cudnn.benchmark). Ops read both when they are called, so
 * a change never reaches work already enqueued. */
#include "ops/op.h"

#include <stdatomic.h>
#include <string.h>

static _Thread_local dp_precision thread_precision = DP_PRECISION_FP32;
static _Atomic int conv_algo = DP_CONV_ALGO_DIRECT;

static const dp_named_value precision_names[] = {{"fp32", DP_PRECISION_FP32},
                                                 {"bf16", DP_PRECISION_BF16},
                                                 {"bf16-reference", DP_PRECISION_BF16_REFERENCE}};
_Static_assert(DP_COUNTOF(precision_names) == DP_PRECISION_BF16_REFERENCE + 1,
               "a name for every precision");
const dp_name_table dp_precision_names = DP_NAME_TABLE(precision_names);
static const dp_named_value algo_names[] = {{"auto", DP_CONV_ALGO_AUTO},
                                            {"direct", DP_CONV_ALGO_DIRECT},
                                            {"winograd", DP_CONV_ALGO_WINOGRAD}};
_Static_assert(DP_COUNTOF(algo_names) == DP_CONV_ALGO_WINOGRAD + 1, "a name for every algorithm");
const dp_name_table dp_conv_algo_names = DP_NAME_TABLE(algo_names);

dp_precision dp_set_precision(dp_precision p)
{
    dp_precision old = thread_precision;
    if ((unsigned)p <= DP_PRECISION_BF16_REFERENCE)
        thread_precision = p;
    return old;
}

dp_precision dp_get_precision(void)
{
    return thread_precision;
}

const char *dp_precision_name(dp_precision p)
{
    const char *name = dp_name_of(&dp_precision_names, p);
    return name ? name : "?";
}

void dp_set_conv_algo(dp_conv_algo a)
{
    if ((unsigned)a <= DP_CONV_ALGO_WINOGRAD)
        atomic_store(&conv_algo, (int)a);
}

dp_conv_algo dp_get_conv_algo(void)
{
    return (dp_conv_algo)atomic_load(&conv_algo);
}

const char *dp_conv_algo_name(dp_conv_algo a)
{
    const char *name = dp_name_of(&dp_conv_algo_names, a);
    return name ? name : "?";
}

int dp__precision_check(const char *op, dp_device_t *dev, dp_precision p)
{
    if (p == DP_PRECISION_FP32)
        return 0;
    if (!dp_device_has(dev, DP_DEVICE_BF16)) {
        DP_ERROR("%s: %s runs float32 only: precision %s needs a CPU device", op, dev->name,
                 dp_precision_name(p));
        return DP_ENOTSUP;
    }
    if (p == DP_PRECISION_BF16 && !dp_device_has(dev, DP_DEVICE_BF16_NATIVE)) {
        DP_ERROR("%s: %s has no native bf16 kernels (AVX512-BF16 or AMX); precision "
                 "bf16-reference runs the same arithmetic on float32 kernels",
                 op, dev->name);
        return DP_ENOTSUP;
    }
    return 0;
}

int dp__as_f32(dp_tensor_t **x)
{
    return (*x)->dtype == DP_BF16 ? dp_cast(x, *x, DP_F32) : 0;
}
