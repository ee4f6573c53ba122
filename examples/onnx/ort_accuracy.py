"""Runs an ONNX model dptrain exported in ONNX Runtime on Fashion-MNIST's
test set and prints its accuracy (what `dptrain eval` prints, to 4 places).

    python3 ort_accuracy.py MODEL.onnx [DATA_DIR]

DATA_DIR holds t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz
(default: Debian's /usr/share/datasets/fashion-mnist). Pixels are scaled
by 1/255, as dptrain reads them without --normalize.
"""
import gzip
import sys

import numpy as np
import onnxruntime as ort

model = sys.argv[1]
data = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
with gzip.open(data + "/t10k-images-idx3-ubyte.gz") as f:
    images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
with gzip.open(data + "/t10k-labels-idx1-ubyte.gz") as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8)
session = ort.InferenceSession(model)
name = session.get_inputs()[0].name
logits = np.concatenate([
    session.run(None, {name: (images[i:i + 500] / 255).astype(np.float32)})[0]
    for i in range(0, len(images), 500)
])
print(f"onnxruntime {ort.__version__}: test acc {np.mean(logits.argmax(1) == labels):.4f}")
