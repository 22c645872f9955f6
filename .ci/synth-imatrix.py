#!/usr/bin/env python3
"""Write a synthetic importance matrix (docs/format.md, "The imatrix file") for every 2-D and 3-D tensor of a
safetensors snapshot: in_sum2 lognormal (sigma 1.5, seed 1) per column, counts 100 per matrix. For speed
measurements (.ci/bench-imatrix), not for quality.

    python3 .ci/synth-imatrix.py SNAPSHOT_DIR OUT.imatrix.safetensors
"""
import glob, json, math, os, random, struct, sys

snap, out = sys.argv[1], sys.argv[2]
shapes = {}
for f in sorted(glob.glob(os.path.join(snap, "*.safetensors"))):
    with open(f, "rb") as fh:
        n = struct.unpack("<Q", fh.read(8))[0]
        for name, e in json.loads(fh.read(n)).items():
            if name != "__metadata__" and len(e["shape"]) in (2, 3):
                shapes[name] = e["shape"]
rng = random.Random(1)
header, chunks, off = {"__metadata__": {"dgq_version": "synthetic", "text_sha256": "0" * 64}}, [], 0
for name in sorted(shapes):
    shape = shapes[name]
    experts, k = (shape[0] if len(shape) == 3 else 1), shape[-1]
    for suffix, vals, shp in ((".counts", [100.0] * experts, [experts] if len(shape) == 3 else [1]),
                              (".in_sum2", [math.exp(1.5 * rng.gauss(0, 1)) for _ in range(experts * k)],
                               [experts, k] if len(shape) == 3 else [k])):
        b = struct.pack("<%df" % len(vals), *vals)
        header[name + suffix] = {"dtype": "F32", "shape": shp, "data_offsets": [off, off + len(b)]}
        chunks.append(b)
        off += len(b)
h = json.dumps(header, sort_keys=True).encode()
h += b" " * (-len(h) % 8)
with open(out + ".tmp", "wb") as fh:
    fh.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))
os.replace(out + ".tmp", out)
