#!/usr/bin/env python3
"""The seed's LeNet in TensorFlow, for profiling against dptrain (bench/PROFILE_LENET.md).

The same network as bench/lenet_pytorch.py and src/nn/lenet.c, in TF's own
NHWC: conv 3x3 (1->20) -> relu -> avgpool 2 -> conv 5x5 (20->50) -> relu ->
avgpool 2 -> flatten 800 -> dense 128 -> relu -> dense 10; weights
N(0, 0.01^2), biases 0; summed cross-entropy and p -= lr * grad / batch
(lr 0.2, batch 256), one epoch of Fashion-MNIST (235 steps, the last one
of 96 rows) in a `tf.function` training step. --bf16 runs Keras's
mixed_bfloat16 policy (bf16 layers, f32 variables and loss). Threads:
intra_op 2, inter_op 1. The data is read from the IDX files and held in
memory before the clock starts; the first step (tracing) is outside it.

Profile with oneDNN's own timer:
  TF_ENABLE_ONEDNN_OPTS=1 ONEDNN_VERBOSE=1 python bench/profile_lenet_tf.py --bf16 --steps 5
Last line printed: `SEC_PER_EPOCH <seconds>`.
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load_train(data_dir):
    x = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 16)
    y = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 8)
    x = (x.reshape(-1, 28, 28, 1).astype(np.float32) / 255.0)
    return x, y.astype(np.int32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bf16", action="store_true", help="Keras mixed_bfloat16 policy")
    ap.add_argument("--jit", action="store_true", help="tf.function(jit_compile=True) (XLA)")
    ap.add_argument("--steps", type=int, default=0, help="stop after N timed steps (0: one epoch)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.2)
    ap.add_argument("--threads", type=int, default=2, help="intra_op threads")
    ap.add_argument("--data-dir", default=DATA_DIR)
    args = ap.parse_args()

    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    keras = tf.keras
    if args.bf16:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tf.random.set_seed(0)

    x_train, y_train = load_train(args.data_dir)
    n, bs = x_train.shape[0], args.batch_size
    init = keras.initializers.RandomNormal(stddev=0.01, seed=0)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(20, 3, activation="relu", kernel_initializer=init),
        keras.layers.AveragePooling2D(2),
        keras.layers.Conv2D(50, 5, activation="relu", kernel_initializer=init),
        keras.layers.AveragePooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu", kernel_initializer=init),
        keras.layers.Dense(10, kernel_initializer=init),
        keras.layers.Activation("linear", dtype="float32"),  # logits in f32
    ])
    opt = keras.optimizers.SGD(learning_rate=args.lr)

    @tf.function(jit_compile=args.jit)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            # mean over the batch = the seed's summed loss with lr / batch
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    batches = [(tf.constant(x_train[i:i + bs]), tf.constant(y_train[i:i + bs]))
               for i in range(0, n, bs)]
    if args.steps:
        batches = batches[:args.steps + 1]
    print(f"# tensorflow {tf.__version__}, intra_op {args.threads}, inter_op 1, "
          f"{'mixed_bfloat16' if args.bf16 else 'fp32'}, jit {args.jit}, "
          f"TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', '')}, "
          f"train {n}, batch {bs}, lr {args.lr}", flush=True)
    # trace both batch shapes (256 and the last 96) before the clock starts
    train_step(*batches[0]).numpy()
    if batches[-1][0].shape[0] != bs:
        train_step(*batches[-1]).numpy()
    print("# WARMUP_DONE", flush=True)
    t0 = time.perf_counter()
    loss = None
    for x, y in batches:
        loss = train_step(x, y)
    loss = float(loss.numpy())
    dt = time.perf_counter() - t0
    print(f"{len(batches)} steps: last loss {loss:.4f}, {dt:.3f} s, "
          f"{1000 * dt / len(batches):.2f} ms/step", flush=True)
    print(f"SEC_PER_EPOCH {dt:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
