"""Capture ``tanh.approx.f32`` on every input of whole binades, for fitting the SFU's interpolator segment by
segment (benchmarks/experiments/tanh_interpolator): ``python3 -m flashsim.gpu.capture.tanh --out DIR``.

The instruction runs through kernel/capture/sfu_approx.cu's ``hw_apply`` (the inline PTX the exhaustive sweep of
benchmarks/logs/2026-12-01/sfu_approx used), on x = +-2^(E-127) (1 + m 2^-M) for every m < 2^M (M = 23: every
f32 of the binade) and each biased exponent E asked for (default 117..130: from where the result is x to where it
is +-1, one binade beyond each end).

Storage, per binade (``tanh_<tag>_e<E>.npz``, np.savez_compressed): the positive results as ``first`` (the bits at
m = 0) and the differences of consecutive result bit patterns as int8 (mostly 0 / 1 / 2: the outputs are monotone
and their steps are at most a few ulps), differences outside [-127, 127] as -128 with their positions and values in
``esc_pos`` / ``esc_val``; the negative side as the positions ``neg_pos`` and results ``neg_val`` where it is not
the positive result with its sign flipped (the H200 is odd everywhere but NaN). The error against float32(tanh)
stored instead compresses 15% better on results with random +-1 ulp noise and 1.4 .. 1.7 times worse on a
synthetic unit whose error is a smooth +-7 .. +-30 ulps (the H200's reaches about +-130): measured sizes in the
folder's README. The binade files are then packed into at most 7 tar files of at most 15 MB each
(``tanh_<tag>_e<E1>-<E2>.tar``) so that the device machine returns them, and ``summary_tanh_<tag>.json`` records per
binade the error range against float32(tanh(x)), where the result is +-1 or x, the result exponents, odd-symmetry
failures, whether the lowest input bit matters, the timings, and whether ``tanh.approx.f16`` / ``.bf16`` (already
modelled as measured 2^16-entry tables) equal the f32 instruction on the widened input rounded
to nearest. ``read_capture`` reads a folder of either form.

``--fake`` replaces the GPU with flashsim.numerics.sfu_interp.synthetic_tanh (the host logic and the file format
without a GPU).
"""

from __future__ import annotations

import argparse
import io
import json
import pathlib
import sys
import tarfile
import time

import numpy as np

from ... import calibration
from ...numerics import sfu_interp
from ...numerics.rounding import f16_to_f32, f32_to_bf16, f32_to_f16
from ...numerics.sfu_approx import FORMS

FORM = "tanh.approx.f32"
DEFAULT_EXPONENTS = tuple(range(117, 131))
MAX_TAR_BYTES = 15 << 20
MAX_TARS = 7
ESCAPE = -128


def encode_binade(E: int, mant_bits: int, pos: np.ndarray, neg: np.ndarray) -> dict[str, np.ndarray]:
    """npz entries of one binade's results (module docstring): ``pos`` / ``neg`` the result bits of +x / -x."""
    pos, neg = np.asarray(pos, np.uint32), np.asarray(neg, np.uint32)
    d = np.diff(pos.astype(np.int64))
    esc = np.flatnonzero((d < -127) | (d > 127))
    small = d.astype(np.int8)
    small[esc] = ESCAPE
    odd_bad = np.flatnonzero(neg != (pos ^ sfu_interp.SIGN))
    return {
        "exponent": np.array(E),
        "mant_bits": np.array(mant_bits),
        "first": np.array(pos[0], np.uint32),
        "delta": small,
        "esc_pos": esc.astype(np.uint32),
        "esc_val": d[esc],
        "neg_pos": odd_bad.astype(np.uint32),
        "neg_val": neg[odd_bad],
    }


