"""Writes an ImageFolder tree of JPEGs of assorted sizes, for the
ImageNet-style recipe (examples/imagenet_style/recipe.sh):

    python3 make_images.py DIR [--classes 10] [--train 20] [--test 4]
                           [--min 300] [--max 500] [--photo PHOTO.jpg]

DIR/train/class_K/N.jpg and DIR/test/class_K/N.jpg, each W x H with W and
H drawn from [min, max] on their own (so aspect ratios vary as photos'
do). Class K is a hue (K / classes of the colour wheel) with noise and a
few ellipses of its complementary hue, so the classes can be told apart
after any crop. --photo also writes one held-out image of class 3 at
another size (640 x 480), for `dptrain predict`. Needs Pillow (Debian's
python3-pil, or pip's Pillow); the images are a function of the
arguments alone (seeded)."""
import argparse
import colorsys
import os
import random

from PIL import Image, ImageDraw

p = argparse.ArgumentParser()
p.add_argument("dir")
p.add_argument("--classes", type=int, default=10)
p.add_argument("--train", type=int, default=20, help="images a class in train/")
p.add_argument("--test", type=int, default=4, help="images a class in test/")
p.add_argument("--min", type=int, default=300, help="smallest side drawn, pixels")
p.add_argument("--max", type=int, default=500, help="largest side drawn, pixels")
p.add_argument("--photo", help="also write one class-3 image of 640 x 480 here")
a = p.parse_args()
rng = random.Random(0)


def rgb(h, s, v):
    return tuple(int(255 * c) for c in colorsys.hsv_to_rgb(h % 1.0, s, v))


def image(k, w, h):
    hue = k / a.classes
    img = Image.new("RGB", (w, h), rgb(hue, 0.7, 0.8))
    d = ImageDraw.Draw(img)
    for _ in range(rng.randint(2, 5)):
        x, y = rng.randrange(w), rng.randrange(h)
        r = rng.randint(min(w, h) // 10, min(w, h) // 4)
        d.ellipse((x - r, y - r, x + r, y + r), fill=rgb(hue + 0.5, 0.6, rng.uniform(0.3, 1.0)))
    # noise: PIL's effect_noise as a grey layer blended in
    noise = Image.effect_noise((w, h), 40).convert("RGB")
    return Image.blend(img, noise, 0.15)


count = 0
for split, n in (("train", a.train), ("test", a.test)):
    for k in range(a.classes):
        folder = os.path.join(a.dir, split, f"class_{k}")
        os.makedirs(folder, exist_ok=True)
        for i in range(n):
            w, h = rng.randint(a.min, a.max), rng.randint(a.min, a.max)
            image(k, w, h).save(os.path.join(folder, f"{i}.jpg"), quality=90)
            count += 1
if a.photo:
    image(3, 640, 480).save(a.photo, quality=90)
print(f"wrote {count} JPEGs of {a.min}-{a.max} px to {a.dir} ({a.classes} classes)"
      + (f", and {a.photo} (class_3, 640x480)" if a.photo else ""))
