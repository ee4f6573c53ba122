"""dptrain's transforms (src/data/transform*.c) against torchvision's on real
files: JPEGs and PNGs of assorted sizes and aspect ratios, gray and RGB,
written by Pillow as ImageFolders (ROOT/train/c/NN_....jpg; ROOT/test the
same), run through
`dptrain data --dataset folder --no-shuffle --jpeg-scale off --dump` (the
floats the streaming loader hands a run's step, in file order) and through
torchvision's functional transforms on the image as ImageFolder's PIL loader
reads it, with the boxes dptrain drew, then ToTensor. The draws come from
tests/data/transform_dump.c (dp_transform_decode, the same seed, epoch and
sample index: its floats must equal dptrain data's bit for bit, which also
pins the files' order), as JSON with the uniform numbers and randints they
consumed. A list whose output size depends on the input's (resize:S, flip,
crop:P, ...) is run on folders of one size; one that fixes it, on a folder of
every size.

  Resize, CenterCrop, RandomResizedCrop: mean |dptrain - torchvision| <= 0.5/255
  and max <= 2/255. torchvision's interpolation that matches: BILINEAR with
  antialias=True (on a PIL image, PIL's Image.resize(BILINEAR), which rounds to
  bytes after each pass: the whole of the difference; dptrain stays in float).
  RandomResizedCrop's boxes: dptrain's uniform numbers and randints fed to
  torchvision's own RandomResizedCrop.get_params (torch.empty(1).uniform_ and
  torch.randint patched) give the same boxes, fallback included.
  Flip, crop:P (RandomCrop with padding), gray and rgb: bit for bit.

Usage: test_transforms_torchvision.py path/to/transform_dump path/to/dptrain.
The Python that runs torchvision: $DP_TORCHVISION_PYTHON, else
<source>/bench/.venv (PyPI's torch, torchvision, Pillow) when it has
torchvision, else Debian's /usr/bin/python3 (python3-torchvision); it prints
which. Without one: skipped (77), unless DP_REQUIRE_TORCH=1 (make
test-interop), where that fails."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("DP_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))


def has_torchvision(python):
    return os.path.exists(python) and subprocess.call(
        [python, "-c", "import torchvision, PIL, numpy"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0


def relaunch():
    """Runs this file under the first Python that has torchvision."""
    for python in [os.environ.get("DP_TORCHVISION_PYTHON", ""),
                   os.path.join(SOURCE, "bench", ".venv", "bin", "python"), "/usr/bin/python3"]:
        if python and has_torchvision(python):
            os.environ["DP_TRANSFORMS_CHILD"] = "1"
            os.execv(python, [python, os.path.abspath(__file__)] + sys.argv[1:])
    if os.environ.get("DP_REQUIRE_TORCH") == "1":
        print("FAIL: no Python with torchvision (bench/.venv or Debian's python3-torchvision), "
              "and DP_REQUIRE_TORCH=1 (make test-interop) needs one")
        sys.exit(1)
    print("SKIP test_transforms_torchvision: no Python with torchvision "
          "(make test-interop installs python3-torchvision)")
    sys.exit(77)


if os.environ.get("DP_TRANSFORMS_CHILD") != "1":
    relaunch()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchvision  # noqa: E402
import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402
from PIL import Image  # noqa: E402

BILINEAR = T.InterpolationMode.BILINEAR
MEAN_BOUND, MAX_BOUND = 0.5 / 255, 2 / 255
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)
    return ok


def photo(rows, cols, channels, seed):
    """Photograph-like bytes: smooth shapes, edges and some noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:rows, 0:cols].astype(np.float64)
    planes = []
    for c in range(channels):
        fy, fx = rng.uniform(0.01, 0.08, 2)
        v = 128 + 60 * np.sin(fy * y + c) * np.cos(fx * x - c)
        cy, cx, r = rng.uniform(0, rows), rng.uniform(0, cols), rng.uniform(5, max(rows, cols) / 3)
        v += 70 * (((y - cy) ** 2 + (x - cx) ** 2) < r * r)
        v += rng.normal(0, 12, (rows, cols))
        planes.append(np.clip(v, 0, 255).astype(np.uint8))
    return np.stack(planes, -1) if channels == 3 else planes[0]


SIZES = [(53, 37), (200, 300), (333, 499), (480, 640), (37, 53), (224, 224), (120, 1000),
         (500, 375)]


def make_images(folder):
    """Two ImageFolders a channel count: "<rgb|gray>" with every size (for
    lists that fix the output's), and "<rgb|gray>-<k>" with size k's JPEG
    and PNG (for lists that keep the input's). Returns {root: files in the
    folder's order}."""
    roots = {}
    k = 0
    for s, (rows, cols) in enumerate(SIZES):
        for channels in (3, 1):
            kind = "rgb" if channels == 3 else "gray"
            for fmt in ("jpg", "png"):
                a = photo(rows, cols, channels, k)
                img = Image.fromarray(a, "RGB" if channels == 3 else "L")
                name = "%02d_%dx%d_%s.%s" % (k, cols, rows, kind, fmt)
                for root in (os.path.join(folder, kind), os.path.join(folder, "%s-%d" % (kind, s))):
                    os.makedirs(os.path.join(root, "train", "c"), exist_ok=True)
                    path = os.path.join(root, "train", "c", name)
                    img.save(path, quality=90) if fmt == "jpg" else img.save(path)
                    roots.setdefault(root, []).append(path)
                k += 1
    # dptrain opens a folder's test split too (the same images; the same
    # list, --test-transform, so that its samples' shape agrees).
    for root in roots:
        os.symlink(os.path.join(root, "train"), os.path.join(root, "test"))
    return {root: sorted(files) for root, files in roots.items()}


