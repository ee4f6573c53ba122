#!/usr/bin/env python3
"""LeNet epoch or ResNet-18 steps in TensorFlow (CPU, oneDNN inside): a peer
of bench/lenet_vs_peers.sh and bench/resnet_vs_peers.sh.

Keras layers in NHWC (TF's CPU layout), one training step as a tf.function:
model(x, training=True), mean sparse cross-entropy on float32 logits,
tape.gradient, keras.optimizers.SGD (lr 0.2 / 0.1; the seed's summed loss
with p -= lr * g / batch is the same update).
  lenet: the seed's LeNet as bench/lenet_pytorch.py builds it (weights
    normal(0.01), biases 0).
  resnet18: d2l's ResNet-18 (tests/util/pytorch_compat.py): conv and dense
    weights normal(0.01), biases 0, BatchNormalization(epsilon 1e-5,
    momentum 0.9: PyTorch's).
--bf16: keras.mixed_precision policy "mixed_bfloat16" (float32 variables,
bfloat16 compute). --jit: tf.function(jit_compile=True) (XLA). Threads:
intra_op --threads, inter_op 1. LeNet: the step is traced (and with --jit
compiled) for both batch shapes (256 and the last batch's 96) before the
timer, and the weights put back. Output: bench/peer_data.py's contract.

  bench/.venv-tf/bin/python bench/peer_tf.py --model lenet --bf16
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_data  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def lenet(keras, init):
    L = keras.layers
    z = "zeros"
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        L.Conv2D(20, 3, activation="relu", kernel_initializer=init, bias_initializer=z),
        L.AveragePooling2D(2),                                            # (N,13,13,20)
        L.Conv2D(50, 5, activation="relu", kernel_initializer=init, bias_initializer=z),
        L.AveragePooling2D(2),                                            # (N,4,4,50)
        L.Flatten(),                                                      # (N,800)
        L.Dense(128, activation="relu", kernel_initializer=init, bias_initializer=z),
        L.Dense(10, kernel_initializer=init, bias_initializer=z)])


def resnet18(keras, init):
    L = keras.layers

    def conv(x, c, k, s=1):
        return L.Conv2D(c, k, strides=s, padding="same", kernel_initializer=init,
                        bias_initializer="zeros")(x)

    def bn(x):
        return L.BatchNormalization(epsilon=1e-5, momentum=0.9)(x)

    def residual(x, c, stride):
        y = L.ReLU()(bn(conv(x, c, 3, stride)))
        y = bn(conv(y, c, 3))
        if stride != 1:
            x = conv(x, c, 1, stride)
        return L.ReLU()(L.Add()([y, x]))

    inp = keras.Input((28, 28, 1))
    h = L.ReLU()(bn(conv(inp, 64, 3)))
    for c, first in ((64, True), (128, False), (256, False), (512, False)):
        h = residual(h, c, 1 if first else 2)
        h = residual(h, c, 1)
    h = L.GlobalAveragePooling2D()(h)
    out = L.Dense(10, kernel_initializer=init, bias_initializer="zeros")(h)
    return keras.Model(inp, out)


def main():
    ap = peer_data.arguments(__doc__)
    ap.add_argument("--jit", action="store_true", help="tf.function(jit_compile=True)")
    args = peer_data.check(ap, ap.parse_args())
    import numpy as np
    import tensorflow as tf

    keras = tf.keras
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(args.seed)
    if args.bf16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    init = keras.initializers.RandomNormal(stddev=0.01, seed=args.seed)
    model = (lenet if args.model == "lenet" else resnet18)(keras, init)
    opt = keras.optimizers.SGD(learning_rate=args.lr)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    opt.build(model.trainable_variables)

    @tf.function(jit_compile=args.jit, reduce_retracing=True)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = tf.cast(model(x, training=True), tf.float32)
            loss = loss_fn(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function(jit_compile=args.jit, reduce_retracing=True)
    def predict(x):
        return tf.argmax(model(x, training=False), axis=1)

    def step(x, y):
        return float(train_step(x, y))  # waits for the step

    header = (f"# TensorFlow {tf.__version__} CPU (keras {keras.__version__}), tf.function "
              f"train step, jit_compile={args.jit}, "
              f"{'mixed_bfloat16' if args.bf16 else 'fp32'}, NHWC, threads intra_op "
              f"{args.threads} inter_op 1, oneDNN "
              f"{os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'default (on)')}")
    if args.model == "lenet":
        saved = model.get_weights()
        tail = (args.limit_train or 60000) % args.batch_size
        for n in sorted({args.batch_size, tail} - {0}):
            step(np.zeros((n, 28, 28, 1), np.float32), np.zeros(n, np.int64))
        predict(np.zeros((1000, 28, 28, 1), np.float32))
        model.set_weights(saved)

        def accuracy(x, y):
            return sum(int((predict(x[i:i + 1000]).numpy() == y[i:i + 1000]).sum())
                       for i in range(0, x.shape[0], 1000)) / x.shape[0]

        peer_data.lenet_epochs(args, header, step, accuracy, channels_last=True)
    else:
        peer_data.resnet_steps(args, header, step, channels_last=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
