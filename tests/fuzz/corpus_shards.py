"""The shards seeds of tests/fuzz/make_corpus.py: tar shards as Python's
tarfile writes them (ustar, GNU and pax, as WebDataset's writers do), whole,
cut short and malformed, behind the shards target's mode byte. Its corpus
function takes make_corpus's put(target, name, data); run alone, it writes
tests/fuzz/corpus/shards/ only."""
import io
import os
import tarfile


def shard(members, fmt=tarfile.USTAR_FORMAT):
    """members: (name, bytes) pairs as one tar file, times and owners 0."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
    return out.getvalue()


def samples(n, ext="jpg", first=0):
    return [m for i in range(first, first + n)
            for m in (("%06d.%s" % (i, ext), bytes([i % 256]) * (50 + 7 * i)),
                      ("%06d.cls" % i, b"%d\n" % (i % 3)))]


def shards_corpus(put):
    whole = shard(samples(3))
    put("shards", "three-samples", b"\x00" + whole)
    put("shards", "three-samples-shuffled", b"\x0b" + whole)
    put("shards", "png-in-dirs-gnu", b"\x09" + shard(
        [("a/%s" % n, d) for n, d in samples(2, "png")], tarfile.GNU_FORMAT))
    put("shards", "long-names-pax", b"\x0c" + shard(
        [("d" * 120 + "/" + n, d) for n, d in samples(2)], tarfile.PAX_FORMAT))
    put("shards", "extras-and-meta", b"\x03" + shard(
        [("__meta__", b"x"), ("README", b"no dot")] + samples(1) +
        [("000000.json", b"{}")] + samples(1, "jpeg", 1)))
    put("shards", "cut-mid-file", b"\x01" + whole[:1700])
    put("shards", "cut-mid-header", b"\x01" + whole[:2100])
    put("shards", "no-label", b"\x01" + shard(samples(1) + [("000009.jpg", b"x")]))
    put("shards", "label-not-a-number", b"\x01" + shard([("a.jpg", b"x"), ("a.cls", b"cat")]))
    put("shards", "keys-apart", b"\x01" + shard(
        samples(2) + [("000000.txt", b"again")]))
    put("shards", "empty", b"\x01" + shard([]))
    put("shards", "not-a-tar", b"\x01" + b"hello, world\n" * 50)


if __name__ == "__main__":
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "shards")
    os.makedirs(here, exist_ok=True)

    def put_here(target, name, data):
        with open(os.path.join(here, name), "wb") as f:
            f.write(data)

    shards_corpus(put_here)