def replay_get_params(draws, rows, cols, scale, ratio):
    """torchvision's RandomResizedCrop.get_params fed dptrain's numbers."""
    queue = [(b, v) for _, b, v in draws]
    empty, randint = torch.empty, torch.randint
    dummy = empty(1, rows, cols)

    class Uniform:
        def uniform_(self, lo, hi):
            bound, u = queue.pop(0)
            assert bound == 0, "a uniform where dptrain drew randint(0, %d)" % bound
            lo, hi = float(lo), float(hi)
            return torch.tensor([np.float32(lo + (hi - lo) * u)], dtype=torch.float32)

    def fake_randint(low, high, size, **kw):
        bound, v = queue.pop(0)
        assert low == 0 and bound == high, "torchvision's randint(0, %d), dptrain's bound %d" % (
            high, bound)
        return torch.tensor([int(v)])

    torch.empty = lambda *a, **kw: Uniform()
    torch.randint = fake_randint
    try:
        box = T.RandomResizedCrop.get_params(dummy, list(scale), list(ratio))
    finally:
        torch.empty, torch.randint = empty, randint
    return list(box), queue


def stage_list(spec):
    if spec == "imagenet":
        spec = "random-resized-crop:224,flip"
    stages = []
    for s in spec.split(","):
        name, _, arg = s.partition(":")
        stages.append((name, arg))
    return stages


def size_of(arg, square):
    a = arg.split(":")[0]
    if "x" in a:
        h, w = a.split("x")
        return [int(h), int(w)]
    return [int(a), int(a)] if square else int(a)


def rrc_ranges(arg):
    parts = arg.split(":")
    scale = [0.08, 1.0] if len(parts) < 2 else [float(x) for x in parts[1].split("-")]
    ratio = [3 / 4, 4 / 3] if len(parts) < 3 else [float(x) for x in parts[2].split("-")]
    return [float(np.float32(x)) for x in scale], [float(np.float32(x)) for x in ratio]


