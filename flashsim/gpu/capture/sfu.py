"""Capture and validate the SFU models on the GPU at hand: ``python3 -m flashsim.gpu.capture.sfu --out DIR``.

One run, in order (kernels in kernel/capture/sfu.cu):
1. special inputs (zeros, subnormals, infinities, NaNs, range edges) through ex2.approx.ftz.f32 and
   rcp.approx.ftz.f32: they fix the model's constants (NaN result, flushed results, ...);
2. the tables: ex2 on +-f * 2^-23 and rcp on every float32 in [1, 2) (2^23 each);
3. ex2's fixed-point rule: each candidate (two's complement or sign-magnitude; rounding toward zero,
   down, up, nearest) is swept over |x| in [2^-31, 16) on the GPU; the one with fewest mismatches wins;
4. validation: (a) every one of the 2^32 bit patterns, instruction against the model run on the GPU
   from the uploaded tables, mismatches counted per (sign, exponent field); the GPU copy of the model
   spot-checked against the numpy one; (b) > 10 million random inputs over the kernel's range against
   the numpy model; (c) the specials;
5. files: ``sfu_tables_<tag>.npz`` (compact tables + parameters + summary: the package data, see
   flashsim.calibration) and ``sfu_sample_<tag>.npz`` (GPU input/output samples for the CPU test,
   the summary, per-exponent histograms and up to 50k mismatching triples per function); both record the
   build's provenance (flashsim.provenance: source hash and defines, checked by tests/test_drift.py).

Exit status: 0 when both models reproduce every checked output, 2 when some did not (files still
written), 1 on an error. ``--fake`` runs the host logic on a numpy stand-in for the GPU (no GPU needed).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import numpy as np

from ... import calibration, provenance
from ...numerics import sfu
from ...numerics.sfu import MASK, TABLE_SIZE, Ex2Model, RcpModel
from .. import runtime as rt
from ..build import compile_file

MISMATCH_CAP = 50_000  # recorded mismatching triples per function
SAMPLE_EX2 = 1 << 18  # GPU (input, output) pairs kept for the CPU test
SAMPLE_RCP = 1 << 16
SWEEP_CHUNK = 1 << 28
KERNEL = "capture/sfu.cu"
PROVENANCE_NAME = "sfu_capture"  # flashsim.provenance: this kernel's define set and fingerprint
SELECT_EXPONENTS = range(96, 131)  # |x| in [2^-31, 16): where the fixed-point rule shows
EX2_KEYS = ("neg_mode", "rounding", "nan_mode", "nan_bits", "underflow_bits", "overflow_bits", "pinf_bits", "ninf_bits")
RCP_KEYS = (
    "nan_mode",
    "nan_bits",
    "zero_pos_bits",
    "zero_neg_bits",
    "inf_pos_bits",
    "inf_neg_bits",
    "underflow_pos_bits",
    "underflow_neg_bits",
)
REGIONS = (
    ("zero/subnormal", 0, 0),
    ("|x| < 2^-63", 1, 63),
    ("2^-63 <= |x| < 2^-24", 64, 102),
    ("2^-24 <= |x| < 1", 103, 126),
    ("1 <= |x| < 256", 127, 134),
    ("|x| >= 256", 135, 254),
    ("inf/nan", 255, 255),
)


def _u32(values) -> np.ndarray:
    return np.array(values, dtype=np.uint64).astype(np.uint32)


def _f32bits(values) -> np.ndarray:
    return np.array(values, dtype=np.float32).view(np.uint32)


# -- model parameters <-> the kernel's uint32 parameter vector ------------------------------------


def ex2_param_vector(params: dict) -> np.ndarray:
    code = {
        "neg_mode": sfu.NEG_MODES.index(params["neg_mode"]),
        "rounding": sfu.ROUNDINGS.index(params["rounding"]),
        "nan_mode": sfu.NAN_MODES.index(params["nan_mode"]),
    }
    return _u32([code.get(k, params[k]) for k in EX2_KEYS])


def rcp_param_vector(params: dict) -> np.ndarray:
    return _u32([sfu.NAN_MODES.index(params[k]) if k == "nan_mode" else params[k] for k in RCP_KEYS])


# -- inputs ----------------------------------------------------------------------------------------

NAN_INPUTS = [0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7FA5A5A5, 0xFFC00000, 0xFF800001, 0xFFFFFFFF]


def ex2_specials() -> np.ndarray:
    f = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -0.5,
        127.0,
        127.99999,
        128.0,
        200.0,
        1e30,
        -1e30,
        -126.0,
        -126.5,
        -127.0,
        -127.5,
        -128.0,
        -149.0,
        -150.0,
        -200.0,
        2.0**-23,
        -(2.0**-23),
        2.0**-24,
        -(2.0**-24),
        1e-30,
        -1e-30,
        np.finfo(np.float32).max,
        -np.finfo(np.float32).max,
        np.finfo(np.float32).tiny,
        -np.finfo(np.float32).tiny,
        np.inf,
        -np.inf,
    ]
    return np.concatenate([_f32bits(f), _u32([1, 0x80000001, 0x007FFFFF, 0x807FFFFF] + NAN_INPUTS)])


def rcp_specials() -> np.ndarray:
    f = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1.5,
        -1.5,
        3.0,
        2.0**126,
        -(2.0**126),
        1.5 * 2.0**126,
        2.0**127,
        -(2.0**127),
        1.5 * 2.0**127,
        -1.5 * 2.0**127,
        np.finfo(np.float32).max,
        -np.finfo(np.float32).max,
        np.finfo(np.float32).tiny,
        -np.finfo(np.float32).tiny,
        np.inf,
        -np.inf,
    ]
    return np.concatenate([_f32bits(f), _u32([1, 0x80000001, 0x007FFFFF, 0x807FFFFF] + NAN_INPUTS)])


def ex2_random_inputs(rng: np.random.Generator, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Named sets (uint32 bits) over the kernel's ex2 range (x <= 0, tiny x > 0) plus raw bit patterns."""
    n = lambda m: max(1, int(m * scale))
    f32 = lambda a: np.asarray(a, dtype=np.float32).view(np.uint32)
    rows, cols = n(3_000_000) // 64, 64
    s = rng.standard_normal((rows, cols)) * rng.uniform(0.5, 8.0, (rows, 1))
    c = (1.0 / np.sqrt(128.0)) * np.log2(np.e)
    return {
        "uniform [-130, 0]": f32(-rng.uniform(0.0, 130.0, n(3_000_000))),
        "-2^U(-40, 7.1)": f32(-np.exp2(rng.uniform(-40.0, 7.1, n(3_000_000)))),
        "kernel-like s*c - m*c": f32(s * c - s.max(axis=1, keepdims=True) * c).ravel(),
        "tiny positive 2^U(-40, -5)": f32(np.exp2(rng.uniform(-40.0, -5.0, n(1_000_000)))),
        "random bit patterns": rng.integers(0, 1 << 32, n(2_000_000), dtype=np.uint64).astype(np.uint32),
    }


