#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus, tests/fuzz/corpus/<target>/.

Small valid and near-valid inputs in the form each entry point reads them
(tests/fuzz/fuzz_entry.h): IDX files behind a mode byte, CIFAR-10 batch
files, safetensors files,
LeNet checkpoints, command lines, one argument per line, .npy files,
PNG and JPEG images (the JPEGs written once by libjpeg-turbo, kept as hex),
and ONNX files of If and Loop bodies (tests/tools/hostile_onnx.py), and
the transform target's JPEGs and PNGs (tests/fuzz/corpus_transform.py, Pillow). The files are
checked in; run this again only to change them:

    tests/fuzz/make_corpus.py [path/to/dptrain]

With a dptrain binary, the checkpoint corpus also gets a real LeNet
checkpoint (one epoch on 64 samples; needs Fashion-MNIST). The output is
deterministic, except for that checkpoint's weights and timings.
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import corpus_images
import corpus_shards
import corpus_transform

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- idx: a mode byte, then the file ---------------------------------------

def idx(dims, payload=None, type_code=0x08):
    n = 1
    for d in dims:
        n *= d
    if payload is None:
        payload = bytes((7 * i + 3) % 256 for i in range(n))
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


PLAIN, GZIP = b"\x00", b"\x01"


def gzip_mode(crc=False, cut=0):
    return bytes([1 | (2 if crc else 0) | (cut << 2)])


def idx_corpus():
    labels = idx([5], bytes([0, 9, 3, 1, 7]))
    images = idx([2, 3, 3])
    put("idx", "labels-plain", PLAIN + labels)
    put("idx", "images-plain", PLAIN + images)
    put("idx", "images-4d-plain", PLAIN + idx([1, 2, 2, 2]))
    put("idx", "empty-dim-plain", PLAIN + idx([0, 28, 28]))
    put("idx", "labels-gzip", GZIP + labels)
    put("idx", "images-gzip", GZIP + images)
    # A gzip stream as the file itself: its bytes are the fuzzer's to mutate.
    put("idx", "images-gzip-file", PLAIN + gzip.compress(images, mtime=0))
    put("idx", "labels-gzip-file", PLAIN + gzip.compress(labels, mtime=0))
    # Near-valid: each breaks one rule.
    put("idx", "truncated-plain", PLAIN + images[:-3])
    put("idx", "trailing-plain", PLAIN + images + b"\x00")
    put("idx", "wrong-type-plain", PLAIN + idx([4], type_code=0x0D))
    put("idx", "five-dims-plain", PLAIN + bytes([0, 0, 8, 5]) + struct.pack(">5I", 1, 1, 1, 1, 1) + b"\x00")
    put("idx", "huge-dims-plain", PLAIN + bytes([0, 0, 8, 3]) + struct.pack(">3I", 60000, 28, 28))
    put("idx", "header-only-plain", PLAIN + bytes([0, 0, 8]))
    put("idx", "bad-crc-gzip", gzip_mode(crc=True) + images)
    put("idx", "cut-trailer-gzip", gzip_mode(cut=4) + images)
    put("idx", "cut-deep-gzip", gzip_mode(cut=20) + images)


# ---- cifar10: a batch file, records of a label byte and 3072 pixel bytes ----

def cifar_record(label, seed):
    return bytes([label]) + bytes((seed * 31 + 7 * i) % 256 for i in range(3072))


def model_corpus():
    lenet = open(os.path.join(HERE, "..", "..", "examples", "models", "d2l_lenet.txt"), "rb").read()
    put("model", "d2l-lenet", lenet)
    put("model", "bn-dropout", b"Conv2d(1, 4, 3, padding=1)\nBatchNorm2d(4)\nReLU()\n"
        b"MaxPool2d(2, padding=1)\nFlatten()\nLinear(4 * 15 * 15, 32)\nBatchNorm1d(32)\n"
        b"Dropout(p=0.5)\nTanh()\nLinear(32, 10)\n")
    put("model", "pairs-and-nn", b"nn.Conv2d(1, 2, kernel_size=(3, 5), stride=(1, 2))\n"
        b"nn.AdaptiveAvgPool2d((2, 2)),\nnn.Flatten()\nnn.Linear(in_features=8, out_features=10)\n")
    put("model", "shape-mismatch", lenet.replace(b", padding=2", b""))
    put("model", "unknown-module", b"Conv3d(1, 2, 3)\n")
    put("model", "bad-syntax", b"Linear(784, 10\n")
    put("model", "empty", b"")


