"""The files of tests/util/pytorch_compat.py: safetensors read and written with json
and numpy alone (the `safetensors` package is not needed), and Fashion-MNIST's
IDX files read into tensors. CompatError is the one-line error of a file that
cannot be loaded."""
import gzip
import json
import os
import struct

import numpy as np
import torch


class CompatError(Exception):
    """A checkpoint that cannot be loaded: reported on one line, exit 1."""


# ---------------------------------------------------------------- safetensors

# safetensors dtype name -> (numpy dtype, little-endian), torch dtype
DTYPES = {
    "F32": (np.dtype("<f4"), torch.float32),
    "F64": (np.dtype("<f8"), torch.float64),
    "F16": (np.dtype("<f2"), torch.float16),
    "I64": (np.dtype("<i8"), torch.int64),
    "I32": (np.dtype("<i4"), torch.int32),
    "I16": (np.dtype("<i2"), torch.int16),
    "I8": (np.dtype("i1"), torch.int8),
    "U8": (np.dtype("u1"), torch.uint8),
    "BOOL": (np.dtype("?"), torch.bool),
}
TORCH_TO_ST = {torch.float32: "F32", torch.int64: "I64"}


def read_safetensors(path):
    """Returns ({name: torch tensor}, metadata dict) in file (header) order."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        raise CompatError(f"{path}: {e.strerror}") from None
    if len(buf) < 8:
        raise CompatError(f"{path}: truncated: {len(buf)} bytes, expected at least 8")
    (hlen,) = struct.unpack("<Q", buf[:8])
    if 8 + hlen > len(buf):
        raise CompatError(f"{path}: header size {hlen} runs past the end of the "
                          f"{len(buf)}-byte file")
    try:
        header = json.loads(buf[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CompatError(f"{path}: bad JSON header: {e}") from None
    if not isinstance(header, dict):
        raise CompatError(f"{path}: JSON header is not an object")
    data = memoryview(buf)[8 + hlen:]
    meta = header.get("__metadata__") or {}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = info["dtype"]
            shape = [int(d) for d in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CompatError(f"{path}: tensor '{name}': needs dtype, shape and "
                              f"data_offsets, got {info!r}") from None
        if dtype not in DTYPES:
            raise CompatError(f"{path}: tensor '{name}': unknown dtype '{dtype}'")
        npdt, tdt = DTYPES[dtype]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if any(d < 0 for d in shape) or not 0 <= begin <= end <= len(data) or \
                end - begin != count * npdt.itemsize:
            raise CompatError(f"{path}: tensor '{name}': {dtype} {shape} does not "
                              f"fit data_offsets [{begin}, {end}] "
                              f"({len(data)} data bytes)")
        arr = np.frombuffer(data[begin:end], dtype=npdt).reshape(shape)
        tensors[name] = torch.from_numpy(arr.astype(npdt.newbyteorder("="), copy=True)).to(tdt)
    return tensors, meta


def write_safetensors(path, state, metadata=None):
    """Writes {name: tensor} (F32 / I64) in the given order; header padded
    with spaces to a multiple of 8."""
    header, chunks, off = {}, [], 0
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        if t.dtype not in TORCH_TO_ST:
            raise CompatError(f"tensor '{name}': dtype {t.dtype} not supported by the writer")
        st = TORCH_TO_ST[t.dtype]
        raw = t.numpy().astype(DTYPES[st][0], copy=False).tobytes()
        header[name] = {"dtype": st, "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


# ---------------------------------------------------------------------- data

def read_idx_images(path):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    n, rows, cols = (int.from_bytes(buf[i:i + 4], "big") for i in (4, 8, 12))
    x = np.frombuffer(buf, dtype=np.uint8, offset=16).reshape(n, 1, rows, cols)
    return torch.from_numpy(x.astype(np.float32) / 255.0)


def read_idx_labels(path):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    return torch.from_numpy(np.frombuffer(buf, dtype=np.uint8, offset=8).astype(np.int64))


def load(data_dir, split, limit=0):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx_images(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    y = read_idx_labels(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    assert x.shape[0] == y.shape[0], (x.shape, y.shape)
    if limit > 0:
        x, y = x[:limit], y[:limit]
    return x, y