def rcp_random_inputs(rng: np.random.Generator, scale: float = 1.0) -> dict[str, np.ndarray]:
    """Named sets (uint32 bits): row sums l of the softmax, log-uniform magnitudes, raw bit patterns."""
    n = lambda m: max(1, int(m * scale))
    f32 = lambda a: np.asarray(a, dtype=np.float32).view(np.uint32)
    sign = lambda m: rng.choice(np.array([-1.0, 1.0]), m)
    return {
        "l-like U(1, 1e5)": f32(rng.uniform(1.0, 1e5, n(3_000_000))),
        "+-2^U(-126, 128)": f32(sign(n(3_000_000)) * np.exp2(rng.uniform(-126.0, 127.99, n(3_000_000)))),
        "random bit patterns": rng.integers(0, 1 << 32, n(5_000_000), dtype=np.uint64).astype(np.uint32),
    }


def full_ranges() -> list[tuple[int, int]]:
    return [(s, SWEEP_CHUNK) for s in range(0, 1 << 32, SWEEP_CHUNK)]


def binade_ranges(exponents, quick: bool = False) -> list[tuple[int, int]]:
    """Both signs of each exponent field: whole binades, or (quick) three windows of 2048 in each."""
    out = []
    for sign in (0, 1):
        for e in sorted(exponents):
            base = (sign << 31) | (e << 23)
            if quick:
                out += [(base + o, 2048) for o in (0, (1 << 22) - 1024, (1 << 23) - 2048)]
            elif out and out[-1][0] + out[-1][1] == base:  # merge adjacent binades into one launch
                out[-1] = (out[-1][0], out[-1][1] + (1 << 23))
            else:
                out.append((base, 1 << 23))
    return out


