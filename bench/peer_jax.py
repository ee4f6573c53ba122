#!/usr/bin/env python3
"""LeNet epoch or ResNet-18 steps in JAX (XLA on the CPU, jax.jit): a peer of
bench/lenet_vs_peers.sh and bench/resnet_vs_peers.sh.

Plain jax.numpy and jax.lax.conv_general_dilated (no flax), NHWC
activations and HWIO weights (the layout XLA's CPU convolutions take), one
jitted step: forward, mean cross-entropy, jax.grad, SGD p -= lr * g (the
seed's summed loss with p -= lr * g / batch is the same update).
  lenet: the seed's LeNet as bench/lenet_pytorch.py builds it (weights
    randn*0.01, biases 0).
  resnet18: d2l's ResNet-18 (tests/util/pytorch_compat.py): conv weights
    normal(0.01), conv biases 0, batch norm on the batch's statistics (eps
    1e-5; the running averages, which no step reads, are not kept).
--bf16: weights kept in float32, cast with the inputs to bfloat16 for the
forward (as Keras' mixed_bfloat16 does), loss in float32.
Threads: XLA's CPU thread pool is as wide as the CPUs the process may use;
peer_data.check narrows that to --threads (sched_setaffinity, as taskset).
Compiling is done before the timer, for both LeNet batch shapes (256 and the
last batch's 96), on a copy of the weights. Output: peer_data's contract.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_data  # noqa: E402


def main():
    ap = peer_data.arguments(__doc__)
    args = peer_data.check(ap, ap.parse_args())
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    cdt = jnp.bfloat16 if args.bf16 else jnp.float32
    key = jax.random.PRNGKey(args.seed)

    def conv(x, w, stride=1, pad="VALID"):
        return lax.conv_general_dilated(x.astype(cdt), w.astype(cdt), (stride, stride), pad,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def avg_pool(x):  # 2x2, stride 2, floor as PyTorch's: (N,H,W,C) -> (N,H//2,W//2,C)
        n, h, w, c = x.shape
        h, w = h // 2, w // 2
        return x[:, :2 * h, :2 * w].reshape(n, h, 2, w, 2, c).mean((2, 4))

    def normal(shape, std=0.01):
        nonlocal key
        key, sub = jax.random.split(key)
        return jax.random.normal(sub, shape, jnp.float32) * std

    if args.model == "lenet":
        params = {"w1": normal((3, 3, 1, 20)), "b1": jnp.zeros(20),
                  "w2": normal((5, 5, 20, 50)), "b2": jnp.zeros(50),
                  "w3": normal((800, 128)), "b3": jnp.zeros(128),
                  "w4": normal((128, 10)), "b4": jnp.zeros(10)}

        def forward(p, x):
            h = avg_pool(jax.nn.relu(conv(x, p["w1"]) + p["b1"].astype(cdt)))   # (N,13,13,20)
            h = avg_pool(jax.nn.relu(conv(h, p["w2"]) + p["b2"].astype(cdt)))   # (N,4,4,50)
            h = h.reshape(h.shape[0], -1)                                       # (N,800)
            h = jax.nn.relu(h @ p["w3"].astype(cdt) + p["b3"].astype(cdt))
            return h @ p["w4"].astype(cdt) + p["b4"].astype(cdt)
    else:
        def block(cin, cout, stride):
            b = {"w1": normal((3, 3, cin, cout)), "c1": jnp.zeros(cout),
                 "w2": normal((3, 3, cout, cout)), "c2": jnp.zeros(cout),
                 "g1": jnp.ones(cout), "be1": jnp.zeros(cout),
                 "g2": jnp.ones(cout), "be2": jnp.zeros(cout)}
            if stride != 1:
                b["w3"], b["c3"] = normal((1, 1, cin, cout)), jnp.zeros(cout)
            return b

        blocks, strides = [], []
        for cin, cout, first in ((64, 64, True), (64, 128, False), (128, 256, False),
                                 (256, 512, False)):
            for i in range(2):
                s = 2 if (i == 0 and not first) else 1
                blocks.append(block(cin if i == 0 else cout, cout, s))
                strides.append(s)
        params = {"w0": normal((3, 3, 1, 64)), "c0": jnp.zeros(64), "g0": jnp.ones(64),
                  "be0": jnp.zeros(64), "blocks": blocks,
                  "fc": normal((512, 10)), "fcb": jnp.zeros(10)}

        def bn(x, g, b):  # batch statistics over N, H, W, in float32
            xf = x.astype(jnp.float32)
            mean = xf.mean((0, 1, 2))
            var = ((xf - mean) ** 2).mean((0, 1, 2))
            return ((xf - mean) * lax.rsqrt(var + 1e-5) * g + b).astype(cdt)

        def forward(p, x):
            h = jax.nn.relu(bn(conv(x, p["w0"], 1, "SAME") + p["c0"].astype(cdt),
                               p["g0"], p["be0"]))
            for b, s in zip(p["blocks"], strides):
                y = jax.nn.relu(bn(conv(h, b["w1"], s, ((1, 1), (1, 1))) + b["c1"].astype(cdt),
                                   b["g1"], b["be1"]))
                y = bn(conv(y, b["w2"], 1, "SAME") + b["c2"].astype(cdt), b["g2"], b["be2"])
                if "w3" in b:
                    h = conv(h, b["w3"], s) + b["c3"].astype(cdt)
                h = jax.nn.relu(y + h)
            h = h.astype(jnp.float32).mean((1, 2))                             # (N,512)
            return h.astype(cdt) @ p["fc"].astype(cdt) + p["fcb"].astype(cdt)

    def loss_fn(p, x, y):
        logits = forward(p, x).astype(jnp.float32)
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1).mean()

    @jax.jit
    def train_step(p, x, y):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y)
        return jax.tree_util.tree_map(lambda w, d: w - args.lr * d, p, g), loss

    predict = jax.jit(lambda p, x: jnp.argmax(forward(p, x), 1))
    state = {"p": params}

    def step(x, y):
        state["p"], loss = train_step(state["p"], x, y.astype(np.int32))
        return float(loss)  # waits for the step

    header = (f"# JAX {jax.__version__} (jaxlib, XLA CPU), jit, plain jax.numpy + "
              f"lax.conv_general_dilated, NHWC, {'bf16' if args.bf16 else 'fp32'}, "
              f"threads {len(os.sched_getaffinity(0))} (CPUs usable)")
    if args.model == "lenet":
        # Compile both batch shapes before the timer; the results are dropped.
        tail = (args.limit_train or 60000) % args.batch_size
        for n in {args.batch_size, tail} - {0}:
            xs = np.zeros((n, 28, 28, 1), np.float32)
            jax.block_until_ready(train_step(params, xs, np.zeros(n, np.int32)))
            jax.block_until_ready(predict(params, np.zeros((1000, 28, 28, 1), np.float32)))

        def accuracy(x, y):
            return sum(int((np.asarray(predict(state["p"], x[i:i + 1000])) ==
                            y[i:i + 1000]).sum()) for i in range(0, x.shape[0], 1000)) / x.shape[0]

        peer_data.lenet_epochs(args, header, step, accuracy, channels_last=True)
    else:
        peer_data.resnet_steps(args, header, step, channels_last=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
