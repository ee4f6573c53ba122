"""dptrain's ONNX exports run in ONNX Runtime: the ONNX Runtime part of
tests/onnx/onnx_torchvision.py (ONNX Runtime itself runs in the venv's python,
tests/onnx/onnx_runtime_run.py).

  lenet         `dptrain train --model lenet` (one epoch of 5120
                Fashion-MNIST images, AdamW), then `dptrain export`;
  activations   the same for examples/models/lenet_activations.txt (Adam);
  batchnorm     the same for d2l's LeNet with batch normalization (chapter
                8.5: BatchNorm2d and BatchNorm1d), an nn.Sequential file
                written here;
  mobilenet_v2  the imported torchvision MobileNetV2 after
                onnx_torchvision.py's 5 SGD steps.

Each export, run by ONNX Runtime on the test images that `dptrain eval`
reads (the first 1000 of Fashion-MNIST's test set, as uint8 .npy; the
.npy test split of the MobileNetV2 run), gives the accuracy `dptrain eval`
prints, to its four decimals, and outputs within 1e-4 (relative to the
largest) of `dptrain predict --logits` on the same images; the
Fashion-MNIST models are far from chance (at least 0.3).
"""
import os

import numpy as np

from onnx_interop_util import OUT_TOL, CommandError, rel_diff, run
from pytorch_compat import DATA_DIR
from pytorch_compat_io import load

FASHION_TEST = 1000
MIN_ACC = 0.3
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                        "models")

# d2l's LeNet with batch normalization (chapter 8.5, the concise version).
BN_LENET = """Conv2d(1, 6, kernel_size=5)
BatchNorm2d(6)
Sigmoid()
AvgPool2d(kernel_size=2, stride=2)
Conv2d(6, 16, kernel_size=5)
BatchNorm2d(16)
Sigmoid()
AvgPool2d(kernel_size=2, stride=2)
Flatten()
Linear(256, 120)
BatchNorm1d(120)
Sigmoid()
Linear(120, 84)
BatchNorm1d(84)
Sigmoid()
Linear(84, 10)
"""


def eval_acc(ctx, ckpt, model, extra):
    out = run([ctx.dptrain, "eval", "--checkpoint", ckpt, "--model", model] + extra)
    for line in out.splitlines():
        if line.startswith("test acc: "):
            return line[len("test acc: "):].strip()
    raise CommandError(f"dptrain eval printed no 'test acc:' line: {out.strip()}")


def compare(ctx, rep, name, onnx_path, images, labels, logits, acc, min_acc):
    """ONNX Runtime on images against dptrain's logits and eval accuracy."""
    ort_out = os.path.join(ctx.dir, f"{name}_ort.npy")
    version = run([ctx.ort_python, os.path.join(os.path.dirname(__file__), "onnx_runtime_run.py"),
                   onnx_path, images, ort_out]).split(":")[0]
    y, want = np.load(ort_out), np.load(logits)
    d = rel_diff(y, want)
    ort_acc = f"{float(np.mean(y.argmax(1) == labels)):.4f}"
    dp_acc = f"{float(np.mean(want.argmax(1) == labels)):.4f}"
    rep.check(ort_acc == acc == dp_acc and d <= OUT_TOL and float(acc) >= min_acc,
              f"{name}: {version} on dptrain export's {os.path.basename(onnx_path)}: test acc "
              f"{ort_acc} on {len(labels)} images, dptrain eval {acc} (predict's logits "
              f"{dp_acc}); outputs within {d:.1e} of dptrain predict --logits (limit "
              f"{OUT_TOL:.0e})")


def fashion(ctx, rep, name, model, flags, images, labels):
    ckpt = os.path.join(ctx.dir, f"{name}.safetensors")
    run([ctx.dptrain, "train", "--model", model, "--epochs", 1, "--limit-train", 5120,
         "--batch-size", 64, "--limit-test", FASHION_TEST, "--progress", "never",
         "--checkpoint", ckpt] + flags)
    acc = eval_acc(ctx, ckpt, model, ["--limit-test", FASHION_TEST])
    out = os.path.join(ctx.dir, f"{name}_export.onnx")
    run([ctx.dptrain, "export", "--checkpoint", ckpt, "--model", model, "--onnx", out])
    logits = os.path.join(ctx.dir, f"{name}_logits.npy")
    run([ctx.dptrain, "predict", "--checkpoint", ckpt, "--model", model, "--logits", logits,
         images])
    compare(ctx, rep, name, out, images, labels, logits, acc, MIN_ACC)


def run_all(ctx, rep):
    print("== ONNX Runtime", flush=True)
    x, y = load(DATA_DIR, "test", FASHION_TEST)
    images = os.path.join(ctx.dir, "fashion_test.npy")
    # The IDX bytes again: load() gave them / 255 in float32, which rounds back.
    np.save(images, np.rint(x.numpy()[:, 0] * 255).astype(np.uint8))
    labels = y.numpy()
    bn_file = os.path.join(ctx.dir, "bn_lenet.txt")
    with open(bn_file, "w") as f:
        f.write(BN_LENET)
    cases = [("lenet", "lenet", ["--optimizer", "adamw", "--lr", 0.003]),
             ("activations", os.path.join(EXAMPLES, "lenet_activations.txt"),
              ["--optimizer", "adam", "--lr", 0.003]),
             ("batchnorm", bn_file, ["--optimizer", "adam", "--lr", 0.01])]
    for name, model, flags in cases:
        try:
            fashion(ctx, rep, name, model, flags, images, labels)
        except CommandError as e:
            rep.check(False, f"{name}: {e}")
    if "mobilenet_v2" not in ctx.nets.split(","):
        rep.block("mobilenet_v2 export", "--nets leaves MobileNetV2 out")
        return
    if "mobilenet_v2" in rep.blocked:
        rep.block("mobilenet_v2 export", "the imported MobileNetV2 does not load yet")
        return
    if "mobilenet_v2" not in ctx.trained:
        rep.check(False, "mobilenet_v2: no trained checkpoint to export (its checks failed)")
        return
    path, ckpt, data_dir, logits = ctx.trained["mobilenet_v2"]
    try:
        acc = eval_acc(ctx, ckpt, path, ["--dataset", "npy", "--data", data_dir])
        out = os.path.join(ctx.dir, "mobilenet_v2_export.onnx")
        run([ctx.dptrain, "export", "--checkpoint", ckpt, "--model", path, "--onnx", out])
        compare(ctx, rep, "mobilenet_v2", out, os.path.join(data_dir, "test", "images.npy"),
                np.load(os.path.join(data_dir, "test", "labels.npy")), logits, acc, 0.0)
    except CommandError as e:
        rep.check(False, f"mobilenet_v2: {e}")
