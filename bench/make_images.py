#!/usr/bin/env python3
"""Writes a folder of photograph-like JPEGs in torchvision's ImageFolder
layout, for the image benchmarks of issue 38:

  DIR/train/<class>/NNNNN.jpg   --count images
  DIR/test/<class>/NNNNN.jpg    --test-count images
  DIR/make_images.json          the arguments, written last: the folder is complete

    bench/.venv/bin/python bench/make_images.py DIR --count 2000 --min 300 --max 500
    bench/.venv/bin/python bench/make_images.py --probe 400x300   # file sizes only

Each image's width and height are drawn independently and uniformly from
[--min, --max]. Its content is what makes JPEG sizes and decode costs
resemble photographs' (a 400x300 one is 20-60 KB at quality 90, as a
photograph is; --probe shows it): a smooth two-colour gradient, low- and
mid-frequency texture, a few shapes in random colours, and pixel noise.
Sample i is of class i % 10, so the classes are balanced; a class is
learnable from any crop of its images (RandomResizedCrop can cut the shape
off): its gradient's hue is the class's (k * 36 degrees, +-8), and each
image has one large shape of the class's kind (disc, square, triangle,
ring, cross: k % 5) in the opposite hue.

Image i of a split is a pure function of (--seed, the split, i, the size
range): its draws come from numpy's SeedSequence([seed, split, i]), so
any --jobs, any order and a second run give the same bytes (for the same
Pillow and libjpeg). Each file is written to a temporary name beside it
and renamed, so that an interrupted run or two runs on one folder at
once never leave a half-written JPEG; make_images.partial.json holds the
arguments while the folder is made, and a second run with the same ones
(at once, or after an interruption) goes on with it, skipping the files
that exist; other arguments, or a folder not made by this script, are
refused with one line. Needs numpy and Pillow (bench/.venv has both).
"""
import argparse
import colorsys
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile

import numpy as np
from PIL import Image, ImageDraw

CLASSES = 10
SHAPES = ("disc", "square", "triangle", "ring", "cross")
SPLITS = {"train": 0, "test": 1}
STAMP = "make_images.json"
PARTIAL = "make_images.partial.json"
UMASK = os.umask(0o022)
os.umask(UMASK)


def class_names():
    """0-disc-hue000, 1-square-hue036, ...: sorted by name (as ImageFolder
    sorts them) they stay in class order."""
    return [f"{k}-{SHAPES[k % 5]}-hue{k * 36:03d}" for k in range(CLASSES)]


def hsv(h, s, v):
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v), dtype=np.float32) * 255.0


def smooth_noise(rng, h, w, cells, amplitude):
    """A [h, w] field of uniform noise on a grid of about `cells` cells along
    the longer side, interpolated bicubically: blotches of that scale."""
    gh = max(2, round(cells * h / max(h, w)))
    gw = max(2, round(cells * w / max(h, w)))
    grid = rng.uniform(-amplitude, amplitude, size=(gh, gw)).astype(np.float32)
    return np.asarray(Image.fromarray(grid, mode="F").resize((w, h), Image.BICUBIC))


def draw_shape(d, kind, cx, cy, r, fill, angle):
    """One shape of `kind` of radius r centred at (cx, cy) on ImageDraw d."""
    if kind == "disc":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif kind == "ring":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], outline=fill, width=max(2, int(r * 0.35)))
    elif kind == "square":
        d.regular_polygon((cx, cy, r), 4, rotation=angle, fill=fill)
    elif kind == "triangle":
        d.regular_polygon((cx, cy, r), 3, rotation=angle, fill=fill)
    else:  # cross: two bars
        t = max(2, int(r * 0.35))
        d.rectangle([cx - r, cy - t, cx + r, cy + t], fill=fill)
        d.rectangle([cx - t, cy - r, cx + t, cy + r], fill=fill)


