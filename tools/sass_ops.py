"""SASS opcode counts of kernel/flash_fwd.cu for given configurations (nvcc -cubin, then cuobjdump -sass).

    PYTHONPATH=. python3 tools/sass_ops.py [--arch sm_90] [--ops I2F,MUFU,F2FP,HMMA,IMMA,QMMA] CONFIG...

CONFIG: comma-separated KernelConfig.default overrides, e.g. head_dim=128,quant=int8,pv_accum=f16. Prints one line
per configuration: the static count of each opcode (by its first dotted part) in the kernel's SASS. Needs nvcc and
cuobjdump (the device machine has both; no GPU is used).
"""
from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile

from flashsim.config import KernelConfig
from flashsim.gpu.build import kernel_path
from flashsim.gpu.launch import build_defines


def _value(text: str):
    return int(text) if text.lstrip("-").isdigit() else {"true": True, "false": False}.get(text.lower(), text)


def opcode_counts(cfg: KernelConfig, arch: str) -> collections.Counter:
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        cmd = ["nvcc", f"-arch={arch}", "-cubin", "-o", cubin, str(kernel_path("flash_fwd.cu"))]
        cmd += [f"-D{k}={v}" for k, v in build_defines(cfg).items()]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        sass = subprocess.run(["cuobjdump", "-sass", cubin], check=True, capture_output=True, text=True).stdout
    ops = collections.Counter()
    for line in sass.splitlines():
        parts = line.split("*/")
        if len(parts) >= 2 and line.strip().startswith("/*") and parts[1].strip():
            words = parts[1].split()
            op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            ops[op.split(".")[0].rstrip(";")] += 1
    return ops


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--ops", default="I2F,I2FP,MUFU,F2FP,FMUL,FADD,FFMA,IADD3,HMMA,IMMA,QMMA")
    p.add_argument("configs", nargs="+")
    args = p.parse_args(argv)
    for spec in args.configs:
        over = {k: _value(v) for k, v in (kv.split("=", 1) for kv in spec.split(","))}
        cfg = KernelConfig.default(args.arch, **over)
        ops = opcode_counts(cfg, args.arch)
        print(f"{args.arch} {spec}: " + ", ".join(f"{o} {ops[o]}" for o in args.ops.split(",")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