def decode_binade(entries, out=None) -> tuple[int, int, np.ndarray, np.ndarray]:
    """(E, M, positive result bits, negative result bits) from ``encode_binade``'s entries; ``out``: a dict of reusable
    uint32 buffers (``iter_capture``'s), whose arrays the results are then views of. The steps are summed in uint32,
    whose wrap-around is exact modulo 2^32 (the result bits)."""
    delta = np.asarray(entries["delta"])
    n = delta.size + 1
    buf = {} if out is None else out
    if buf.get("pos") is None or buf["pos"].size < n:
        buf.update(d=np.empty(n - 1, np.uint32), pos=np.empty(n, np.uint32), neg=np.empty(n, np.uint32))
    d, pos, neg = buf["d"][: n - 1], buf["pos"][:n], buf["neg"][:n]
    d[...] = delta.astype(np.uint32)  # -1 -> 2^32 - 1: a step down, modulo 2^32
    d[np.asarray(entries["esc_pos"], np.int64)] = np.asarray(entries["esc_val"], np.int64).astype(np.uint32)
    pos[0] = 0
    np.cumsum(d, dtype=np.uint32, out=pos[1:])
    pos += np.uint32(int(entries["first"]))
    np.bitwise_xor(pos, sfu_interp.SIGN, out=neg)
    neg[np.asarray(entries["neg_pos"], np.int64)] = np.asarray(entries["neg_val"], np.uint32)
    return int(entries["exponent"]), int(entries["mant_bits"]), pos, neg


def inputs(E: int, mant_bits: int) -> np.ndarray:
    """The positive inputs of binade E on the M-bit mantissa grid."""
    m = np.arange(1 << mant_bits, dtype=np.uint32) << np.uint32(23 - mant_bits)
    return (np.uint32(E) << np.uint32(23)) | m


def _runs(mask: np.ndarray, limit: int = 16) -> list:
    """[first, last] index runs where ``mask`` holds (the first ``limit``)."""
    idx = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [[int(a), int(b) - 1] for a, b in zip(idx[0::2][:limit], idx[1::2][:limit])]


def binade_summary(E: int, mant_bits: int, pos: np.ndarray, neg: np.ndarray) -> dict:
    """What the device run says about one binade without a model."""
    x = inputs(E, mant_bits)
    ref = sfu_interp.tanh_reference_bits(x)
    err = pos.astype(np.int64) - ref.astype(np.int64)  # ulps (bit patterns of positive floats count ulps)
    sat = pos == sfu_interp.ONE
    ident = pos == x
    outE = (pos >> np.uint32(23)) & np.uint32(255)
    d = np.diff(pos.astype(np.int64))
    return {
        "inputs": int(x.size),
        "ulp_error_vs_f32_tanh": {
            "min": int(err.min()),
            "max": int(err.max()),
            "argmin_m": int(err.argmin()),
            "argmax_m": int(err.argmax()),
            "zero": int(np.count_nonzero(err == 0)),
        },
        "saturated_to_1": {"count": int(sat.sum()), "runs": _runs(sat)},
        "returns_x": {"count": int(ident.sum()), "runs": _runs(ident)},
        "result_exponents": {str(int(k)): int(v) for k, v in zip(*np.unique(outE, return_counts=True))},
        "not_odd": int(np.count_nonzero(neg != (pos ^ sfu_interp.SIGN))),
        "decreasing_steps": int(np.count_nonzero(d < 0)),
        "step_histogram": {str(int(k)): int(v) for k, v in zip(*np.unique(np.clip(d, -9, 9), return_counts=True))},
        "lowest_bit_matters": int(np.count_nonzero(pos[0::2] != pos[1::2])) if mant_bits > 0 else 0,
    }


def pack(paths: list[pathlib.Path], out_dir: pathlib.Path, tag: str) -> list[pathlib.Path]:
    """Bundle binade files into at most MAX_TARS tars of at most MAX_TAR_BYTES (in exponent order), removing them."""
    groups, cur, size = [], [], 0
    for p in paths:
        s = p.stat().st_size
        if cur and size + s > MAX_TAR_BYTES:
            groups.append(cur)
            cur, size = [], 0
        cur.append(p)
        size += s
    if cur:
        groups.append(cur)
    if len(groups) > MAX_TARS:
        raise RuntimeError(f"{len(groups)} bundles of {MAX_TAR_BYTES} B needed, the device returns {MAX_TARS}")
    out = []
    for g in groups:
        first, last = (p.stem.rsplit("_e", 1)[1] for p in (g[0], g[-1]))
        tpath = out_dir / f"tanh_{tag}_e{first}-{last}.tar"
        with tarfile.open(tpath, "w") as tf:
            for p in g:
                tf.add(p, arcname=p.name)
        for p in g:
            p.unlink()
        out.append(tpath)
    return out


