"""dptrain's augmentation against torchvision's functional transforms.

dptrain's batch loader (libdptrain, through ctypes) augments real images:
the first 256 Fashion-MNIST training images, one channel, with
--augment crop:4,flip --normalize 0.2860,0.3530, and a three-channel set
made from them with crop:2,flip and CIFAR-10's mean and std. For every
sample the script asks the library for the sample's draws (the crop's top
and left in the padded image, the flip) and applies torchvision's
functional.pad (zeros), crop, hflip and normalize at those same draws to
the original image: every pixel of every batch must be the same float.
Prints one line per set; exits 1 on a difference.

usage: augment_torchvision.py LIBDPTRAIN
"""
import ctypes as C
import os
import sys

# compare, pytorch_compat: tests/util/.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "util"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision.transforms.functional as TF  # noqa: E402

import compare  # noqa: E402
from pytorch_compat import DATA_DIR  # noqa: E402
from pytorch_compat_io import read_idx_images  # noqa: E402

MAX_CHANNELS = 16  # DP_AUGMENT_MAX_CHANNELS


class AugmentOptions(C.Structure):  # dp_augment_options
    _fields_ = [("crop_pad", C.c_int), ("flip", C.c_bool), ("norm_channels", C.c_int),
                ("mean", C.c_float * MAX_CHANNELS), ("std", C.c_float * MAX_CHANNELS)]


class Draw(C.Structure):  # dp_augment_draw
    _fields_ = [("top", C.c_int), ("left", C.c_int), ("flip", C.c_bool)]


class Dataset(C.Structure):  # dp_dataset
    _fields_ = [("n", C.c_int64), ("channels", C.c_int), ("rows", C.c_int), ("cols", C.c_int),
                ("images", C.POINTER(C.c_float)), ("labels", C.POINTER(C.c_int32)),
                ("pixels", C.c_void_p), ("classes", C.c_int), ("class_names", C.c_void_p),
                ("source", C.c_void_p)]


class LoaderOptions(C.Structure):  # dp_loader_options
    _fields_ = [("batch_size", C.c_int64), ("shuffle", C.c_bool), ("seed", C.c_uint64),
                ("limit", C.c_int64), ("prefetch", C.c_int), ("augment", AugmentOptions),
                ("workers", C.c_int), ("rank", C.c_int), ("ranks", C.c_int),
                ("bad_images", C.c_int)]


class Batch(C.Structure):  # dp_batch
    _fields_ = [("x", C.POINTER(C.c_float)), ("y", C.POINTER(C.c_int32)), ("n", C.c_int64),
                ("index", C.c_int64), ("first", C.c_int64), ("rows", C.c_int64),
                ("skipped", C.c_int64)]


def library(path):
    lib = C.CDLL(path)
    lib.dp_augment_parse.argtypes = [C.c_char_p, C.POINTER(AugmentOptions)]
    lib.dp_normalize_parse.argtypes = [C.c_char_p, C.POINTER(AugmentOptions)]
    lib.dp_augment_draw_for.argtypes = [C.POINTER(AugmentOptions), C.c_uint64, C.c_int64,
                                        C.c_int64, C.POINTER(Draw)]
    lib.dp_augment_draw_for.restype = None
    lib.dp_loader_init.argtypes = [C.POINTER(C.c_void_p), C.POINTER(Dataset),
                                   C.POINTER(LoaderOptions)]
    lib.dp_loader_start_epoch.argtypes = [C.c_void_p, C.c_int64, C.c_int64]
    lib.dp_loader_next.argtypes = [C.c_void_p, C.POINTER(Batch)]
    lib.dp_loader_close.argtypes = [C.c_void_p]
    lib.dp_loader_close.restype = None
    return lib


def loader_batches(lib, images, opts, seed, epoch, batch):
    """Epoch `epoch` of dptrain's loader over `images` in file order (so
    row i of the epoch is sample i): the augmented images, [n, c, h, w]."""
    n, c, h, w = images.shape
    labels = np.arange(n, dtype=np.int32)
    ds = Dataset(n, c, h, w, images.ctypes.data_as(C.POINTER(C.c_float)),
                 labels.ctypes.data_as(C.POINTER(C.c_int32)))
    lo = LoaderOptions(batch_size=batch, shuffle=False, seed=seed, limit=0, prefetch=2,
                       augment=opts)
    loader = C.c_void_p()
    assert lib.dp_loader_init(C.byref(loader), C.byref(ds), C.byref(lo)) == 0
    assert lib.dp_loader_start_epoch(loader, epoch, 0) == 0
    out, b = [], Batch()
    while lib.dp_loader_next(loader, C.byref(b)) == 1:
        rows = np.ctypeslib.as_array(b.x, shape=(b.n, c, h, w)).copy()
        assert list(np.ctypeslib.as_array(b.y, shape=(b.n,))) == list(range(len(out) * batch,
                                                                           len(out) * batch + b.n))
        out.append(rows)
    lib.dp_loader_close(loader)
    return np.concatenate(out)


def check(lib, name, images, augment, normalize, seed, epoch, batch):
    opts = AugmentOptions()
    assert lib.dp_augment_parse(augment.encode(), C.byref(opts)) == 0, augment
    assert lib.dp_normalize_parse(normalize.encode(), C.byref(opts)) == 0, normalize
    got = loader_batches(lib, images, opts, seed, epoch, batch)
    pad, k = opts.crop_pad, opts.norm_channels
    mean, std = list(opts.mean[:k]), list(opts.std[:k])
    n, _, h, w = images.shape
    worst, flips, moved = 0.0, 0, 0
    for i in range(n):
        d = Draw()
        lib.dp_augment_draw_for(C.byref(opts), seed, epoch, i, C.byref(d))
        assert 0 <= d.top <= 2 * pad and 0 <= d.left <= 2 * pad, (d.top, d.left)
        t = torch.from_numpy(images[i])
        t = TF.pad(t, [pad, pad, pad, pad], fill=0)
        t = TF.crop(t, d.top, d.left, h, w)
        if d.flip:
            t = TF.hflip(t)
        t = TF.normalize(t, mean, std)
        worst = compare.worst([worst, float(np.abs(t.numpy() - got[i]).max())])  # inf for NaN
        flips += d.flip
        moved += (d.top, d.left) != (pad, pad)
    ok = worst == 0 and 0 < flips < n and moved > n // 2
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {n} images, --augment {augment} --normalize "
          f"{normalize}, epoch {epoch}, batches of {batch}: largest difference from torchvision's "
          f"pad/crop/hflip/normalize {worst:.1e} (must be 0); {flips} flipped, {moved} moved")
    return ok


def main():
    lib = library(sys.argv[1])
    x = read_idx_images(os.path.join(DATA_DIR, "train-images-idx3-ubyte.gz"))[:256].numpy()
    x = np.ascontiguousarray(x, dtype=np.float32)
    rgb = np.ascontiguousarray(np.concatenate([x, 1 - x, x * x], axis=1), dtype=np.float32)
    results = [
        check(lib, "Fashion-MNIST", x, "crop:4,flip", "0.2860,0.3530", 5, 3, 100),
        check(lib, "three channels", rgb, "flip,crop:2",
              "0.4914,0.4822,0.4465,0.2470,0.2435,0.2616", 9, 0, 64),
    ]
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
