#!/usr/bin/env python3
"""ONNX files written byte by byte in protobuf's wire format, without the
onnx package: the hostile files docs/reliability.md shows, and the fuzz
target's seeds of nested If and Loop bodies (tests/fuzz/make_corpus.py
imports it). tests/tools/test_hostile_models.c writes the same files in C.

    tests/tools/hostile_onnx.py FILE...   writes each FILE, by its name:
      ifN.onnx       N If nodes, each in the previous one's then_branch
      loopN.onnx     the same with Loop bodies
      kernel0.onnx   a Conv of kernel_shape [0, 0]
      dilated.onnx   a Conv of dilations [1000000, 1000000]
      inputN.onnx    a graph input of 1 x N x N images
"""
import os
import re
import struct
import sys


def varint(n):
    n &= (1 << 64) - 1  # negative int64s as protobuf writes them
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def ld(field, payload):
    """A length-delimited field: a string, bytes or a message."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def num(field, n):
    return varint(field << 3) + varint(n)


def text(field, s):
    return ld(field, s.encode())


# onnx.proto's messages, as the fields dptrain reads

def node(op, name, ins, outs, attrs=b""):
    return (b"".join(text(1, i) for i in ins) + b"".join(text(2, o) for o in outs)
            + text(3, name) + text(4, op) + attrs)


def ints_attr(name, values):  # AttributeProto of type INTS (7)
    return ld(5, text(1, name) + num(20, 7) + b"".join(num(8, v) for v in values))


def int_attr(name, value):  # of type INT (2)
    return ld(5, text(1, name) + num(20, 2) + num(3, value))


def graph_attr(name, graph):  # of type GRAPH (5)
    return ld(5, text(1, name) + num(20, 5) + ld(6, graph))


def value(name, dims=None):
    """A float tensor's ValueInfoProto; dims None: no type; "N": symbolic."""
    if dims is None:
        return text(1, name)
    shape = b"".join(ld(1, text(2, d) if isinstance(d, str) else num(1, d)) for d in dims)
    return text(1, name) + ld(2, ld(1, num(1, 1) + ld(2, shape)))


def tensor(name, dims, data_type=1, raw=None):
    count = 1
    for d in dims:
        count *= d
    raw = raw if raw is not None else bytes(4 * count)
    return b"".join(num(1, d) for d in dims) + num(2, data_type) + text(8, name) + ld(9, raw)


def graph(nodes, inputs, outputs, inits=()):
    return (b"".join(ld(1, n) for n in nodes) + text(2, "g") + b"".join(ld(5, t) for t in inits)
            + b"".join(ld(11, v) for v in inputs) + b"".join(ld(12, v) for v in outputs))


def model(g, opset=17):
    return num(1, 8) + ld(8, text(1, "") + num(2, opset)) + ld(7, g)


# the files

def nested(levels, op="If"):
    """`levels` nodes of op, each holding the next in its body (If's
    then_branch, Loop's body); the innermost body an Identity."""
    body = graph([node("Identity", "id", ["c"], ["b"])], [], [])
    for i in reversed(range(levels)):
        attr = graph_attr("then_branch" if op == "If" else "body", body)
        ins = ["c"] if op == "If" else ["", "c"]
        body = graph([node(op, f"{op.lower()}{i}", ins, ["y"], attr)],
                     [value("c", [1])] if i == 0 else [], [value("y")] if i == 0 else [])
    return model(body)


def conv_net(conv_attrs=b"", dims=("N", 1, 28, 28)):
    """x -> Conv (4, 1, 3, 3) -> Flatten -> Gemm (10, 2704) -> y."""
    return model(graph(
        [node("Conv", "conv", ["x", "w"], ["c"], conv_attrs),
         node("Flatten", "flat", ["c"], ["f"]),
         node("Gemm", "fc", ["f", "fw"], ["y"], int_attr("transB", 1))],
        [value("x", list(dims))], [value("y")],
        [tensor("w", [4, 1, 3, 3]), tensor("fw", [10, 2704])]))


def file_bytes(name):
    base = os.path.basename(name)
    m = re.fullmatch(r"(if|loop)(\d+)\.onnx", base)
    if m:
        return nested(int(m.group(2)), "If" if m.group(1) == "if" else "Loop")
    if base == "kernel0.onnx":
        return conv_net(ints_attr("kernel_shape", [0, 0]))
    if base == "dilated.onnx":
        return conv_net(ints_attr("dilations", [1000000, 1000000]))
    m = re.fullmatch(r"input(\d+)\.onnx", base)
    if m:
        side = int(m.group(1))
        return conv_net(dims=("N", 1, side, side))
    sys.exit(f"{name}: no such file here (see --help)")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    for path in sys.argv[1:]:
        with open(path, "wb") as f:
            f.write(file_bytes(path))
