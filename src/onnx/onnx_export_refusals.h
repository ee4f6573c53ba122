/* onnx_export_refusals.h - the export rules of the ops that have no ONNX
 * form: each refuses with one line naming the op and why. Included once,
 * by onnx_export_ops.c, after its `refuse` helper, so that the rule table
 * there finds an export_<op> for every line of the op list. */
#ifndef DP_ONNX_EXPORT_REFUSALS_H
#define DP_ONNX_EXPORT_REFUSALS_H

#define REFUSE(name, why)                                                                          \
    static int export_##name(dp__export *e, const dp__node *n)                                     \
    {                                                                                              \
        (void)e;                                                                                   \
        return refuse(n, why);                                                                     \
    }
/* The kernels ops run on: slots of the device table, never on a tape. */
#define KERNEL(name) REFUSE(name, "a kernel that ops run on, not an op of a forward")
KERNEL(fill)
KERNEL(relayout)
KERNEL(eltwise)
KERNEL(pool2d)
KERNEL(adaptive_avg_pool)
KERNEL(gemm)
KERNEL(bias_add)
KERNEL(bias_grad)
KERNEL(batch_norm)
KERNEL(batch_norm_sums)
KERNEL(batch_norm_add)
REFUSE(conv2d_pool, "a training run's conv2d + avg_pool2d in one kernel; a traced forward "
                    "records them apart")
KERNEL(accuracy)
KERNEL(optimizer_step)
KERNEL(grad_clip)
KERNEL(check_finite)
KERNEL(channel_copy)
REFUSE(cast, "mixed precision's cast, and the graph is float32")
REFUSE(cross_entropy, "a loss, which belongs to training, not to the model")
REFUSE(scatter, "DataParallel's split of a batch across devices, not part of a model")
REFUSE(gather, "DataParallel's join of the replicas' outputs, not part of a model")
KERNEL(reduce)
KERNEL(cast_int32)
REFUSE(argmax, "an index, not differentiable: never recorded")
REFUSE(eq, "a comparison, not differentiable: never recorded")
REFUSE(sum, "torch.sum of the Python front end: no ReduceSum rule yet")
REFUSE(mean, "torch.mean of the Python front end: no ReduceMean rule yet")
REFUSE(narrow, "torch.narrow of the Python front end: no Slice rule for it yet")
REFUSE(to_device, "a copy between devices, not part of a model")

#undef KERNEL
#undef REFUSE

#endif