def cifar10_corpus():
    put("cifar10", "one-record", cifar_record(3, 1))
    put("cifar10", "three-records", cifar_record(0, 2) + cifar_record(9, 3) + cifar_record(5, 4))
    # Near-valid: each breaks one rule.
    put("cifar10", "short-record", cifar_record(1, 5)[:-1])
    put("cifar10", "trailing-byte", cifar_record(1, 6) + b"\x00")
    put("cifar10", "label-10", cifar_record(2, 7) + cifar_record(10, 8))
    put("cifar10", "label-255", cifar_record(255, 9))
    put("cifar10", "empty", b"")


# ---- safetensors ------------------------------------------------------------

def safetensors(tensors, meta=None, pad=True):
    """tensors: (name, dtype, shape, bytes) in data order."""
    header = {}
    if meta is not None:
        header["__metadata__"] = meta
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-(8 + len(h)) % 8)
    return struct.pack("<Q", len(h)) + h + data


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def safetensors_corpus():
    put("safetensors", "one-f32", safetensors([("w", "F32", [2, 2], f32(1, 2, 3, 4))]))
    put("safetensors", "every-dtype", safetensors([
        ("a.weight", "F32", [3], f32(0.5, -1, 2)),
        ("a.steps", "I64", [], struct.pack("<q", 12)),
        ("b.index", "I32", [2], struct.pack("<2i", -3, 7)),
        ("c.bytes", "U8", [1, 5], b"\x01\x02\x03\x04\x05"),
    ], meta={"format": "pt", "dptrain.model": "lenet"}))
    put("safetensors", "empty-header", safetensors([]))
    put("safetensors", "metadata-only", safetensors([], meta={"k": "v", "x": ""}))
    put("safetensors", "zero-length", safetensors([
        ("z", "F32", [0, 4], b""), ("w", "F32", [1], f32(1))]))
    put("safetensors", "escaped-names", safetensors([
        ("tab\tquote\"slash\\", "U8", [1], b"\x01"),
        ("caf\u00e9 \U0001f600", "U8", [2], b"\x02\x03")], meta={"n\u00e9": "\u2603\n"}))
    put("safetensors", "unpadded", safetensors([("w", "I32", [1], struct.pack("<i", 5))], pad=False))
    hand = b'{"w": {"data_offsets": [0, 4], "shape": [1], "dtype": "F32"}, "__metadata__": {}}'
    put("safetensors", "key-order", struct.pack("<Q", len(hand)) + hand + f32(1))
    # Near-valid: each breaks one rule.
    good = safetensors([("w", "F32", [2, 2], f32(1, 2, 3, 4))])
    put("safetensors", "truncated-data", good[:-2])
    put("safetensors", "trailing-data", good + b"\x00\x00\x00\x00")
    put("safetensors", "size-too-big", struct.pack("<Q", 1 << 40) + good[8:])
    put("safetensors", "short", b"\x10\x00\x00")
    ov = b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}'
    put("safetensors", "overlap", struct.pack("<Q", len(ov)) + ov + b"\x01\x02\x03")
    bad_utf8 = b'{"\xc3\x28":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    put("safetensors", "bad-utf8", struct.pack("<Q", len(bad_utf8)) + bad_utf8 + b"\x00")
    surrogate = b'{"\\ud83d\\ude00\\ud800":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}'
    put("safetensors", "lone-surrogate", struct.pack("<Q", len(surrogate)) + surrogate + b"\x00")
    big = b'{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'
    put("safetensors", "shape-overflow", struct.pack("<Q", len(big)) + big)


# ---- checkpoint -------------------------------------------------------------

