#!/usr/bin/env python3
"""Quantise a bf16 safetensors checkpoint to W8A16, written apart from amk.

Reads IN.safetensors (a Llama-family checkpoint whose projections are BF16)
and writes OUT.safetensors in the int8 layout amk loads directly
(docs/spec/quantization.md, "Files"):

  KEY          I8  [N, K]  q, two's complement
  KEY.scales   F16 [N, 1]  s, one scale per output row

for every 2-D BF16 tensor whose key ends in "_proj.weight" or is
"lm_head.weight"; every other tensor is copied unchanged. With
--lm-head-from KEY (a tied model) the lm_head is quantised from the
embedding table KEY and written as lm_head.weight.

The scheme, per output row: s = the float16 value nearest max|w| / 127
(ties to even); q = w / s rounded half to even, clamped to [-127, 127]
(0 where s is 0). Only the Python standard library is used: no numpy, no
torch, nothing of amk.
"""

import argparse
import array
import json
import struct
import sys

QMAX = 127


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        sys.exit(f"{path}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        sys.exit(f"{path}: header length {n} beyond the file")
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for key, e in header.items():
        if key == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        tensors[key] = (e["dtype"], e["shape"], data[base + begin : base + end])
    return tensors


def bf16_to_floats(raw):
    """BF16 little-endian bytes -> an array of float32 values (exact)."""
    out = bytearray(2 * len(raw))
    out[2::4] = raw[0::2]
    out[3::4] = raw[1::2]
    vals = array.array("f")
    vals.frombytes(bytes(out))
    if sys.byteorder != "little":
        vals.byteswap()
    return vals


def quantize_rows(vals, rows, cols):
    """Per-row symmetric int8: (int8 bytes, float16 scale bytes)."""
    q = bytearray(rows * cols)
    scales = bytearray()
    for r in range(rows):
        row = vals[r * cols : (r + 1) * cols]
        amax = max(abs(v) for v in row)
        try:
            packed = struct.pack("<e", amax / QMAX)  # nearest float16, ties to even
        except OverflowError:
            sys.exit(f"row {r}: max |w| = {amax} needs a scale beyond the float16 range")
        scales += packed
        (s,) = struct.unpack("<e", packed)
        if s == 0:
            continue
        for c, v in enumerate(row):
            x = max(-QMAX, min(QMAX, round(v / s)))  # round() is half to even
            q[r * cols + c] = x & 0xFF
    return bytes(q), bytes(scales)


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for key in sorted(tensors):
        dtype, shape, raw = tensors[key]
        header[key] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt", "quantization": "w8a16"}
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--lm-head-from", default="", help="quantise this embedding table as lm_head.weight (tied models)")
    args = ap.parse_args()
    tensors = read_safetensors(args.input)
    out = {}
    todo = []
    for key, (dtype, shape, raw) in tensors.items():
        quantise = len(shape) == 2 and (key.endswith("_proj.weight") or key == "lm_head.weight")
        if quantise and dtype != "BF16":
            sys.exit(f"{key}: dtype {dtype}; this script quantises BF16 projections")
        if quantise:
            todo.append((key, key))
        else:
            out[key] = (dtype, shape, raw)
    if args.lm_head_from:
        if args.lm_head_from not in tensors or "lm_head.weight" in tensors:
            sys.exit(f"--lm-head-from {args.lm_head_from}: not in the file, or the file has its own lm_head.weight")
        todo.append(("lm_head.weight", args.lm_head_from))
    for dst, src in todo:
        dtype, (rows, cols), raw = tensors[src]
        q, scales = quantize_rows(bf16_to_floats(raw), rows, cols)
        out[dst] = ("I8", [rows, cols], q)
        out[dst + ".scales"] = ("F16", [rows, 1], scales)
    write_safetensors(args.output, out)
    print(f"{args.output}: {len(todo)} projections quantised to int8 with per-row float16 scales", file=sys.stderr)


if __name__ == "__main__":
    main()
