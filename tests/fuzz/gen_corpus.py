#!/usr/bin/env python3
"""gen_corpus.py — writes the committed seed corpus of the fuzz targets (corpus/safetensors, corpus/idx):
small valid files of every dtype and layout the readers accept, and near-valid ones that stop at each
check. Dev-time only (python3, standard library): `python3 tests/fuzz/gen_corpus.py`."""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(kind, name, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def st(header, data=b"", pad=True):
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


# ---- safetensors ----
write("safetensors", "f32_2x3", st({"w": entry("F32", [2, 3], 0, 24)}, struct.pack("<6f", *range(6))))
mixed = {"__metadata__": {"format": "pt"}, "d": entry("F64", [2], 0, 16), "l": entry("I64", [], 16, 24),
         "i": entry("I32", [1, 1], 24, 28), "h": entry("F16", [2], 28, 32), "b": entry("BF16", [1], 32, 34),
         "u": entry("U8", [3], 34, 37), "s": entry("I8", [1], 37, 38), "z": entry("BOOL", [2], 38, 40),
         "e": entry("F32", [0, 4], 40, 40)}
write("safetensors", "mixed_dtypes", st(mixed, bytes(range(40))))
write("safetensors", "empty", st({}))
write("safetensors", "unaligned", st({"a": entry("U8", [1], 0, 1), "b": entry("F32", [1], 1, 5)}, bytes(5), pad=False))
write("safetensors", "i16_unsupported", st({"a": entry("I16", [2], 0, 4)}, bytes(4)))
write("safetensors", "hole", st({"a": entry("F32", [1], 0, 4), "b": entry("F32", [1], 8, 12)}, bytes(12)))
write("safetensors", "overlap", st({"a": entry("F32", [2], 0, 8), "b": entry("F32", [1], 4, 8)}, bytes(8)))
write("safetensors", "size_mismatch", st({"a": entry("F32", [3], 0, 8)}, bytes(8)))
write("safetensors", "truncated", st({"w": entry("F32", [2, 3], 0, 24)}, bytes(20)))
write("safetensors", "header_too_long", struct.pack("<Q", 1 << 40) + b"{}")
write("safetensors", "duplicate_key", struct.pack("<Q", 16) + b'{"a":{},"a":{}} ')

# ---- IDX (plain and gzip'd) ----
def idx(code, shape, payload):
    return bytes([0, 0, code, len(shape)]) + b"".join(struct.pack(">I", s) for s in shape) + payload


write("idx", "u8_labels", idx(0x08, [3], bytes([1, 2, 9])))
images = idx(0x08, [2, 2, 3], bytes(range(12)))
write("idx", "u8_images", images)
write("idx", "u8_images.gz", gzip.compress(images, mtime=0))
write("idx", "i8", idx(0x09, [2], b"\x80\x7f"))
write("idx", "i32", idx(0x0C, [2], struct.pack(">2i", -1, 7)))
write("idx", "f32", idx(0x0D, [2, 1], struct.pack(">2f", 0.5, -2)))
write("idx", "f64", idx(0x0E, [1], struct.pack(">d", 3.25)))
write("idx", "zero_rows", idx(0x08, [0, 28, 28], b""))
write("idx", "i16_unsupported", idx(0x0B, [1], b"\0\1"))
write("idx", "truncated", idx(0x08, [4], b"\1\2"))
write("idx", "trailing", idx(0x08, [1], b"\1\2"))
write("idx", "bad_magic", b"\0\1\x08\1\0\0\0\1\5")
gz = bytearray(gzip.compress(idx(0x08, [4], b"abcd"), mtime=0))
gz[-8] ^= 1  # CRC-32 mismatch
write("idx", "bad_crc.gz", bytes(gz))
