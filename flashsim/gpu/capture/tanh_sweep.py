"""``tanh.approx.f32`` against flashsim.numerics.sfu_tanh's model over all 2^32 inputs, on the GPU:
``python3 -m flashsim.gpu.capture.tanh_sweep --out DIR`` (cupy; about a minute with the NVRTC build).

kernel/capture/tanh_model.cu evaluates the model (the same description as flashsim.numerics.sfu_interp: the
tables of flashsim/data/sfu/tanh_interp_sm90.npz, the folded squarer, the exact sum truncated toward zero) next to
the instruction, in chunks of 2^28 inputs, and counts the inputs where they differ, per input exponent, keeping the
first ones with both results. Writes ``tanh_sweep_sm90.json``. tests/test_sfu_tanh.py runs the same kernel's model
through flashsim.ptx against the numpy model, so a mismatch on the GPU is the unit's, not the kernel's.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from ...numerics import sfu_tanh

SOURCE = pathlib.Path(__file__).resolve().parents[3] / "kernel" / "capture" / "tanh_model.cu"
CHUNK = 1 << 28
FIRST_CAP = 256
BLOCK = 256


def table_arrays() -> list[np.ndarray]:
    """The kernel's table parameters (c0, c1, c2, base, shift, lsb) from the shipped model."""
    unit = sfu_tanh.tanh_unit()
    es = sorted(unit.binades)
    assert es == list(range(119, 130)), es
    c0, c1, c2, base, shift, lsb, at = [], [], [], [], [], [], 0
    for e in es:
        b = unit.binades[e]
        c0 += list(b.c0)
        c1 += list(b.c1)
        c2 += list(b.c2)
        base.append(at)
        shift.append(23 - b.fmt.mant_bits)
        lsb.append(b.fmt.lsb_exp)
        at += b.c0.size
    return [np.array(v, np.int64) for v in (c0, c1, c2)] + [np.array(v, np.int32) for v in (base, shift, lsb)]


def sweep(out_dir: pathlib.Path, start: int = 0, stop: int = 1 << 32, log=print) -> dict:
    import cupy as cp

    t0 = time.time()
    mod = cp.RawModule(code=SOURCE.read_text(), options=("-std=c++17",), name_expressions=None)
    kern = mod.get_function("tanh_sweep_kernel")
    tables = [cp.asarray(a) for a in table_arrays()]
    per_e = cp.zeros(256, cp.uint64)
    first = cp.zeros(FIRST_CAP, cp.uint32)
    nfirst = cp.zeros(1, cp.uint32)
    build = time.time() - t0
    for s in range(start, stop, CHUNK):
        n = min(CHUNK, stop - s)
        kern(
            ((n + BLOCK - 1) // BLOCK,),
            (BLOCK,),
            (np.uint32(s), np.uint32(n), per_e, first, nfirst, np.uint32(FIRST_CAP), *tables),
        )
    cp.cuda.Device().synchronize()
    per_e, first, nfirst = per_e.get(), first.get(), int(nfirst.get()[0])
    first = np.sort(first[: min(nfirst, FIRST_CAP)])
    hw = cp.empty(first.size, cp.float32)
    if first.size:  # both results of the first mismatches, for the record
        xs = cp.asarray(first).view(cp.float32)
        hw = (
            cp.ElementwiseKernel(
                "float32 x", "float32 y", 'asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));', "hw_tanh"
            )(xs)
            .view(cp.uint32)
            .get()
        )
    model = sfu_tanh.tanh_f32_bits(first)
    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    summary = {
        "form": "tanh.approx.f32",
        "device": dev["name"].decode() if isinstance(dev["name"], bytes) else str(dev["name"]),
        "inputs": [start, stop],
        "checked": stop - start,
        "mismatches": int(per_e.sum()),
        "mismatches_by_exponent": {str(e): int(c) for e, c in enumerate(per_e) if c},
        "first": [[f"{int(x):08x}", f"{int(h):08x}", f"{int(m):08x}"] for x, h, m in zip(first, hw, model)],
        "build_seconds": round(build, 2),
        "seconds": round(time.time() - t0, 2),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tanh_sweep_sm90.json").write_text(json.dumps(summary, indent=1))
    log(f"{summary['device']}: {summary['mismatches']:,} mismatches of {summary['checked']:,} ({summary['seconds']} s)")
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, required=True)
    ap.add_argument("--start", type=lambda s: int(s, 0), default=0)
    ap.add_argument("--stop", type=lambda s: int(s, 0), default=1 << 32)
    args = ap.parse_args(argv)
    s = sweep(args.out, args.start, args.stop)
    return 0 if s["mismatches"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