# The DataParallel tutorial's Linear(5, 2) (src/nn/tutorial.c): small enough
# to make every part of a resumable checkpoint in a few hundred bytes.
TUTORIAL = [("fc.weight", [2, 5]), ("fc.bias", [2])]

STATE = {"dptrain.model": "tutorial", "dptrain.epochs_done": "1", "dptrain.step": "4",
         "dptrain.seed": "0", "dptrain.batch_size": "30", "dptrain.lr": "0.2",
         "dptrain.momentum": "0.9", "dptrain.weight_decay": "0", "dptrain.devices": "cpu:0",
         "dptrain.history": "0 2.3 0.1 0.1 1.5 40 100"}


def weights(shapes, grow=0):
    out = []
    for name, shape in shapes:
        shape = [shape[0] + grow] + shape[1:]
        n = 1
        for d in shape:
            n *= d
        out.append((name, "F32", shape, f32(*[0.125 * (i % 7) for i in range(n)])))
    return out


# Metadata from elsewhere: a model file the checkpoint may not choose (a
# path, one with a newline, one with a recorded SHA-256), class names of
# every wrong type, and numbers past every range.
HOSTILE_METADATA = {
    "model-passwd": {"dptrain.model": "/etc/passwd"},
    "model-relative": {"dptrain.model": "../../model.txt"},
    "model-newline": {"dptrain.model": "x\n\x1b[31mred.onnx"},
    "model-sha": {"dptrain.model": "net.txt", "dptrain.model_sha256": "0" * 64},
    "classes-numbers": {"dptrain.classes": "[1,2,3]"},
    "classes-object": {"dptrain.classes": '{"a":1}'},
    "classes-null": {"dptrain.classes": '["a",null]'},
    "classes-unclosed": {"dptrain.classes": '["a"'},
    "classes-escapes": {"dptrain.classes": '["a\\nb","\\u202e","it\'s"]'},
    "input-huge": {"dptrain.input": "99999999999,1,1"},
    "input-negative": {"dptrain.input": "1,-28,28"},
    "normalize-bad": {"dptrain.normalize": "0.5,0"},
    "counts-huge": {"dptrain.step": "99999999999999999999", "dptrain.batch": "9223372036854775807",
                    "dptrain.partial": "1e308 1e308 1e308"},
    "best-future": {"dptrain.best": "0.9 99"},
}


def hostile_metadata_corpus(tensors):
    for name, meta in HOSTILE_METADATA.items():
        put("checkpoint", "meta-" + name, safetensors(tensors, meta=dict(STATE, **meta)))


def checkpoint_corpus(dptrain):
    w = weights(TUTORIAL)
    velocity = [("_state.sgd.velocity", "F32", [12], f32(*[0.01] * 12))]
    put("checkpoint", "tutorial-state-dict", safetensors(w, meta={"dptrain.model": "tutorial"}))
    put("checkpoint", "tutorial-resumable", safetensors(w + velocity, meta=STATE))
    put("checkpoint", "tutorial-mid-epoch", safetensors(w + velocity, meta=dict(
        STATE, **{"dptrain.batch": "3", "dptrain.partial": "2.5 17 0.25"})))
    put("checkpoint", "tutorial-wrong-shape", safetensors(weights(TUTORIAL, grow=1),
                                                          meta={"dptrain.model": "tutorial"}))
    put("checkpoint", "tutorial-no-momentum", safetensors(w, meta=STATE))
    put("checkpoint", "tutorial-bad-history", safetensors(w + velocity, meta=dict(
        STATE, **{"dptrain.history": "0 2.3 x"})))
    put("checkpoint", "tutorial-big-counts", safetensors(w + velocity, meta=dict(
        STATE, **{"dptrain.epochs_done": "9223372036854775807", "dptrain.lr": "nan"})))
    put("checkpoint", "tutorial-extra-tensor", safetensors(
        w + [("fc.extra", "F32", [1], f32(0))], meta={"dptrain.model": "tutorial"}))
    put("checkpoint", "lenet-missing", safetensors(weights([("W1", [20, 1, 3, 3])])))
    put("checkpoint", "resnet18-named", safetensors(w, meta={"dptrain.model": "resnet18"}))
    hostile_metadata_corpus(w + velocity)
    if not dptrain:
        return
    # A real LeNet checkpoint (516 KB of weights, no momentum).
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "lenet.safetensors")
        subprocess.run([dptrain, "train", "--limit-train", "64", "--limit-test", "64",
                        "--epochs", "1", "--batch-size", "64", "--progress", "never",
                        "--checkpoint", ck], check=True, stdout=subprocess.DEVNULL)
        with open(ck, "rb") as f:
            put("checkpoint", "dptrain-lenet", f.read())