def _binade_files(folder):
    """Each binade file's npz bytes or path, in the folder's order (npz files, then the tars' members)."""
    folder = pathlib.Path(folder)
    found = False
    for p in sorted(folder.glob("tanh_*_e*.npz")):
        found = True
        yield p
    for t in sorted(folder.glob("tanh_*_e*.tar")):
        with tarfile.open(t) as tf:
            for member in tf.getmembers():
                if member.name.endswith(".npz"):
                    found = True
                    yield io.BytesIO(tf.extractfile(member).read())
    if not found:
        raise FileNotFoundError(f"no tanh capture files (tanh_*_e*.npz / .tar) in {folder}")


def iter_capture(folder):
    """(E, M, positive bits, negative bits) of each binade of a capture folder, decoded into the same buffers one
    binade after another: each yielded array is overwritten by the next binade (copy what must outlive it). A whole
    capture is 14 x 2 x 32 MB; fresh arrays per binade cost more in page faults than the decoding itself."""
    buffers: dict = {}
    for f in _binade_files(folder):
        with np.load(f, allow_pickle=False) as z:
            yield decode_binade(z, buffers)


def read_capture(folder) -> dict[int, tuple[int, np.ndarray, np.ndarray]]:
    """{E: (M, positive bits, negative bits)} from a folder of binade npz files and / or their tars (``iter_capture``'s
    binades, each copied out of the reused buffers)."""
    out = {E: (M, pos.copy(), neg.copy()) for E, M, pos, neg in iter_capture(folder)}
    return dict(sorted(out.items()))


class GpuDevice:
    """``tanh.approx.f32`` through kernel/capture/sfu_approx.cu's hw_apply (flashsim.gpu.runtime)."""

    def __init__(self):
        from .sfu_approx import GpuDevice as Sweep

        self.sweep = Sweep()
        self.arch, self.name = self.sweep.arch, self.sweep.name

    def tanh(self, x: np.ndarray) -> np.ndarray:
        return self.sweep.hw(FORM, x)

    def half(self, form: str, h: np.ndarray) -> np.ndarray:
        return self.sweep.hw(form, h) & np.uint32(0xFFFF)


class FakeDevice:
    """flashsim.numerics.sfu_interp.synthetic_tanh over the capture's binades (no GPU)."""

    def __init__(self, exponents, mant_bits: int, arch: str = "sm_90"):
        inner = [E for E in exponents if 119 <= E < 130]
        self.unit = sfu_interp.synthetic_tanh(
            inner or [126], index_bits=max(0, min(6, mant_bits - 6)), mant_bits=mant_bits
        )
        self.arch, self.name = arch, "fake (numpy synthetic_tanh)"

    def tanh(self, x: np.ndarray) -> np.ndarray:
        return self.unit.bits(x)

    def half(self, form: str, h: np.ndarray) -> np.ndarray:
        return half_through_f32(form, h, self.tanh)


def half_through_f32(form: str, h: np.ndarray, f32) -> np.ndarray:
    """``form`` (tanh.approx.f16 / .bf16) as the f32 instruction on the widened input, rounded to nearest even: the
    relation the capture tests (if the unit computes the half forms on its f32 path, their tables follow from it)."""
    h = np.asarray(h, np.uint32) & np.uint32(0xFFFF)
    if form.endswith("bf16"):
        y = f32(h << np.uint32(16)).view(np.float32)
        return f32_to_bf16(y).view(np.uint16).astype(np.uint32)
    x = f16_to_f32(h.astype(np.uint16).view(np.float16))
    y = f32(np.asarray(x, np.float32).view(np.uint32)).view(np.float32)
    return f32_to_f16(y).view(np.uint16).astype(np.uint32)


