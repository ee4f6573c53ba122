"""The .npy and image seeds of tests/fuzz/make_corpus.py: .npy files as
numpy.lib.format writes them, and PNGs (written here with zlib alone) and
JPEGs (written once by libjpeg-turbo, kept as hex) behind the image
target's channels byte. Each corpus function takes make_corpus's
put(target, name, data)."""
import struct
import zlib


# ---- npy: a .npy file; image: a channels byte, then a PNG or JPEG ------------

def npy(descr, shape, data, version=1, fortran=False, dict_text=None):
    """A .npy file as numpy.lib.format writes it (header padded to 64)."""
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    text = dict_text or "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
        descr, "True" if fortran else "False", dims)
    pre = 10 if version == 1 else 12
    pad = (64 - (pre + len(text) + 1) % 64) % 64
    header = (text + " " * pad + "\n").encode()
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([version, 0]) + size + header + data


def npy_corpus(put):
    u8 = bytes(range(24))
    put("npy", "u8-3d", npy("|u1", (2, 3, 4), u8))
    put("npy", "f32-4d", npy("<f4", (1, 2, 1, 2), struct.pack("<4f", 0, 0.5, 1, -2)))
    put("npy", "i64-labels", npy("<i8", (3,), struct.pack("<3q", 0, 9, 2)))
    put("npy", "i32-labels", npy("<i4", (2,), struct.pack("<2i", 1, 0)))
    put("npy", "empty", npy("|u1", (0, 28, 28), b""))
    put("npy", "scalar", npy("<f4", (), struct.pack("<f", 3)))
    put("npy", "version2", npy("|u1", (4,), b"abcd", version=2))
    put("npy", "version3", npy("|u1", (4,), b"abcd", version=3))
    put("npy", "fortran", npy("|u1", (2, 2), b"abcd", fortran=True))
    put("npy", "big-endian", npy(">f4", (1,), b"\0\0\0\0"))
    put("npy", "truncated", npy("|u1", (2, 3, 4), u8[:20]))
    put("npy", "trailing", npy("|u1", (2, 3), u8))
    put("npy", "double-quotes", npy("|u1", (4,), b"abcd",
                                    dict_text='{"descr": "|u1", "shape": (4,), '
                                              '"fortran_order": False}'))


def png(width, height, color_type, rows, depth=8, palette=None, interlace=0):
    """A PNG of filter-0 rows (each row's bytes as given)."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff))
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, interlace)
    raw = b"".join(b"\0" + bytes(r) for r in rows)
    plte = chunk(b"PLTE", bytes(palette)) if palette else b""
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + plte +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


JPEG_GRAY = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e12"
    "11101318281a181616183123251d283a333d3c3933383740485c4e404457453738506d51"
    "575f626768673e4d71797064785c656763ffc0000b080008000801011100ffc4001f0000"
    "010501010101010100000000000000000102030405060708090a0bffc400b51000020103"
    "03020403050504040000017d01020300041105122131410613516107227114328191a108"
    "2342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445"
    "464748494a535455565758595a636465666768696a737475767778797a83848586878889"
    "8a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9"
    "cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffda00080101"
    "00003f00a5e1eb1fbbc57fffd9")
# 8 x 8 RGB and a progressive one, quality 50, written once by libjpeg-turbo
JPEG_RGB = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e12"
    "11101318281a181616183123251d283a333d3c3933383740485c4e404457453738506d51"
    "575f626768673e4d71797064785c656763ffdb0043011112121815182f1a1a2f63423842"
    "636363636363636363636363636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363ffc00011080008000803012200021101031101ffc400"
    "1f0000010501010101010100000000000000000102030405060708090a0bffc400b51000"
    "02010303020403050504040000017d010203000411051221314106135161072271143281"
    "91a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a"
    "434445464748494a535455565758595a636465666768696a737475767778797a83848586"
    "8788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6"
    "c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffc400"
    "1f0100030101010101010101010000000000000102030405060708090a0bffc400b51100"
    "020102040403040705040400010277000102031104052131061241510761711322328108"
    "144291a1b1c109233352f0156272d10a162434e125f11718191a262728292a3536373839"
    "3a434445464748494a535455565758595a636465666768696a737475767778797a828384"
    "85868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4"
    "c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda00"
    "0c03010002110311003f004b0b700e8f164701dd877fe1c1fe74514579d8dc754c3b4a29"
    "3bdf7f5051b9ffd9")
JPEG_PROGRESSIVE = bytes.fromhex(
    "ffd8ffe000104a46494600010100000100010000ffdb004300100b0c0e0c0a100e0d0e12"
    "11101318281a181616183123251d283a333d3c3933383740485c4e404457453738506d51"
    "575f626768673e4d71797064785c656763ffdb0043011112121815182f1a1a2f63423842"
    "636363636363636363636363636363636363636363636363636363636363636363636363"
    "6363636363636363636363636363ffc20011080008000803012200021101031101ffc400"
    "1500010100000000000000000000000000000001ffc40015010101000000000000000000"
    "00000000000004ffda000c030100021003100000018267ffc40015100101000000000000"
    "00000000000000000200ffda000801010001050206ffc400151101010000000000000000"
    "0000000000000011ffda0008010301013f018fffc4001711010003000000000000000000"
    "0000000003000231ffda0008010201013f0167b1e4ffc400161000030000000000000000"
    "000000000000000103ffda0008010100063f028a3fffc400161001010100000000000000"
    "00000000000001a100ffda0008010100013f21b0b37fffda000c03010002000300000010"
    "fbffc400161100030000000000000000000000000000000111ffda0008010301013f1054"
    "7fffc4001811010100030000000000000000000000000111003171ffda0008010201013f"
    "106000dbbee7ffc4001a1001000105000000000000000000000000010011214151b1ffda"
    "0008010100013f1021aa5836747b3fffd9")


def image_corpus(put):
    gray = [[(x * 30 + y) % 256 for x in range(5)] for y in range(4)]
    rgb = [[(x * 50 + y * 7 + c) % 256 for x in range(3) for c in range(3)] for y in range(2)]
    rgba = [[(x * 50 + c) % 256 for x in range(3) for c in range(4)] for y in range(2)]
    for mode in range(3):
        put("image", "gray-png-%d" % mode, bytes([mode]) + png(5, 4, 0, gray))
        put("image", "rgb-png-%d" % mode, bytes([mode]) + png(3, 2, 2, rgb))
        put("image", "gray-jpeg-%d" % mode, bytes([mode]) + JPEG_GRAY)
        put("image", "rgb-jpeg-%d" % mode, bytes([mode]) + JPEG_RGB)
    put("image", "rgba-png", b"\0" + png(3, 2, 6, rgba))
    put("image", "palette-png", b"\0" + png(2, 2, 3, [[0, 1], [1, 0]], palette=[255, 0, 0, 0, 0, 255]))
    put("image", "gray16-png", b"\0" + png(2, 1, 0, [[1, 2, 3, 4]], depth=16))
    put("image", "progressive-jpeg", b"\0" + JPEG_PROGRESSIVE)
    put("image", "truncated-png", b"\0" + png(5, 4, 0, gray)[:40])
    put("image", "truncated-jpeg", b"\0" + JPEG_RGB[:300])
    put("image", "huge-png", b"\0" + png(100000, 1, 0, [[0]]))
    put("image", "text", b"\0hello, world\n")