# ---- cli: one argument per line ---------------------------------------------

CLI = {
    "train-defaults": ["train"],
    "train-help": ["train", "--help"],
    "train-full": ["train", "--model", "lenet", "--devices", "2", "--allreduce", "naive",
                   "--threads", "1", "--batch-size", "256", "--lr", "0.2", "--momentum", "0.9",
                   "--weight-decay", "1e-4", "--epochs", "10", "--seed", "7", "--data", "/tmp",
                   "--metrics", "m.jsonl", "--log-steps", "--plot", "p.png", "--no-shuffle",
                   "--limit-train", "600", "--limit-test", "100", "--sync-bn",
                   "--checkpoint", "c.safetensors", "--progress", "never"],
    "train-resume": ["train", "--resume", "c.safetensors", "--epochs", "3"],
    "train-init-resume": ["train", "--init", "a", "--resume", "b"],
    "train-bad-lr": ["train", "--lr", "1e309"],
    "train-bad-int": ["train", "--epochs", "99999999999999999999"],
    "train-no-value": ["train", "--batch-size"],
    "train-plot-svg": ["train", "--plot", ".svg"],
    "train-unknown": ["train", "--epoch", "2"],
    "eval": ["eval", "--checkpoint", "c.safetensors", "--model", "resnet18", "--devices",
             "cpu:0,cpu:1", "--threads", "0", "--batch-size", "512", "--data", "/d",
             "--limit-test", "10"],
    "eval-missing": ["eval", "--model", "lenet"],
    "train-dataset": ["train", "--dataset", "cifar10", "--data", "/d"],
    "train-bad-dataset": ["train", "--dataset", "cifar-10"],
    "eval-dataset": ["eval", "--checkpoint", "c.safetensors", "--dataset", "mnist", "--data", "/d"],
    "eval-help": ["eval", "-h"],
    "train-folder": ["train", "--dataset", "folder", "--data", "/d", "--channels", "3"],
    "predict": ["predict", "--checkpoint", "c.safetensors", "--topk", "3", "--devices", "2",
                "a.png", "b.jpg"],
    "predict-npy": ["predict", "--checkpoint=c.safetensors", "batch.npy"],
    "predict-flag-after": ["predict", "--checkpoint", "c.safetensors", "a.png", "--topk", "2"],
    "demo-async": ["demo", "async", "--ops", "100"],
    "demo-scratch": ["demo", "scratch", "--devices", "2", "--allreduce", "ring", "--steps", "234"],
    "demo-bad-steps": ["demo", "scratch", "--steps", "0x10"],
    "demo-unknown": ["demo", "nope", "--ops", "-1"],
    "demo-none": ["demo"],
    "unknown-command": ["bench", "--x"],
}


def cli_corpus():
    for name, argv in CLI.items():
        put("cli", name, "\n".join(argv).encode())


# ---- the dataset loaders over files and the parsers of what users type -------

def idx_dataset(images, labels, mode=0):
    """A mode byte, the images file's length (16-bit little-endian), the
    images file, the labels file."""
    return bytes([mode]) + struct.pack("<H", len(images)) + images + labels