def quick_ranges() -> list[tuple[int, int]]:
    return binade_ranges(
        (0, 1, 50, 90, 102, 103, 110, 120, 125, 126, 127, 128, 129, 133, 134, 135, 200, 254, 255), quick=True
    )


def checked_per_bucket(ranges) -> np.ndarray:
    """How many inputs of ``ranges`` fall in each (sign << 8 | exponent) bucket: int64[512]."""
    counts = np.zeros(512, dtype=np.int64)
    for start, count in ranges:
        lo, hi = start, start + count
        for b in range(lo >> 23, ((hi - 1) >> 23) + 1):
            counts[b] += min(hi, (b + 1) << 23) - max(lo, b << 23)
    return counts


# -- the devices: the real GPU and a numpy stand-in ------------------------------------------------


class GpuDevice:
    """The kernels of kernel/capture/sfu.cu on the current GPU."""

    BLOCK = 256

    def __init__(self):
        self.rt = rt
        dev = rt.require_gpu()
        self.arch = rt.current_arch()
        self.name = str(getattr(dev, "name", "GPU"))
        build = compile_file(KERNEL, arch=self.arch, defines=provenance.build_defines(PROVENANCE_NAME))
        self.k = {
            name: rt.load(build, name)
            for name in ("ex2_hw_apply", "rcp_hw_apply", "ex2_model_apply", "rcp_model_apply", "ex2_sweep", "rcp_sweep")
        }
        try:
            self.grid = 8 * int(dev.properties.multiprocessor_count)
        except Exception:
            self.grid = 1024

    def put(self, array: np.ndarray):
        return self.rt.to_device(np.ascontiguousarray(array, dtype=np.uint32))

    def _apply(self, kernel: str, xbits: np.ndarray, *extra) -> np.ndarray:
        x = self.put(xbits)
        out = self.rt.empty(x.shape, np.uint32)
        grid = max(1, min(self.grid, -(-x.size // self.BLOCK)))
        self.rt.launch(self.k[kernel], (grid,), (self.BLOCK,), x, out, np.uint64(x.size), *extra)
        return out.to_numpy()

    def hw(self, fn: str, xbits: np.ndarray) -> np.ndarray:
        return self._apply(f"{fn}_hw_apply", xbits)

    def model(self, fn: str, xbits: np.ndarray, tables: tuple, params: np.ndarray) -> np.ndarray:
        return self._apply(f"{fn}_model_apply", xbits, *tables, self.put(params))

    def sweep(self, fn: str, start: int, count: int, tables: tuple, params: np.ndarray, cap: int):
        """(mismatches per bucket int64[512], recorded triples (m, 3) uint32, total recorded attempts)."""
        rt = self.rt
        hist = rt.empty((512,), np.uint64).zero_()
        nrec = rt.empty((1,), np.uint64).zero_()
        rec = rt.empty((max(cap, 1), 3), np.uint32)
        rt.launch(
            self.k[f"{fn}_sweep"],
            (self.grid,),
            (self.BLOCK,),
            np.uint64(start),
            np.uint64(count),
            *tables,
            self.put(params),
            hist,
            rec,
            np.uint64(cap),
            nrec,
        )
        n = int(nrec.to_numpy()[0])
        return hist.to_numpy().astype(np.int64), rec.to_numpy()[: min(n, cap)], n


class FakeDevice:
    """A numpy stand-in for the GPU: "hardware" given as functions of the input bits (tests, ``--fake``)."""

    def __init__(self, ex2_hw=None, rcp_hw=None, arch: str = "sm_90", name: str = "fake (numpy)"):
        self.arch, self.name = arch, name
        self.ex2_hw = ex2_hw or synthetic_ex2()
        self.rcp_hw = rcp_hw or synthetic_rcp()

    def put(self, array):
        return np.ascontiguousarray(array, dtype=np.uint32)

    def hw(self, fn, xbits):
        return (self.ex2_hw if fn == "ex2" else self.rcp_hw)(np.asarray(xbits, dtype=np.uint32))

    def model(self, fn, xbits, tables, params):
        return _numpy_model(fn, tables, params).bits(np.asarray(xbits, dtype=np.uint32))

    def sweep(self, fn, start, count, tables, params, cap):
        model = _numpy_model(fn, tables, params)
        hist, recs, total = np.zeros(512, dtype=np.int64), [], 0
        for lo in range(start, start + count, 1 << 22):
            x = (np.arange(lo, min(lo + (1 << 22), start + count), dtype=np.uint64) & 0xFFFFFFFF).astype(np.uint32)
            got, want = self.hw(fn, x), model.bits(x)
            bad = np.flatnonzero(got != want)
            hist += np.bincount(x[bad] >> 23, minlength=512)
            take = bad[: max(0, cap - total)]
            recs.append(np.stack([x[take], got[take], want[take]], axis=1))
            total += bad.size
        return hist, np.concatenate(recs).astype(np.uint32), total


def _numpy_model(fn: str, tables: tuple, params: np.ndarray):
    if fn == "ex2":
        d = dict(zip(EX2_KEYS, (int(v) for v in params)))
        d.update(
            neg_mode=sfu.NEG_MODES[d["neg_mode"]],
            rounding=sfu.ROUNDINGS[d["rounding"]],
            nan_mode=sfu.NAN_MODES[d["nan_mode"]],
        )
        return Ex2Model(tables[0], tables[1], d)
    d = dict(zip(RCP_KEYS, (int(v) for v in params)))
    d["nan_mode"] = sfu.NAN_MODES[d["nan_mode"]]
    return RcpModel(tables[0], d)


def _perturb(bits: np.ndarray, salt: int) -> np.ndarray:
    """Deterministic -1/0/+1 ulp noise on a table (entry 0 kept), standing in for the unit's error."""
    idx = np.arange(bits.size, dtype=np.uint64)
    noise = ((idx * np.uint64(2654435761) + np.uint64(salt)) >> np.uint64(13)) % np.uint64(3)
    noise = noise.astype(np.int64) - 1
    noise[0] = 0
    return (bits.astype(np.int64) + noise).astype(np.uint32)


def synthetic_ex2(rounding: str = "rz", neg_mode: str = "twos"):
    """A table-driven "hardware" ex2 (perturbed correctly rounded tables) for tests of the host logic."""
    pos = _perturb(sfu.reference_table("ex2_pos"), 1)
    neg = _perturb(sfu.reference_table("ex2_neg"), 2) if neg_mode == "signmag" else None
    return Ex2Model(pos, neg, {"rounding": rounding, "neg_mode": neg_mode}).bits


def synthetic_rcp():
    return RcpModel(_perturb(sfu.reference_table("rcp"), 3)).bits


# -- building the models from captured data --------------------------------------------------------


def _nan_rule(inputs: np.ndarray, outputs: np.ndarray) -> dict:
    if np.all(outputs == (inputs | np.uint32(sfu.QUIET_BIT))) and not np.all(outputs == outputs[0]):
        return {"nan_mode": "quiet", "nan_bits": sfu.CANONICAL_NAN}
    return {"nan_mode": "const", "nan_bits": int(outputs[0])}


def _out(specials: np.ndarray, outputs: np.ndarray, x: float) -> int:
    return int(outputs[np.flatnonzero(specials == _f32bits([x])[0])[0]])


def ex2_constants(specials: np.ndarray, outputs: np.ndarray) -> dict:
    nan = np.isin(specials, _u32(NAN_INPUTS))
    return {
        **_nan_rule(specials[nan], outputs[nan]),
        "underflow_bits": _out(specials, outputs, -200.0),
        "overflow_bits": _out(specials, outputs, 200.0),
        "pinf_bits": _out(specials, outputs, np.inf),
        "ninf_bits": _out(specials, outputs, -np.inf),
    }


def rcp_constants(specials: np.ndarray, outputs: np.ndarray) -> dict:
    nan = np.isin(specials, _u32(NAN_INPUTS))
    return {
        **_nan_rule(specials[nan], outputs[nan]),
        "zero_pos_bits": _out(specials, outputs, 0.0),
        "zero_neg_bits": _out(specials, outputs, -0.0),
        "inf_pos_bits": _out(specials, outputs, np.inf),
        "inf_neg_bits": _out(specials, outputs, -np.inf),
        "underflow_pos_bits": _out(specials, outputs, 1.5 * 2.0**127),
        "underflow_neg_bits": _out(specials, outputs, -1.5 * 2.0**127),
    }


def table_stats(name: str, bits: np.ndarray, exact: np.ndarray) -> dict:
    """Error of a captured table against the exact function: ulp histogram vs correctly rounded, max |err|."""
    delta = bits.astype(np.int64) - sfu.reference_table(name)
    lo = int(delta.min())
    counts = np.bincount(delta - lo) if int(delta.max()) - lo < 1 << 20 else None
    hist = (
        {str(lo + int(v)): int(counts[v]) for v in np.flatnonzero(counts)}
        if counts is not None
        else {str(int(v)): int(c) for v, c in zip(*np.unique(delta, return_counts=True))}
    )
    _, e = np.frexp(exact)  # exact in [2^(e-1), 2^e): ulp 2^(e-24)
    # 2^(e-24) built from its float64 exponent field (exact: e is an f32 value's, far inside f64's normal range);
    # np.ldexp on 2^23 int32 exponents took 0.6 s of a capture's 0.8 s per table
    ulp = ((e.astype(np.int64) + (1023 - 24)) << 52).view(np.float64)
    err = (bits.view(np.float32).astype(np.float64) - exact) / ulp
    return {
        "delta_vs_correctly_rounded": hist,
        "correctly_rounded_fraction": float(np.mean(delta == 0)),
        "max_abs_err_ulp": float(np.max(np.abs(err))),
        "mean_err_ulp": float(np.mean(err)),
        "exponent_fields": [int(v) for v in np.flatnonzero(np.bincount(bits >> 23))],
    }


def twos_negative_table(pos: np.ndarray) -> np.ndarray:
    """ex2(-f * 2^-23) as the two's complement rule predicts it from the positive table: g(1 - f 2^-23) / 2."""
    f = np.arange(TABLE_SIZE)
    out = pos[(TABLE_SIZE - f) & MASK].astype(np.int64) - (1 << 23)
    out[0] = pos[0]
    return out.astype(np.uint32)


# -- the run ---------------------------------------------------------------------------------------


class Capture:
    """One capture-and-validate run on ``device`` (GpuDevice or FakeDevice); see the module docstring."""

    def __init__(self, device, *, quick: bool = False, random_scale: float = 1.0, seed: int = 2026, log=print):
        self.dev, self.quick, self.scale, self.log = device, quick, random_scale, log
        self.rng = np.random.default_rng(seed)
        self.summary: dict = {
            "arch": device.arch,
            "device": device.name,
            "quick": quick,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "provenance": provenance.fingerprint(PROVENANCE_NAME),
        }
        self.sample: dict = {}

    # each step fills self.summary[fn] and self.sample
    def run(self, out_dir) -> int:
        t0 = time.time()
        ex2_ok = self.ex2()
        rcp_ok = self.rcp()
        self.summary["seconds"] = round(time.time() - t0, 1)
        self.summary["exact"] = {"ex2": ex2_ok, "rcp": rcp_ok}
        paths = self.write(out_dir)
        self.log(f"wrote {', '.join(str(p) for p in paths)}")
        self.log(f"ex2 model {'EXACT' if ex2_ok else 'NOT EXACT'}; rcp model {'EXACT' if rcp_ok else 'NOT EXACT'}")
        return 0 if ex2_ok and rcp_ok else 2

    def _specials(self, fn: str, inputs: np.ndarray) -> np.ndarray:
        out = self.dev.hw(fn, inputs)
        self.summary[fn]["specials"] = {f"{int(i):08x}": f"{int(o):08x}" for i, o in zip(inputs, out)}
        return out

    def ex2(self) -> bool:
        s = self.summary["ex2"] = {}
        self.log("ex2: specials and tables")
        specials = ex2_specials()
        sp_out = self._specials("ex2", specials)
        consts = ex2_constants(specials, sp_out)
        pos = self.dev.hw("ex2", sfu.ex2_table_inputs(False).view(np.uint32))
        neg = self.dev.hw("ex2", sfu.ex2_table_inputs(True).view(np.uint32))
        x = np.arange(TABLE_SIZE) * 2.0**-23
        s["table_pos"] = table_stats("ex2_pos", pos, np.exp2(x))
        s["table_neg"] = table_stats("ex2_neg", neg, np.exp2(-x))
        neg_diff = int(np.count_nonzero(twos_negative_table(pos) != neg))
        s["negative_table_differs_from_twos_rule"] = neg_diff
        self.log(
            f"  g: {s['table_pos']['correctly_rounded_fraction']:.1%} correctly rounded, max error "
            f"{s['table_pos']['max_abs_err_ulp']:.3f} ulp; negative side vs two's complement rule: "
            f"{neg_diff} entries differ"
        )

        dpos, dneg = self.dev.put(pos), self.dev.put(neg)
        candidates = [("twos", r) for r in sfu.ROUNDINGS]
        if neg_diff:
            candidates += [("signmag", r) for r in ("rz", "rn", "ru")]
        select = binade_ranges(SELECT_EXPONENTS, quick=self.quick)
        scores = {}
        for mode, rounding in candidates:
            params = {**consts, "neg_mode": mode, "rounding": rounding}
            vec = ex2_param_vector(params)
            scores[f"{mode}/{rounding}"] = sum(
                int(self.dev.sweep("ex2", a, n, (dpos, dneg), vec, 0)[0].sum()) for a, n in select
            )
        s["rule_candidates_mismatches"] = scores
        best = min(scores, key=scores.get)  # ties: first listed (two's complement, toward zero)
        mode, rounding = best.split("/")
        params = {**Ex2Model.DEFAULTS, **consts, "neg_mode": mode, "rounding": rounding}
        s["params"] = params
        self.log(f"  fixed-point rule: {best} (mismatches over |x| in [2^-31, 16) per candidate: {scores})")
        self.ex2_model = Ex2Model(pos, neg if mode == "signmag" else None, params)
        return self._validate(
            "ex2",
            self.ex2_model,
            (dpos, dneg),
            ex2_param_vector(params),
            specials,
            sp_out,
            ex2_random_inputs(self.rng, self.scale),
            SAMPLE_EX2,
        )

    def rcp(self) -> bool:
        s = self.summary["rcp"] = {}
        self.log("rcp: specials and table")
        specials = rcp_specials()
        sp_out = self._specials("rcp", specials)
        params = {**RcpModel.DEFAULTS, **rcp_constants(specials, sp_out)}
        xin = sfu.rcp_table_inputs()
        table = self.dev.hw("rcp", xin.view(np.uint32))
        s["table"] = table_stats("rcp", table, 1.0 / xin.astype(np.float64))
        s["params"] = params
        self.log(
            f"  table: {s['table']['correctly_rounded_fraction']:.1%} correctly rounded, max error "
            f"{s['table']['max_abs_err_ulp']:.3f} ulp"
        )
        self.rcp_model = RcpModel(table, params)
        return self._validate(
            "rcp",
            self.rcp_model,
            (self.dev.put(table),),
            rcp_param_vector(params),
            specials,
            sp_out,
            rcp_random_inputs(self.rng, self.scale),
            SAMPLE_RCP,
        )

    def _validate(self, fn, model, dtables, vec, specials, sp_out, random_sets, n_sample) -> bool:
        s = self.summary[fn]
        # (c) specials
        sp_model = model.bits(specials)
        s["specials_mismatches"] = int(np.count_nonzero(sp_model != sp_out))
        # (a) the sweep, GPU instruction against the GPU copy of the model
        ranges = quick_ranges() if self.quick else full_ranges()
        hist, recs, total = np.zeros(512, dtype=np.int64), [], 0
        for start, count in ranges:
            h, r, n = self.dev.sweep(fn, start, count, dtables, vec, MISMATCH_CAP - total)
            hist += h
            recs.append(r)
            total += min(n, MISMATCH_CAP - total)
        checked = checked_per_bucket(ranges)
        s["sweep"] = {
            "checked": int(checked.sum()),
            "mismatches": int(hist.sum()),
            "regions": self._regions(checked, hist),
        }
        self.sample[f"{fn}_sweep_checked"] = checked.reshape(2, 256)
        self.sample[f"{fn}_sweep_mismatches"] = hist.reshape(2, 256)
        self.sample[f"{fn}_mismatch"] = np.concatenate([*recs, np.zeros((0, 3), np.uint32)]).astype(np.uint32)
        self.log(f"  (a) sweep: {s['sweep']['checked']:,} inputs, {s['sweep']['mismatches']:,} mismatches")
        for name, (c, m) in s["sweep"]["regions"].items():
            self.log(f"      {name:>28}: {c:>14,} checked {m:>12,} mismatches")
        # the GPU copy of the model against the numpy one
        spot = np.concatenate(
            [
                self.rng.integers(0, 1 << 32, int(2_000_000 * self.scale) or 1, dtype=np.uint64).astype(np.uint32),
                *(v[: int(400_000 * self.scale) or 1] for v in random_sets.values()),
            ]
        )
        spot_bad = int(np.count_nonzero(self.dev.model(fn, spot, dtables, vec) != model.bits(spot)))
        s["gpu_model_vs_numpy_model"] = {"checked": int(spot.size), "mismatches": spot_bad}
        self.log(f"      GPU model vs numpy model: {spot.size:,} inputs, {spot_bad:,} mismatches")
        # (b) random inputs over the kernel's range against the numpy model
        s["random"] = {}
        ins, outs = [], []
        for name, x in random_sets.items():
            got = self.dev.hw(fn, x)
            bad = got != model.bits(x)
            s["random"][name] = [int(x.size), int(np.count_nonzero(bad))]
            ins.append(x)
            outs.append(got)
            if bad.any() and self.sample[f"{fn}_mismatch"].shape[0] < MISMATCH_CAP:
                extra = np.stack([x[bad], got[bad], model.bits(x[bad])], axis=1)
                self.sample[f"{fn}_mismatch"] = np.concatenate([self.sample[f"{fn}_mismatch"], extra])[:MISMATCH_CAP]
        rin, rout = np.concatenate(ins), np.concatenate(outs)
        nr, nb = rin.size, sum(v[1] for v in s["random"].values())
        self.log(
            f"  (b) random: {nr:,} inputs, {nb:,} mismatches; (c) specials: {specials.size} inputs, "
            f"{s['specials_mismatches']} mismatches"
        )
        keep = self.rng.choice(nr, size=min(n_sample, nr), replace=False)
        self.sample[f"{fn}_in"] = np.concatenate([specials, rin[keep]])
        self.sample[f"{fn}_out"] = np.concatenate([sp_out, rout[keep]])
        return s["sweep"]["mismatches"] == 0 and nb == 0 and s["specials_mismatches"] == 0 and spot_bad == 0

    @staticmethod
    def _regions(checked: np.ndarray, hist: np.ndarray) -> dict:
        out = {}
        for sign, label in ((0, "+"), (1, "-")):
            for name, lo, hi in REGIONS:
                sl = slice(sign * 256 + lo, sign * 256 + hi + 1)
                out[f"{label} {name}"] = [int(checked[sl].sum()), int(hist[sl].sum())]
        return out

    def write(self, out_dir) -> list[pathlib.Path]:
        out_dir = pathlib.Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        tag = calibration.arch_tag(self.dev.arch)
        tables = out_dir / calibration.filename("sfu", self.dev.arch)
        self.log("compressing the tables" + ("" if self.quick else " (zlib and lzma, keeping the smaller: a minute)"))
        sfu.write_tables(
            tables,
            self.ex2_model,
            self.rcp_model,
            arch=self.dev.arch,
            meta=self.summary,
            codec="zlib" if self.quick else "best",
        )
        size = tables.stat().st_size
        self.summary["tables_bytes"] = size
        self.log(
            f"tables: {size / 1e6:.2f} MB"
            + ("" if size <= 4_000_000 else " (over the 4 MB package-data budget: needs a better codec)")
        )
        sample = out_dir / f"sfu_sample_{tag}.npz"
        np.savez_compressed(
            sample,
            summary=np.array(json.dumps(self.summary)),
            provenance=np.array(provenance.to_json(self.summary["provenance"])),
            **self.sample,
        )
        return [tables, sample]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m flashsim.gpu.capture.sfu",
        description=__doc__.splitlines()[0],
        epilog="Writes sfu_tables_<tag>.npz and sfu_sample_<tag>.npz into DIR.",
    )
    parser.add_argument("--out", required=True, help="folder for the two output files (created if missing)")
    parser.add_argument("--fake", action="store_true", help="numpy stand-in for the GPU (tests the host logic)")
    parser.add_argument("--quick", action="store_true", help="sample windows of the binades instead of all 2^32 inputs")
    parser.add_argument(
        "--random-scale",
        type=float,
        default=1.0,
        help="scale of the random input sets (1.0: 12 M ex2 and 11 M rcp inputs)",
    )
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    if args.random_scale <= 0:
        parser.error("--random-scale must be positive")
    try:
        device = FakeDevice() if args.fake else GpuDevice()
        if args.fake and not args.quick:
            print("--fake: sweeping sample windows only (--quick); numpy cannot do 2^32 inputs quickly")
            args.quick = True
        print(f"capturing the SFU on {device.name} ({device.arch})", flush=True)
        status = Capture(
            device, quick=args.quick, random_scale=args.random_scale, seed=args.seed, log=lambda m: print(m, flush=True)
        ).run(args.out)
    except Exception as exc:  # GPUError, CompileError, OSError...: say what failed and exit non-zero
        print(f"sfu capture failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
