#!/usr/bin/env python3
"""The machine code of the pipelines in an NVIDIA pipeline-cache file.

`LOOM_PIPELINE_CACHE=FILE` makes the runtime save the Vulkan pipeline cache.
The NVIDIA driver (580) writes it as the 32-byte Vulkan header, a header of
its own, then one zstd frame a pipeline; each frame opens with
"NVDANVVMNVuc", and the u32 at byte 76 is the code's size, the u32 at byte
80 its offset from byte 8. This script cuts each pipeline's code out and,
where `nvdisasm` is found (CUDA's, or triton's copy), disassembles it.

    python3 tools/sass.py FILE OUTDIR [--arch SM90] [--nvdisasm PATH]

OUTDIR gets NN.bin (the code) and NN.sass (its disassembly) per pipeline
and index.txt: NN, code bytes, and counts of the instructions asked about
most (ISETP, HMMA, IDP, LDS, LDSM, STS, LDG, STG, BAR, SHFL, IMAD, FFMA), so that a frame can
be matched to a kernel by the size `LOOM_KERNEL_STATS=1` prints. The format
is the driver's and undocumented: what is read here is what was seen.
"""
import os
import re
import shutil
import struct
import subprocess
import sys

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def frames(blob):
    i = blob.find(ZSTD_MAGIC)
    while i >= 0:
        yield i
        i = blob.find(ZSTD_MAGIC, i + 1)


def main():
    args = sys.argv[1:]
    arch, nvd = "SM90", None
    if "--arch" in args:
        k = args.index("--arch"); arch = args[k + 1]; del args[k:k + 2]
    if "--nvdisasm" in args:
        k = args.index("--nvdisasm"); nvd = args[k + 1]; del args[k:k + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    path, outdir = args
    zstd = shutil.which("zstd") or sys.exit("sass.py: zstd not found")
    nvd = nvd or shutil.which("nvdisasm")
    os.makedirs(outdir, exist_ok=True)
    blob = open(path, "rb").read()
    rows, n = [], 0
    for off in frames(blob):
        raw = subprocess.run([zstd, "-dcq"], input=blob[off:], capture_output=True).stdout
        if not raw.startswith(b"NVDANVVMNVuc") or len(raw) < 84:
            continue
        size, start = struct.unpack_from("<II", raw, 76)
        code = raw[8 + start:8 + start + size]
        if len(code) != size or size % 16:
            print(f"frame at {off}: code {size} bytes at {start} does not fit; skipped", file=sys.stderr)
            continue
        name = f"{n:02d}"
        open(os.path.join(outdir, name + ".bin"), "wb").write(code)
        text = ""
        if nvd:
            r = subprocess.run([nvd, "-b", arch, os.path.join(outdir, name + ".bin")], capture_output=True, text=True)
            text = r.stdout + r.stderr
            open(os.path.join(outdir, name + ".sass"), "w").write(text)
        counts = {op: len(re.findall(r"\b" + op + r"\b", text))
                  for op in ("ISETP", "HMMA", "IDP", "LDS", "LDSM", "STS", "LDG", "STG", "BAR", "SHFL", "IMAD", "FFMA")}
        rows.append(f"{name} {size:7d} " + " ".join(f"{k}={v}" for k, v in counts.items()))
        n += 1
    open(os.path.join(outdir, "index.txt"), "w").write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