def idx_dataset_corpus():
    images, labels = idx([3, 4, 5]), idx([3], bytes([0, 9, 4]))
    put("idx_dataset", "train-plain", idx_dataset(images, labels))
    put("idx_dataset", "train-gzip", idx_dataset(images, labels, mode=3))
    put("idx_dataset", "t10k-images-gzip", idx_dataset(images, labels, mode=5))
    # Near-valid: each breaks one rule of the set.
    put("idx_dataset", "zero-images", idx_dataset(idx([0, 16384, 16384]), idx([0], b"")))
    put("idx_dataset", "side-over-1024", idx_dataset(bytes([0, 0, 8, 3]) + struct.pack(">3I", 1, 16384, 16384),
                                                    idx([1], b"\x03"), mode=0))
    put("idx_dataset", "counts-differ", idx_dataset(images, idx([2], bytes([1, 2]))))
    put("idx_dataset", "label-10", idx_dataset(images, idx([3], bytes([0, 10, 1]))))
    put("idx_dataset", "labels-2d", idx_dataset(images, idx([3, 1], bytes([0, 1, 2]))))
    put("idx_dataset", "images-2d", idx_dataset(idx([3, 20]), labels))
    put("idx_dataset", "no-labels", idx_dataset(images, b""))


def cifar10_train(files, subdir=False):
    """A mode byte, five 16-bit little-endian lengths, the five files."""
    return (bytes([1 if subdir else 0]) + b"".join(struct.pack("<H", len(f)) for f in files)
            + b"".join(files))


def cifar10_train_corpus():
    rec = [cifar_record(i % 10, 20 + i) for i in range(6)]
    put("cifar10_train", "five-files", cifar10_train([rec[0], rec[1], rec[2] + rec[3], rec[4], rec[5]]))
    put("cifar10_train", "five-files-subdir", cifar10_train(rec[:5], subdir=True))
    put("cifar10_train", "fourth-empty", cifar10_train([rec[0], rec[1], rec[2], b"", rec[4]]))
    put("cifar10_train", "third-short", cifar10_train([rec[0], rec[1], rec[2][:-1], rec[3], rec[4]]))
    put("cifar10_train", "fifth-label-10", cifar10_train(rec[:4] + [cifar_record(10, 30)]))


MODEL_CLI = {
    "input": (0, ["--input", "3x32x32"]),
    "input-huge": (1, ["--input", "4096x65536x65536"]),
    "input-bad": (0, ["--input", "3x32"]),
    "pipeline": (1, ["--pipeline", "4", "--micro-batches", "8", "--schedule", "gpipe"]),
    "stages": (0, ["--input=1x28x28", "--stages", "0-1,2-7", "--micro-batches", "2"]),
    "stages-bad": (0, ["--stages", "0-3,3-7"]),
}


def model_cli_corpus():
    for name, (resnet, argv) in MODEL_CLI.items():
        put("model_cli", name, bytes([resnet]) + "\n".join(argv).encode())


def devices_corpus():
    for name, (cpus, spec) in {"two": (0, "2"), "list": (0, "cpu:0,cpu:3"), "auto-200": (200, "auto"),
                               "auto-here": (0, "auto"), "twice": (0, "cpu:1,cpu:1"),
                               "trailing-comma": (0, "cpu:0,"), "cuda": (0, "cuda:0"),
                               "too-many": (0, "65"), "index-64": (0, "cpu:64")}.items():
        put("devices", name, bytes([cpus]) + spec.encode())


def stages_corpus():
    # 8 layers; a stage may start at 0, 2, 4, 5.
    starts = bytes([0b00110101])
    for name, text in {"two": "0-1,2-7", "three": "0-1,2-4,5-7", "single": "0-3,4,5-7",
                       "gap": "0-1,3-7", "bad-start": "0-2,3-7", "overlap": "0-4,4-7",
                       "garbage": "0-x"}.items():
        put("stages", name, bytes([8]) + starts + text.encode())


