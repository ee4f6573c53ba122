"""dptrain.vision.transforms: torchvision's ToTensor, Normalize, Compose,
Resize, RandomCrop and RandomHorizontalFlip.

Over a built-in dataset the transforms are not run in Python: a Compose
is read as options of the library's loader (Normalize's means and stds,
RandomCrop's padding, the flip), which applies them on its own threads
with torchvision's semantics (include/dp/data.h). Called on one sample
(a NumPy array, a PIL image or a tensor), each transform computes in
NumPy, for Python datasets."""

import numpy as np

import _dptrain

from .. import _creation

__all__ = ["Compose", "ToTensor", "Normalize", "Resize", "RandomCrop", "RandomHorizontalFlip",
           "Lambda", "loader_options"]


def _values(img):
    if isinstance(img, _dptrain.Tensor):
        return img._host_array()
    return np.asarray(img)


class Compose:
    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self):
        body = "".join(f"\n    {t}" for t in self.transforms)
        return f"{type(self).__name__}({body}\n)"


class ToTensor:
    """(H, W) or (H, W, C) uint8 in [0, 255] (a PIL image, a NumPy array) to
    a float32 tensor (C, H, W) in [0, 1]."""

    def __call__(self, pic):
        a = _values(pic)
        if isinstance(pic, _dptrain.Tensor):
            return pic
        if a.ndim == 2:
            a = a[:, :, None]
        if a.ndim != 3:
            raise TypeError(f"ToTensor: pic should be 2 or 3 dimensional. Got {a.ndim} dimensions.")
        chw = np.ascontiguousarray(a.transpose(2, 0, 1))
        if chw.dtype == np.uint8:
            chw = chw.astype(np.float32) / np.float32(255)
        return _creation.tensor(chw.astype(np.float32, copy=False))

    def __repr__(self):
        return "ToTensor()"


class Normalize:
    """(x - mean[c]) / std[c] per channel."""

    def __init__(self, mean, std, inplace=False):
        self.mean = tuple(float(m) for m in (mean if hasattr(mean, "__len__") else (mean,)))
        self.std = tuple(float(s) for s in (std if hasattr(std, "__len__") else (std,)))
        if len(self.mean) != len(self.std):
            raise ValueError(f"Normalize: {len(self.mean)} means but {len(self.std)} stds")
        if any(s == 0 for s in self.std):
            raise ValueError("std evaluated to zero after conversion to float32, leading to "
                             "division by zero.")

    def __call__(self, tensor):
        a = _values(tensor).astype(np.float32)
        c = a.shape[0]
        mean = np.array(self.mean if len(self.mean) > 1 else self.mean * c, np.float32)
        std = np.array(self.std if len(self.std) > 1 else self.std * c, np.float32)
        out = (a - mean[:, None, None]) / std[:, None, None]
        return _creation.tensor(out)

    def __repr__(self):
        return f"Normalize(mean={list(self.mean)}, std={list(self.std)})"


class Resize:
    """Resize(size). The library's loader does not resize: over a built-in
    dataset only the images' own size is accepted (a no-op)."""

    def __init__(self, size, interpolation=None, max_size=None, antialias=True):
        self.size = size

    def target(self, rows, cols):
        """The (H, W) Resize gives an image of rows x cols (torchvision's rule:
        an int is the shorter side)."""
        if isinstance(self.size, int):
            if rows <= cols:
                return self.size, int(self.size * cols / rows)
            return int(self.size * rows / cols), self.size
        return tuple(self.size)

    def __call__(self, img):
        a = _values(img)
        rows, cols = (a.shape[-2], a.shape[-1]) if isinstance(img, _dptrain.Tensor) else a.shape[:2]
        if self.target(rows, cols) != (rows, cols):
            raise ValueError(f"Resize({self.size}): dptrain does not resize images "
                             f"({rows}x{cols} asked to become {self.target(rows, cols)})")
        return img

    def __repr__(self):
        return f"Resize(size={self.size})"


class RandomCrop:
    """RandomCrop(size, padding): over a built-in dataset, crops of the
    image's own size from the zero-padded image (the loader's crop)."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.padding = padding or 0
        if not isinstance(self.padding, int):
            raise ValueError("RandomCrop: only an int padding (the same on every side) is "
                             "supported")
        if fill != 0 or padding_mode != "constant":
            raise ValueError("RandomCrop: only zero padding is supported")

    def __call__(self, img):
        raise ValueError("RandomCrop runs in the library's loader: use it on a built-in dataset")

    def __repr__(self):
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        if p != 0.5:
            raise ValueError("RandomHorizontalFlip: the loader flips with p=0.5 only")
        self.p = p

    def __call__(self, img):
        raise ValueError("RandomHorizontalFlip runs in the library's loader: use it on a "
                         "built-in dataset")

    def __repr__(self):
        return f"RandomHorizontalFlip(p={self.p})"


class Lambda:
    def __init__(self, lambd):
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)


def loader_options(transform, chw):
    """The C loader's options (crop_pad, flip, mean, std) for `transform`
    applied to samples of shape chw; ValueError for a transform the loader
    cannot apply, or an order it does not follow (crop, flip, normalise)."""
    steps = transform.transforms if isinstance(transform, Compose) else (
        [] if transform is None else [transform])
    options = {}
    order = 0  # crop (1), flip (2), normalize (3) must come in this order
    for t in steps:
        if isinstance(t, ToTensor):
            continue
        if isinstance(t, Resize):
            t.target(chw[1], chw[2])
            if t.target(chw[1], chw[2]) != (chw[1], chw[2]):
                raise ValueError(f"{t!r}: dptrain's loader does not resize ({chw[1]}x{chw[2]} "
                                 f"images); train at the dataset's size")
            continue
        if isinstance(t, RandomCrop):
            if t.size != (chw[1], chw[2]):
                raise ValueError(f"{t!r}: the loader crops to the image's own size {chw[1:]}")
            step, options["crop_pad"] = 1, t.padding
        elif isinstance(t, RandomHorizontalFlip):
            step, options["flip"] = 2, True
        elif isinstance(t, Normalize):
            step, options["mean"], options["std"] = 3, t.mean, t.std
        else:
            raise ValueError(f"{t!r}: the built-in datasets' loader applies ToTensor, Normalize, "
                             f"RandomCrop, RandomHorizontalFlip and Resize to the same size only")
        if step <= order:
            raise ValueError("the loader applies RandomCrop, then RandomHorizontalFlip, then "
                             "Normalize: give them in that order")
        order = step
    return options