def torchvision_side(path, spec, rec):
    img = Image.open(path)
    img = img.convert("RGB") if img.mode != "L" else img  # ImageFolder's loader, gray kept
    h, w = img.size[1], img.size[0]
    for i, (name, arg) in enumerate(stage_list(spec)):
        box = rec["boxes"][i]
        if name == "resize":
            img = F.resize(img, size_of(arg, False), BILINEAR, antialias=True)
        elif name == "center-crop":
            img = F.center_crop(img, size_of(arg, True))
            th, tw = size_of(arg, True)
            want = [int(round((h - th) / 2.0)) if th <= h else -((th - h) // 2),
                    int(round((w - tw) / 2.0)) if tw <= w else -((tw - w) // 2), th, tw]
            check(box == want, "%s %s: center-crop box %s, torchvision's %s" % (path, spec, box, want))
        elif name == "random-resized-crop":
            scale, ratio = rrc_ranges(arg)
            stage_draws = [d for d in rec["draws"] if d[0] == i]
            try:
                got, left = replay_get_params(stage_draws, h, w, scale, ratio)
            except (AssertionError, IndexError) as e:  # another order or count of draws
                got, left = "not replayed (%s)" % (e or "dptrain drew fewer numbers"), []
            check(got == box and not left,
                  "%s %s: get_params replayed gives %s (%d numbers left), dptrain drew %s" % (
                      path, spec, got, len(left), box))
            img = F.resized_crop(img, box[0], box[1], box[2], box[3], size_of(arg, True), BILINEAR,
                                 antialias=True)
        elif name == "crop":
            p = int(arg)
            img = F.crop(F.pad(img, p), box[0] + p, box[1] + p, box[2], box[3])
        elif name == "flip":
            img = F.hflip(img) if rec["flips"][i] else img
        elif name == "gray":
            img = F.rgb_to_grayscale(img, 1) if img.mode != "L" else img
        elif name == "rgb":
            img = img.convert("RGB")
        h, w = img.size[1], img.size[0]
    return F.to_tensor(img).numpy()


fallbacks = [0]


def fixes_size(spec):
    """Whether the list fixes the output's size (ends in a sized crop or an
    HxW resize, with only flip/gray/rgb after)."""
    for name, arg in reversed(stage_list(spec)):
        if name in ("random-resized-crop", "center-crop"):
            return True
        if name == "resize":
            return "x" in arg
        if name == "crop":
            return False
    return False


def dptrain_data(dptrain, root, spec, count, seed, epoch, out):
    """dptrain data's samples of the folder, in file order, as [N, C, H, W]."""
    path = os.path.join(out, "data.npy")
    res = subprocess.run([dptrain, "data", "--dataset", "folder", "--data", root,
                          "--train-transform", spec, "--test-transform", spec,
                          "--jpeg-scale", "off", "--no-shuffle",
                          "--seed", str(seed), "--epoch", str(epoch), "--count", str(count),
                          "--workers", "2", "--dump", path], capture_output=True, text=True)
    if res.returncode != 0:
        check(False, "dptrain data %s %s: %s" % (root, spec, res.stderr.strip()))
        return None
    return np.load(path)


def run(tools, roots, spec, exact, seed=7, epoch=3):
    dump, dptrain = tools
    fixed = fixes_size(spec)
    worst_mean = worst_max = 0.0
    images = 0
    for root, files in sorted(roots.items()):
        if fixed != ("-" not in os.path.basename(root)):
            continue
        with tempfile.TemporaryDirectory() as out:
            res = subprocess.run([dump, spec, "off", str(seed), str(epoch), out] + files,
                                 capture_output=True, text=True)
            if res.returncode != 0:
                check(False, "transform_dump %s: %s" % (spec, res.stderr.strip()))
                continue
            data = dptrain_data(dptrain, root, spec, len(files), seed, epoch, out)
            if data is None:
                continue
            recs = [json.loads(line) for line in res.stdout.splitlines()]
            if not check(data.shape[0] == len(files) == len(recs),
                         "%s %s: dptrain data gave %d samples, transform_dump %d, of %d files" % (
                             root, spec, data.shape[0], len(recs), len(files))):
                continue
            for rec in recs:
                # 10 failed tries: 20 uniforms and no randint, then the fallback.
                draws = [d for d in rec["draws"] if d[0] == 0]
                fallbacks[0] += spec.startswith("random-resized-crop") and len(draws) == 20 and all(
                    d[1] == 0 for d in draws)
                ours = data[rec["index"]]
                alone = np.load(os.path.join(out, "%d.npy" % rec["index"]))
                # The loader's sample k is dp_transform_decode's of file k.
                check(ours.shape == alone.shape and np.array_equal(ours, alone),
                      "%s %s: dptrain data's sample %d is not dp_transform_decode's" % (
                          rec["file"], spec, rec["index"]))
                theirs = torchvision_side(rec["file"], spec, rec)
                images += 1
                if ours.shape != theirs.shape:
                    check(False, "%s %s: shape %s, torchvision's %s" % (
                        rec["file"], spec, ours.shape, theirs.shape))
                    continue
                check(np.all(np.isfinite(ours)), "%s %s: not finite" % (rec["file"], spec))
                d = np.abs(ours.astype(np.float64) - theirs)
                mean, mx = float(d.mean()), float(d.max())
                worst_mean, worst_max = max(worst_mean, mean), max(worst_max, mx)
                if exact:
                    check(mx == 0 and np.isfinite(mx),
                          "%s %s: not bit for bit (max %.3g)" % (rec["file"], spec, mx))
                else:
                    check(mean <= MEAN_BOUND and mx <= MAX_BOUND,
                          "%s %s: mean %.3f/255, max %.3f/255" % (rec["file"], spec, mean * 255,
                                                                  mx * 255))
    check(images == 2 * 2 * len(SIZES), "%s: %d images compared, of %d" % (
        spec, images, 2 * 2 * len(SIZES)))
    print("%-50s %d images: worst mean %.4f/255, worst max %.4f/255" % (
        spec, images, worst_mean * 255, worst_max * 255))


def main():
    tools = sys.argv[1:3]
    print("torchvision %s (torch %s, Pillow %s) in %s" % (
        torchvision.__version__, torch.__version__, Image.__version__, sys.executable))
    with tempfile.TemporaryDirectory() as folder:
        roots = make_images(folder)
        for spec in ["resize:256", "resize:64", "resize:100x80", "resize:256,center-crop:224",
                     "center-crop:224", "center-crop:40x60", "imagenet", "random-resized-crop:64",
                     "random-resized-crop:96x64:0.2-0.9:0.5-2", "resize:48,gray",
                     "rgb,random-resized-crop:32,flip"]:
            run(tools, roots, spec, exact=False)
        # Extreme ratios: every try fails on these, the fallback cuts the box.
        run(tools, roots, "random-resized-crop:32:0.9-1:4-5", exact=False)
        run(tools, roots, "random-resized-crop:32:0.9-1:0.1-0.2", exact=False)
        for spec in ["crop:4,flip", "flip", "gray", "rgb", "crop:9", "gray,crop:3,flip"]:
            run(tools, roots, spec, exact=True)
    check(fallbacks[0] >= 20, "RandomResizedCrop's fallback reached %d times, expected it on most "
          "images of the extreme ratios" % fallbacks[0])
    print("RandomResizedCrop's fallback replayed on %d images" % fallbacks[0])
    if failures:
        print("%d failures" % len(failures))
        sys.exit(1)
    print("all match")


main()