def half_forms_vs_f32(device) -> dict:
    """Per half form: over all 2^16 inputs, how often the GPU's result differs from ``half_through_f32``."""
    h = np.arange(1 << 16, dtype=np.uint32)
    out = {}
    for form in ("tanh.approx.f16", "tanh.approx.bf16"):
        got, want = device.half(form, h), half_through_f32(form, h, device.tanh)
        bad = np.flatnonzero(got != want)
        out[form] = {"mismatches": int(bad.size), "first": [[int(b), int(got[b]), int(want[b])] for b in bad[:16]]}
    return out


def capture(device, exponents, mant_bits: int, out_dir, *, bundle: bool = True, log=print) -> dict:
    """Run every binade on ``device``, write the files, return the summary."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tag = calibration.arch_tag(device.arch)
    assert FORMS[FORM].function == "tanh"
    summary = {
        "form": FORM,
        "arch": device.arch,
        "device": device.name,
        "mant_bits": mant_bits,
        "exponents": list(exponents),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "binades": {},
    }
    t_dev = t_host = 0.0
    paths = []
    for E in exponents:
        t0 = time.time()
        x = inputs(E, mant_bits)
        pos, neg = device.tanh(x), device.tanh(x | sfu_interp.SIGN)
        t1 = time.time()
        entries = encode_binade(E, mant_bits, pos, neg)
        path = out_dir / f"tanh_{tag}_e{E}.npz"
        np.savez_compressed(path, **entries)
        s = binade_summary(E, mant_bits, pos, neg)
        s["file_bytes"] = path.stat().st_size
        summary["binades"][str(E)] = s
        paths.append(path)
        t_dev, t_host = t_dev + t1 - t0, t_host + time.time() - t1
        err = s["ulp_error_vs_f32_tanh"]
        log(
            f"E={E}: ulp error [{err['min']}, {err['max']}], saturated {s['saturated_to_1']['count']}, "
            f"returns x {s['returns_x']['count']}, not odd {s['not_odd']}, {s['file_bytes']:,} B"
        )
    try:
        summary["half_forms_vs_f32"] = half_forms_vs_f32(device)
        log(f"half forms against the f32 instruction rounded: {summary['half_forms_vs_f32']}")
    except Exception as exc:  # a side question: must not cost the capture
        summary["half_forms_vs_f32"] = f"{type(exc).__name__}: {exc}"
    summary["total_bytes"] = int(sum(p.stat().st_size for p in paths))
    try:
        files = pack(paths, out_dir, tag) if bundle else paths
    except RuntimeError as exc:  # keep the binade files and say so: the summary must still be written
        summary["pack_error"] = str(exc)
        log(f"!! {exc}: the binade files stay as they are")
        files = paths
    summary["files"] = [p.name for p in files]
    summary["seconds"] = {"device": round(t_dev, 2), "host": round(t_host, 2)}
    spath = out_dir / f"summary_tanh_{tag}.json"
    spath.write_text(json.dumps(summary, indent=1))
    log(f"wrote {', '.join(summary['files'])} ({summary['total_bytes']:,} B) and {spath.name}")
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m flashsim.gpu.capture.tanh", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the files (created if missing)")
    ap.add_argument(
        "--exponents", default=f"{DEFAULT_EXPONENTS[0]}-{DEFAULT_EXPONENTS[-1]}", help="biased, e.g. 117-130 or 120,126"
    )
    ap.add_argument("--mant-bits", type=int, default=23, help="mantissa grid (23: every f32 of each binade)")
    ap.add_argument("--no-bundle", action="store_true", help="keep one npz per binade (no tars)")
    ap.add_argument("--fake", action="store_true", help="flashsim.numerics.sfu_interp.synthetic_tanh instead of a GPU")
    args = ap.parse_args(argv)
    exps = []
    for part in args.exponents.split(","):
        a, _, b = part.partition("-")
        exps += list(range(int(a), int(b or a) + 1))
    try:
        device = FakeDevice(exps, args.mant_bits) if args.fake else GpuDevice()
        print(f"capturing {FORM} on {device.name} ({device.arch}): binades {exps}, M = {args.mant_bits}", flush=True)
        capture(device, exps, args.mant_bits, args.out, bundle=not args.no_bundle, log=lambda m: print(m, flush=True))
        return 0
    except Exception as exc:
        print(f"tanh capture failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
