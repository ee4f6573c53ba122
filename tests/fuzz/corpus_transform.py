"""The transform target's seeds for tests/fuzz/make_corpus.py: four list
bytes (tests/fuzz/fuzz_entry.h: the list, its sides, the channels) before
small real JPEGs and PNGs of the kinds cameras and the web hold: baseline
and progressive JPEGs in 4:2:0, 4:2:2 and 4:4:4, grayscale, CMYK (Adobe),
16-bit, palette+alpha and RGBA PNGs. Written with Pillow (the repository
keeps the files, so only a rewrite needs it); `put` is make_corpus's
put(target, name, data)."""
import io


def _image(mode, w, h):
    from PIL import Image
    im = Image.new("RGB", (w, h))
    im.putdata([((x * 37 + y * 11) % 256, (x * 5 + y * 53) % 256, (x * y * 3) % 256)
                for y in range(h) for x in range(w)])
    return im if mode == "RGB" else im.convert(mode)


def _save(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def transform_corpus(put):
    try:
        from PIL import Image
    except ImportError:
        print("make_corpus: no Pillow, the transform seeds are left as they are")
        return
    # (name, file): sides that are not multiples of the MCU, so that DCT
    # scaling and partial decoding meet edge blocks.
    files = [
        ("jpeg-420", _save(_image("RGB", 37, 29), "JPEG", quality=70, subsampling=2)),
        ("jpeg-422", _save(_image("RGB", 40, 23), "JPEG", quality=70, subsampling=1)),
        ("jpeg-444", _save(_image("RGB", 19, 33), "JPEG", quality=70, subsampling=0)),
        ("jpeg-progressive-420", _save(_image("RGB", 45, 31), "JPEG", quality=60,
                                       progressive=True, subsampling=2)),
        ("jpeg-progressive-444", _save(_image("RGB", 24, 18), "JPEG", quality=60,
                                       progressive=True, subsampling=0)),
        ("jpeg-gray", _save(_image("L", 26, 21), "JPEG", quality=70)),
        ("jpeg-gray-progressive", _save(_image("L", 17, 34), "JPEG", quality=70,
                                        progressive=True)),
        ("jpeg-cmyk", _save(_image("CMYK", 22, 20), "JPEG", quality=70)),
        ("png-rgb", _save(_image("RGB", 21, 15), "PNG")),
        ("png-gray", _save(_image("L", 13, 27), "PNG")),
        ("png-gray16", _save(_image("L", 12, 9).convert("I;16"), "PNG")),
        ("png-rgba", _save(_image("RGBA", 16, 11), "PNG")),
        ("png-palette-alpha", _save(_image("RGB", 14, 10).quantize(16), "PNG",
                                    transparency=3)),
        ("png-interlaced", _save(_image("RGB", 18, 13), "PNG", interlace=1)),
    ]
    # List bytes: byte 0 the sizing stage (0 random-resized-crop, 1 resize +
    # center-crop, 2 resize HxW, 3 resize S, 4 center-crop, 5 resize + crop,
    # 6 random-resized-crop + center-crop, 7 none), bit 3 flip, bits 4-5
    # gray/rgb; bytes 1-2 the sides - 1; byte 3 the channels and seed.
    lists = [bytes([0x08, 7, 7 | 0x80, 3]), bytes([0x01, 15, 11, 1]),
             bytes([0x02, 4, 30, 2]), bytes([0x13, 5, 0, 0]), bytes([0x0c, 40, 50, 4]),
             bytes([0x25, 9, 9, 3]), bytes([0x06, 63, 20, 5]), bytes([0x37, 0, 0, 0])]
    for i, (name, data) in enumerate(files):
        put("transform", name, lists[i % len(lists)] + data)
    # Near-valid: cut JPEGs (the decoder meets the end mid-scan) and a
    # corrupt scan, a cut PNG, not an image.
    jpeg = files[3][1]
    put("transform", "jpeg-progressive-cut", lists[0] + jpeg[:len(jpeg) * 2 // 3])
    put("transform", "jpeg-420-cut", lists[1] + files[0][1][:len(files[0][1]) - 40])
    bad = bytearray(files[2][1])
    for k in range(len(bad) - 60, len(bad) - 10, 7):
        bad[k] ^= 0x5a
    put("transform", "jpeg-444-corrupt-scan", lists[2] + bytes(bad))
    put("transform", "png-cut", lists[3] + files[8][1][:50])
    put("transform", "text", lists[4] + b"hello, world\n")