def render(seed, split, index, lo, hi, size=None):
    """Image `index` of `split` (0 train, 1 test): (class, PIL RGB image).
    size (w, h) overrides the drawn size (for --probe)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, split, index]))
    w, h = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
    if size is not None:
        w, h = size
    k = index % CLASSES
    hue = k / CLASSES + rng.uniform(-8, 8) / 360.0
    # Smooth gradient between two shades of the class's hue, along a random direction.
    c0 = hsv(hue, rng.uniform(0.45, 0.9), rng.uniform(0.55, 0.95))
    c1 = hsv(hue + rng.uniform(-0.03, 0.03), rng.uniform(0.3, 0.8), rng.uniform(0.2, 0.6))
    a = rng.uniform(0, 2 * math.pi)
    xs = (np.arange(w, dtype=np.float32) - w / 2) * math.cos(a)
    ys = (np.arange(h, dtype=np.float32) - h / 2) * math.sin(a)
    t = ys[:, None] + xs[None, :]
    t = (t - t.min()) / max(1e-6, float(t.max() - t.min()))
    # Lighting (large blotches) and texture (small ones), as grey shading.
    shade = smooth_noise(rng, h, w, 4, 40) + smooth_noise(rng, h, w, 60, 26)
    img = c0 + (c1 - c0) * t[..., None] + shade[..., None]
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(pil)
    # Distractors: shapes of any kind and colour, smaller than the class's.
    side = min(w, h)
    for _ in range(int(rng.integers(2, 7))):
        kind = SHAPES[int(rng.integers(0, len(SHAPES)))]
        fill = tuple(int(v) for v in rng.integers(0, 256, size=3))
        draw_shape(d, kind, rng.uniform(0, w), rng.uniform(0, h), rng.uniform(0.04, 0.12) * side,
                   fill, rng.uniform(0, 360))
    # The class's shape, large, in the opposite hue.
    fill = tuple(int(v) for v in hsv(hue + 0.5, rng.uniform(0.5, 1), rng.uniform(0.6, 1)))
    draw_shape(d, SHAPES[k % 5], rng.uniform(0.3, 0.7) * w, rng.uniform(0.3, 0.7) * h,
               rng.uniform(0.18, 0.3) * side, fill, rng.uniform(0, 360))
    # Sensor noise: what keeps JPEG from compressing the flat parts to nothing.
    arr = np.asarray(pil, dtype=np.float32)
    sigma = rng.uniform(4.0, 6.0)
    arr += rng.standard_normal(size=arr.shape, dtype=np.float32) * np.float32(sigma) + 0.5
    return k, Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), "RGB")


def write_one(job):
    """Writes one image (atomically); returns its size in bytes."""
    out, seed, split_name, index, lo, hi, quality = job
    k = index % CLASSES
    path = os.path.join(out, split_name, class_names()[k], f"{index:05d}.jpg")
    if os.path.exists(path):
        return os.path.getsize(path)
    im = render(seed, SPLITS[split_name], index, lo, hi)[1]
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".jpg", dir=os.path.dirname(path))
    try:
        os.fchmod(fd, 0o666 & ~UMASK)
        with os.fdopen(fd, "wb") as f:
            im.save(f, "JPEG", quality=quality)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return os.path.getsize(path)


def probe(spec, seed, quality):
    try:
        w, h = (int(v) for v in spec.lower().split("x"))
        if w < 1 or h < 1:
            raise ValueError
    except ValueError:
        sys.exit(f"make_images.py: --probe {spec}: expected WxH, e.g. 400x300")
    import io
    sizes = []
    for i in range(20):
        buf = io.BytesIO()
        render(seed, 0, i, w, w, size=(w, h))[1].save(buf, "JPEG", quality=quality)
        sizes.append(buf.tell() / 1024)
    print(f"{w}x{h} at quality {quality}, 20 images: min {min(sizes):.1f} KB, "
          f"median {statistics.median(sizes):.1f} KB, max {max(sizes):.1f} KB")


def write_json(path, obj):
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    os.fchmod(fd, 0o666 & ~UMASK)
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def start(out, args):
    """False when out is complete with these arguments. Else marks it as
    being made with them (PARTIAL), so that a second run with the same
    arguments, at once or after an interruption, goes on with it, and
    exits with one line when out holds anything else."""
    for name in (STAMP, PARTIAL):
        try:
            with open(os.path.join(out, name)) as f:
                made = json.load(f)
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            made = None
        if made != args:
            sys.exit(f"make_images.py: {out}: made with other arguments ({name}); remove it "
                     f"or choose another folder")
        if name == STAMP:
            return False
        return True
    os.makedirs(out, exist_ok=True)
    if os.listdir(out):
        sys.exit(f"make_images.py: {out}: not empty and not made by make_images.py; remove it "
                 f"or choose another folder")
    write_json(os.path.join(out, PARTIAL), args)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="the folder to write (made if missing)")
    ap.add_argument("--count", type=int, default=2000, help="training images [2000]")
    ap.add_argument("--test-count", type=int, default=None,
                    help="test images [--count / 10, at least 10]")
    ap.add_argument("--min", type=int, default=300, help="smallest side, px [300]")
    ap.add_argument("--max", type=int, default=500, help="largest side, px [500]")
    ap.add_argument("--seed", type=int, default=0, help="seed [0]")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality, as PIL's [90]")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                    help="processes [the usable cores]")
    ap.add_argument("--probe", metavar="WxH",
                    help="only print the JPEG sizes of 20 images of WxH; write nothing")
    a = ap.parse_args()
    if a.probe:
        probe(a.probe, a.seed, a.quality)
        return
    if a.dir is None:
        ap.error("DIR is required (or --probe WxH)")
    if a.test_count is None:
        a.test_count = max(10, a.count // 10)
    for name, v, least in (("--count", a.count, 1), ("--test-count", a.test_count, 0),
                           ("--min", a.min, 8), ("--jobs", a.jobs, 1), ("--seed", a.seed, 0)):
        if v < least:
            ap.error(f"{name} {v}: must be at least {least}")
    if a.max < a.min:
        ap.error(f"--max {a.max}: must be at least --min {a.min}")
    if not 1 <= a.quality <= 100:
        ap.error(f"--quality {a.quality}: must be 1 to 100")
    args = {"count": a.count, "test_count": a.test_count, "min": a.min, "max": a.max,
            "seed": a.seed, "quality": a.quality, "classes": class_names()}
    try:
        if not start(a.dir, args):
            print(f"{a.dir}: complete already ({STAMP} matches)")
            return
        for split in SPLITS:
            for name in class_names():
                os.makedirs(os.path.join(a.dir, split, name), exist_ok=True)
    except OSError as e:
        sys.exit(f"make_images.py: {a.dir}: {e.strerror}")
    jobs = [(a.dir, a.seed, "train", i, a.min, a.max, a.quality) for i in range(a.count)]
    jobs += [(a.dir, a.seed, "test", i, a.min, a.max, a.quality) for i in range(a.test_count)]
    total = 0
    with multiprocessing.Pool(a.jobs) as pool:
        for n, size in enumerate(pool.imap_unordered(write_one, jobs, chunksize=16), 1):
            total += size
            if n % 1000 == 0 or n == len(jobs):
                print(f"\r{n}/{len(jobs)} images", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    write_json(os.path.join(a.dir, STAMP), args)
    try:
        os.unlink(os.path.join(a.dir, PARTIAL))
    except FileNotFoundError:  # a run beside this one finished first
        pass
    print(f"{a.dir}: {a.count} train + {a.test_count} test JPEGs, {a.min}-{a.max} px, "
          f"{total / 2**20:.1f} MiB ({total / len(jobs) / 1024:.1f} KB each on average)")


if __name__ == "__main__":
    main()