def model_build_corpus():
    put("model_build", "d2l-lenet", (b"Conv2d(1, 6, kernel_size=5, padding=2)\nSigmoid()\n"
                                     b"AvgPool2d(kernel_size=2, stride=2)\nConv2d(6, 16, kernel_size=5)\n"
                                     b"Sigmoid()\nAvgPool2d(kernel_size=2, stride=2)\nFlatten()\n"
                                     b"Linear(16 * 5 * 5, 120)\nSigmoid()\nLinear(120, 84)\nSigmoid()\n"
                                     b"Linear(84, 10)\n"))
    put("model_build", "bn-dropout", b"Conv2d(1, 4, 3, padding=1)\nBatchNorm2d(4)\nReLU()\n"
                                     b"AdaptiveAvgPool2d((2, 2))\nFlatten()\nDropout(0.5)\nLinear(16, 10)\n")
    put("model_build", "over-the-bound", b"Flatten()\nLinear(784, 3000000)\n")
    put("model_build", "conv-1e9", b"Conv2d(1, 1000000000, 1)\nAdaptiveAvgPool2d(1)\nFlatten()\n"
                                   b"Linear(1000000000, 10)\n")
    put("model_build", "hex", b"Flatten()\nLinear(0x310, 0b1010)\n")


# ---- onnx: If and Loop bodies (the seeds written with onnx.helper stay) ----

def onnx_corpus():
    sys.path.insert(0, os.path.join(HERE, "..", "tools"))
    import hostile_onnx as ho

    relu = lambda name: ho.graph([ho.node("Relu", name, ["x"], ["r"])], [], [ho.value("r")])
    if_node = ho.node("If", "if", ["cond"], ["y"], ho.graph_attr("then_branch", relu("then"))
                      + ho.graph_attr("else_branch", relu("else")))
    put("onnx", "if-then-else", ho.model(ho.graph(
        [if_node], [ho.value("x", ["N", 4]), ho.value("cond", [1])], [ho.value("y")])))
    body = ho.graph([ho.node("Add", "add", ["v", "x"], ["v2"]), ho.node("Identity", "c", ["k"], ["k2"])],
                    [ho.value("i", [1]), ho.value("k", [1]), ho.value("v", ["N", 4])],
                    [ho.value("k2"), ho.value("v2")])
    put("onnx", "loop-body", ho.model(ho.graph(
        [ho.node("Loop", "loop", ["n", "", "x"], ["y"], ho.graph_attr("body", body))],
        [ho.value("x", ["N", 4])], [ho.value("y")], [ho.tensor("n", [], 7, bytes(8))])))
    put("onnx", "if-nested-8", ho.nested(8, "If"))
    put("onnx", "loop-nested-8", ho.nested(8, "Loop"))
    seq = ho.num(1, 1)  # TypeProto.Tensor elem_type float
    seq = ho.ld(1, seq)  # TypeProto.tensor_type
    for _ in range(3):
        seq = ho.ld(4, ho.ld(1, seq))  # sequence_type.elem_type
    put("onnx", "sequence-type", ho.model(ho.graph(
        [ho.node("Relu", "relu", ["x"], ["y"])], [ho.text(1, "x") + ho.ld(2, seq)], [ho.value("y")])))
    # protobuf-c decodes nested messages by recursion: 3,000 If bodies
    # overflowed its stack; 40 go past the 100 levels the reader takes.
    regress = os.path.join(HERE, "regress", "onnx")
    with open(os.path.join(regress, "if-bodies-nested-past-100"), "wb") as f:
        f.write(ho.nested(40, "If"))


def main():
    dptrain = sys.argv[1] if len(sys.argv) > 1 else None
    for target in ("idx", "cifar10", "model", "safetensors", "checkpoint", "cli", "idx_dataset",
                   "cifar10_train", "model_cli", "devices", "stages", "model_build"):
        shutil.rmtree(os.path.join(CORPUS, target), ignore_errors=True)
    idx_corpus()
    cifar10_corpus()
    model_corpus()
    safetensors_corpus()
    checkpoint_corpus(dptrain)
    cli_corpus()
    idx_dataset_corpus()
    cifar10_train_corpus()
    model_cli_corpus()
    devices_corpus()
    stages_corpus()
    model_build_corpus()
    corpus_images.npy_corpus(put)
    corpus_images.image_corpus(put)
    corpus_shards.shards_corpus(put)
    corpus_transform.transform_corpus(put)
    onnx_corpus()


if __name__ == "__main__":
    main()
