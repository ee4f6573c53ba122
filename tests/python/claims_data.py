"""The initial weights and batches the claim scripts share (numpy only).

A test writes one case's arrays into a folder with `write_case(case, dir)`;
the case's script (claims_<case>.py) loads them with `load_params` and
`load_batches`, whichever library it was started with, so that `import
torch` and `import dptrain as torch` start from the same bits and see the
same batches.

Batches are learnable (each class adds its own template to the noise), so
that the losses of 20 steps move by much more than the comparisons'
tolerance: a wrong update shows as a wrong loss within a few steps.
"""
import os

import numpy as np

# case -> (parameter names and shapes in the order the script defines them,
#          input shape of one sample, classes, batch size, steps)
CASES = {
    # seed 003's from-scratch LeNet: W1 (20, 1, 3, 3) .. b4 (10), 28 x 28 inputs
    "lenet_scratch": (
        [("W1", (20, 1, 3, 3)), ("b1", (20,)), ("W2", (50, 20, 5, 5)), ("b2", (50,)),
         ("W3", (800, 128)), ("b3", (128,)), ("W4", (128, 10)), ("b4", (10,))],
        (1, 28, 28), 10, 64, 20),
    # claims_resnet_dp.py's ResidualNet, 3 x 16 x 16 inputs
    "resnet_dp": (
        [("conv1.weight", (8, 3, 3, 3)), ("conv1.bias", (8,)),
         ("bn1.weight", (8,)), ("bn1.bias", (8,)),
         ("conv2.weight", (8, 8, 3, 3)), ("conv2.bias", (8,)),
         ("bn2.weight", (8,)), ("bn2.bias", (8,)),
         ("fc.weight", (10, 512)), ("fc.bias", (10,))],
        (3, 16, 16), 10, 32, 20),
    # claims_adamw_sequential.py's Sequential, flat inputs of 20 features
    "adamw_sequential": (
        [("0.weight", (64, 20)), ("0.bias", (64,)),
         ("2.weight", (32, 64)), ("2.bias", (32,)),
         ("4.weight", (5, 32)), ("4.bias", (5,))],
        (20,), 5, 48, 20),
    # claims_dp_equiv.py's Module without batch norm (claim 2), 3 x 12 x 12 inputs
    "dp_equiv": (
        [("conv.weight", (6, 3, 3, 3)), ("conv.bias", (6,)),
         ("fc1.weight", (32, 216)), ("fc1.bias", (32,)),
         ("fc2.weight", (4, 32)), ("fc2.bias", (4,))],
        (3, 12, 12), 4, 24, 20),
}


def _param_init(rng, name, shape, classifier):
    """He-scaled normal weights (the classifier's a quarter of that, so that
    the first losses are near log(classes)), small biases, batch norm's
    gamma near 1."""
    if name.startswith("bn") and name.endswith("weight"):
        return (1.0 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) == 1:
        return (0.05 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) == 4 or not name.startswith("W"):
        fan_in = int(np.prod(shape[1:]))  # conv (K, C, R, S), nn.Linear (out, in)
    else:
        fan_in = shape[0]  # the seed's torch.mm weights (in, out)
    std = np.sqrt(2.0 / fan_in) * (0.25 if classifier else 1.0)
    return (std * rng.standard_normal(shape)).astype(np.float32)


def write_case(case, folder, seed=37):
    """Writes param_<name>.npy, X.npy (steps, B, *sample) float32 and
    y.npy (steps, B) int64 for `case` into `folder`."""
    params, sample, classes, batch, steps = CASES[case]
    rng = np.random.default_rng(seed)
    classifier = [name for name, shape in params if len(shape) > 1][-1]
    for name, shape in params:
        np.save(os.path.join(folder, f"param_{name}.npy"),
                _param_init(rng, name, shape, name == classifier))
    templates = rng.standard_normal((classes,) + sample).astype(np.float32)
    y = rng.integers(0, classes, size=(steps, batch)).astype(np.int64)
    X = 0.5 * rng.standard_normal((steps, batch) + sample).astype(np.float32) + templates[y]
    np.save(os.path.join(folder, "X.npy"), X.astype(np.float32))
    np.save(os.path.join(folder, "y.npy"), y)
    return steps


def load_params(case, folder):
    """[(name, float32 array)] in the case's order."""
    return [(name, np.load(os.path.join(folder, f"param_{name}.npy")))
            for name, _ in CASES[case][0]]


def load_batches(folder):
    """(X (steps, B, ...) float32, y (steps, B) int64)."""
    return np.load(os.path.join(folder, "X.npy")), np.load(os.path.join(folder, "y.npy"))
