"""Runs an ONNX model in ONNX Runtime (CPU) on a .npy batch and saves its
output, for tests/onnx/onnx_runtime_interop.py. It runs in the venv that
tests/onnx/cli_onnx_torchvision.sh makes (PyPI's onnxruntime and numpy, no
torch). The batch is read as dptrain reads it: uint8 images scaled by
1/255 in float32, (N, H, W) given one channel.

usage: onnx_runtime_run.py MODEL.onnx IN.npy OUT.npy
"""
import sys

import numpy as np
import onnxruntime as ort


def main(argv):
    model, inp, out = argv[1:4]
    x = np.load(inp)
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / np.float32(255)
    if x.ndim == 3:
        x = x[:, None]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    y = sess.run(None, {sess.get_inputs()[0].name: x.astype(np.float32)})[0]
    np.save(out, np.asarray(y, np.float32))
    print(f"onnxruntime {ort.__version__}: {model}: {x.shape} -> {y.shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
