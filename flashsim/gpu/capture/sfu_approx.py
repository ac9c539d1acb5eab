"""Capture the SFU's approximate functions on the GPU at hand and test hypotheses about their structure over all 2^32
inputs: ``python3 -m flashsim.gpu.capture.sfu_approx --out DIR``.

Kernels in kernel/capture/sfu_approx.cu; the heavy work (every sweep over 2^32 inputs) runs there and only counts,
the first mismatching triples and the tables of models that held come back. One run, in order:

1. specials (zeros, subnormals, infinities, NaNs, edges) through every form; they fix each model's constants;
2. the f16 / bf16 forms (ex2, tanh): their whole 2^16-entry tables, and each x2 form against its two halves;
3. every non-.ftz f32 form against the SASS sequence ptxas wraps around its bare MUFU (composed from the .ftz form);
4. rsqrt / sqrt .ftz: the table over [1, 4) (2^24 entries; result = T[exponent parity, mantissa] rescaled),
   checked over 2^32;
5. lg2 .ftz: T1 over [1, 2) and T0 over [0.5, 1); candidates round(E + L[m]) for three L built from them and four
   roundings, each over 2^32;
6. sin / cos (on the reduced argument u = RZ(x / (2 pi)) ptxas computes) and tanh: "the result is a function of
   key(x)" for fixed-point and truncated-float keys, each over 2^32; relations (odd, even, identity, saturation);
7. samples: 2^16 random inputs and the specials per form, with the GPU's outputs (for the CPU tests).

Files in DIR: ``sfu_approx_tables_<tag>.npz`` (flashsim.numerics.sfu_approx's format: every table of a model that
held, the models' parameters, the summary) with ``sfu_approx_<sin|cos>_tables_<tag>.npz`` (the key tables, one file
each), ``sfu_approx_sample_<tag>.npz`` (samples and mismatch records),
``sfu_approx_windows_<tag>.npz`` (outputs over short windows of each binade, for studying the functions without a
model), ``summary_<tag>.json``. ``--fake`` runs the host logic on numpy stand-ins for the GPU (sample windows only).
Exit status 0 when every step ran (whatever the hypotheses' verdicts), 1 on an error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from ... import calibration, provenance
from ...numerics import sfu_approx as A
from ..build import kernel_path

KERNEL = "capture/sfu_approx.cu"
PROVENANCE_NAME = "sfu_approx_capture"  # flashsim.provenance: this kernel's fingerprint
MAX_KEY_TABLE = (1 << 26) + 2  # the largest key table a model may ship
CAP = 1024  # recorded mismatching triples per sweep
SAMPLE = 1 << 16
FULL = [(s, 1 << 30) for s in range(0, 1 << 32, 1 << 30)]
F32_FORMS = [n for n in A.FORMS if A.FORMS[n].width == 32 and not A.FORMS[n].pair]
HALF_FORMS = [n for n in A.FORMS if A.FORMS[n].width == 16]
PAIR_FORMS = [n for n in A.FORMS if A.FORMS[n].pair]
COMPOSED = ["ex2.approx.f32", "rcp.approx.f32", "rsqrt.approx.f32", "sqrt.approx.f32", "lg2.approx.f32"]
SAME_SASS = {"sin.approx.f32": "sin.approx.ftz.f32", "cos.approx.f32": "cos.approx.ftz.f32"}
RELATIONS = {"odd": 0, "even": 1, "identity": 2, "saturation": 3, "zero": 4}
WINDOW = 1024
WINDOW_EXPONENTS = range(80, 166)


@dataclass(frozen=True)
class KeySpec:
    """kernel/capture/sfu_approx.cu's KeySpec (same field order)."""

    kind: int
    shift: int = 0
    frac: int = 0
    bits: int = 0
    periodic: int = 0
    rounding: int = 0
    arg_rz_mul: int = 0
    mul_bits: int = 0

    def size(self) -> int:
        if self.kind == 0:
            return 1 << (32 - self.shift)
        if self.kind == 1:
            return (2 << self.bits) + 2
        return (1 << self.frac) + 2

    def label(self) -> str:
        arg = "u=RZ(x/2pi) " if self.arg_rz_mul else ""
        rnd = ("rz", "rn")[self.rounding]
        if self.kind == 0:
            return f"{arg}bits>>{self.shift}"
        if self.kind == 1:
            return f"{arg}signmag fixed {self.frac} frac bits {'mod 1' if self.periodic else f'{self.bits} bits'} {rnd}"
        return f"{arg}twos fixed {self.frac} frac bits mod 1 {('rd', 'rn')[self.rounding]}"

    def params(self) -> dict:
        return asdict(self)

    def kernel_args(self) -> tuple:
        v = self.params()
        return tuple(np.uint32(v[n]) if n == "mul_bits" else np.int32(v[n]) for n in v)


def key_specs(fn: str) -> list[KeySpec]:
    """The key hypotheses tried for ``fn`` (sin/cos on the reduced argument; tanh on x)."""
    if fn.startswith(("sin", "cos")):
        c = A.INV_2PI_BITS
        out = [
            KeySpec(1, frac=k, bits=k, periodic=1, rounding=r, arg_rz_mul=1, mul_bits=c)
            for k in range(19, 29)
            for r in (0, 1)
        ]
        out += [KeySpec(2, frac=k, rounding=r, arg_rz_mul=1, mul_bits=c) for k in range(19, 29) for r in (0, 1)]
        out += [KeySpec(0, shift=s, arg_rz_mul=1, mul_bits=c) for s in range(12, 3, -1)]
        return out
    out = [KeySpec(0, shift=s) for s in range(16, 1, -1)]
    out += [KeySpec(1, frac=k, bits=k + 4, rounding=r) for k in range(14, 25) for r in (0, 1)]
    return out


def _u32(a) -> np.ndarray:
    return np.asarray(a, dtype=np.uint64).astype(np.uint32)


def f32_specials() -> np.ndarray:
    """Bit patterns that fix the constants of every f32 form: zeros, subnormals, normal edges, powers of two,
    range edges of each function, infinities, NaNs."""
    f = np.array(
        [
            0.0,
            1.0,
            0.5,
            2.0,
            3.0,
            4.0,
            1.5,
            0.75,
            -126.0,
            -126.5,
            -127.0,
            -149.0,
            -150.0,
            -200.0,
            127.0,
            128.0,
            2.0**-126,
            2.0**-127,
            2.0**-140,
            2.0**126,
            1.5 * 2.0**126,
            2.0**127,
            3.4e38,
            1e-30,
            1e30,
            np.pi,
            np.pi / 2,
            2 * np.pi,
            1e-8,
            1e-4,
            9.0,
            10.0,
            20.0,
            100.0,
            1e5,
            1e10,
            2.0**23,
            2.0**24,
        ],
        dtype=np.float32,
    ).view(np.uint32)
    raw = _u32([1, 2, 0x7FFFFF, 0x400000, 0x7F7FFFFF, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7FA5A5A5])
    both = np.concatenate([f, raw])
    return np.unique(np.concatenate([both, both | np.uint32(0x80000000)]))


def random_f32(rng: np.random.Generator, n: int) -> np.ndarray:
    """Half raw bit patterns, half moderate magnitudes (exponents 2^-40 .. 2^40), both signs."""
    k = n // 2
    raw = rng.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32)
    sign = rng.integers(0, 2, n - k, dtype=np.uint32) << np.uint32(31)
    mod = (
        sign
        | (rng.integers(87, 168, n - k, dtype=np.uint32) << np.uint32(23))
        | rng.integers(0, 1 << 23, n - k, dtype=np.uint32)
    )
    return np.concatenate([raw, mod])


def window_inputs() -> np.ndarray:
    """Three windows of WINDOW inputs (start, middle, end) of each binade of WINDOW_EXPONENTS, both signs."""
    out = []
    for sign in (0, 1):
        for e in WINDOW_EXPONENTS:
            base = (sign << 31) | (e << 23)
            for o in (0, (1 << 22) - WINDOW // 2, (1 << 23) - WINDOW):
                out.append(np.arange(base + o, base + o + WINDOW, dtype=np.uint64))
    return np.concatenate(out).astype(np.uint32)


# -- the devices ---------------------------------------------------------------------------------------------------


class GpuDevice:
    """kernel/capture/sfu_approx.cu on the current GPU (flashsim.gpu.runtime)."""

    BLOCK = 256

    def __init__(self):
        from .. import runtime as rt
        from ..build import compile_file

        self.rt = rt
        dev = rt.require_gpu()
        self.arch = rt.current_arch()
        self.name = str(getattr(dev, "name", "GPU"))
        build = compile_file(KERNEL, arch=self.arch)
        names = (
            "hw_apply",
            "compose_sweep",
            "pair_sweep",
            "table_sweep",
            "table_model_apply",
            "lg2_sweep",
            "key_fill",
            "key_sweep",
            "relation_sweep",
            "key_apply",
            "lg2_model_apply",
        )
        self.k = {n: rt.load(build, n) for n in names}
        try:
            self.grid = 8 * int(dev.properties.multiprocessor_count)
        except Exception:
            self.grid = 1056
        self._key_buf = None

    def put(self, a):
        a = np.ascontiguousarray(a)
        return self.rt.to_device(a)

    def _launch(self, name, n, *args):
        self.rt.launch(self.k[name], (max(1, min(self.grid, -(-n // self.BLOCK))),), (self.BLOCK,), *args)

    def hw(self, fn: str, x: np.ndarray) -> np.ndarray:
        d = self.put(np.asarray(x, dtype=np.uint32))
        out = self.rt.empty(d.shape, np.uint32)
        self._launch("hw_apply", d.size, np.int32(A.FORMS[fn].id), d, out, np.uint64(d.size))
        return out.to_numpy()

    def _sweep(self, name: str, head: tuple, tail: tuple, ranges) -> tuple[np.ndarray, np.ndarray, int]:
        rt = self.rt
        hist = rt.empty((512,), np.uint64).zero_()
        nrec = rt.empty((1,), np.uint64).zero_()
        rec = rt.empty((CAP, 3), np.uint32)
        for start, count in ranges:
            self.rt.launch(
                self.k[name],
                (self.grid,),
                (self.BLOCK,),
                *head,
                np.uint64(start),
                np.uint64(count),
                *tail,
                hist,
                rec,
                np.uint64(CAP),
                nrec,
            )
        n = int(nrec.to_numpy()[0])  # record attempts (stops growing near CAP); the count is the histogram's
        h = hist.to_numpy().astype(np.int64)
        return h, rec.to_numpy()[: min(n, CAP)], int(h.sum())

    def compose(self, fn: str, ranges):
        return self._sweep("compose_sweep", (np.int32(A.FORMS[fn].id),), (), ranges)

    def pair(self, fn: str, scalar: str, ranges):
        return self._sweep("pair_sweep", (np.int32(A.FORMS[fn].id), np.int32(A.FORMS[scalar].id)), (), ranges)

    def table(self, fn: str, T: np.ndarray, params: np.ndarray, ranges):
        return self._sweep("table_sweep", (np.int32(A.FORMS[fn].id),), (self.put(T), self.put(params)), ranges)

    def table_model(self, fn: str, x: np.ndarray, T: np.ndarray, params: np.ndarray) -> np.ndarray:
        d = self.put(np.asarray(x, np.uint32))
        out = self.rt.empty(d.shape, np.uint32)
        self._launch(
            "table_model_apply",
            d.size,
            np.int32(A.FORMS[fn].id),
            d,
            out,
            np.uint64(d.size),
            self.put(T),
            self.put(params),
        )
        return out.to_numpy()

    def lg2(self, L, T1, T0, mode: int, tables_at_01: int, params, ranges):
        tail = (np.int32(mode), np.int32(tables_at_01), np.int32(L.size == 2 << 23), self.put(params))
        dl, d1, d0 = self.put(np.asarray(L, np.float64)), self.put(T1), self.put(T0)
        return self._sweep("lg2_sweep", (), (dl, d1, d0) + tail, ranges)

    def key(self, fn: str, spec: KeySpec, ranges):
        """(hist, records, count): fill ``table[key(x)] = f(x)`` over ``ranges``, then count where f(x) differs."""
        rt = self.rt
        size = spec.size()
        if self._key_buf is None or self._key_buf[0].size < size:
            self._key_buf = None
            self._key_buf = (rt.empty((size,), np.uint32), rt.empty((size,), np.uint8))
        table, hit = self._key_buf
        hit.zero_()
        args = spec.kernel_args()
        fid = np.int32(A.FORMS[fn].id)
        for start, count in ranges:
            rt.launch(
                self.k["key_fill"],
                (self.grid,),
                (self.BLOCK,),
                fid,
                *args,
                np.uint64(start),
                np.uint64(count),
                table,
                hit,
            )
        self._key_size = size
        return self._sweep("key_sweep", (fid, *args), (table,), ranges)

    def keys(self, spec: KeySpec, x: np.ndarray) -> np.ndarray:
        d = self.put(np.asarray(x, np.uint32))
        out = self.rt.empty(d.shape, np.uint64)
        self._launch("key_apply", d.size, *spec.kernel_args(), d, out, np.uint64(d.size))
        return out.to_numpy().astype(np.int64)

    def lg2_model(self, x, L, T1, T0, mode, tables_at_01, params) -> np.ndarray:
        d = self.put(np.asarray(x, np.uint32))
        out = self.rt.empty(d.shape, np.uint32)
        self._launch(
            "lg2_model_apply",
            d.size,
            d,
            out,
            np.uint64(d.size),
            self.put(np.asarray(L, np.float64)),
            self.put(T1),
            self.put(T0),
            np.int32(mode),
            np.int32(tables_at_01),
            np.int32(L.size == 2 << 23),
            self.put(params),
        )
        return out.to_numpy()

    def key_check(self, fn: str, spec: KeySpec, table: np.ndarray, ranges):
        """(hist, records, count) of ``f(x) != table[key(x)]`` for a given table (no fill)."""
        args = spec.kernel_args()
        return self._sweep("key_sweep", (np.int32(A.FORMS[fn].id), *args), (self.put(table),), ranges)

    def key_table(self) -> tuple[np.ndarray, np.ndarray]:
        """(table, hit) of the last ``key`` call."""
        return self._key_buf[0].to_numpy()[: self._key_size], self._key_buf[1].to_numpy()[: self._key_size]

    def relation(self, fn: str, rel: int, ranges):
        return self._sweep("relation_sweep", (np.int32(A.FORMS[fn].id), np.int32(rel)), (), ranges)


class FakeDevice:
    """numpy stand-ins for the kernels (tests and ``--fake``): the "hardware" is the numpy models themselves with
    synthetic tables, so the host logic (tables, parameters, verdicts, files) runs without a GPU."""

    def __init__(self, arch: str = "sm_90"):
        self.arch, self.name = arch, "fake (numpy)"
        self.synthetic = A.synthetic_hardware()

    def hw(self, fn: str, x):
        return self.synthetic(fn, np.asarray(x, np.uint32))

    @staticmethod
    def _inputs(ranges):
        for start, count in ranges:
            for lo in range(start, start + count, 1 << 20):
                yield (np.arange(lo, min(lo + (1 << 20), start + count), dtype=np.uint64) & 0xFFFFFFFF).astype(
                    np.uint32
                )

    def _compare(self, ranges, got_fn, want_fn):
        hist, recs, total = np.zeros(512, np.int64), [], 0
        for x in self._inputs(ranges):
            got, want = got_fn(x), want_fn(x)
            bad = np.flatnonzero(got != want)
            hist += np.bincount(x[bad] >> 23, minlength=512)
            take = bad[: max(0, CAP - total)]
            recs.append(np.stack([x[take], got[take], want[take]], axis=1))
            total += bad.size
        return hist, np.concatenate(recs).astype(np.uint32), total

    def compose(self, fn, ranges):
        base = A.FORMS[fn].ftz_form
        return self._compare(
            ranges, lambda x: self.hw(fn, x), lambda x: A.composed_bits(fn, x, lambda y: self.hw(base, y))
        )

    def pair(self, fn, scalar, ranges):
        return self._compare(ranges, lambda x: self.hw(fn, x), lambda x: A.pair_bits(x, lambda h: self.hw(scalar, h)))

    def table(self, fn, T, params, ranges):
        model = A.RootModel(A.FORMS[fn].function, T, A.ClassRule.from_vector(params))
        return self._compare(ranges, lambda x: self.hw(fn, x), model.bits)

    def table_model(self, fn, x, T, params):
        return A.RootModel(A.FORMS[fn].function, T, A.ClassRule.from_vector(params)).bits(np.asarray(x, np.uint32))

    def lg2(self, L, T1, T0, mode, tables_at_01, params, ranges):
        model = A.Lg2Model(
            np.asarray(L, np.float64),
            T1,
            T0,
            A.LG2_ROUNDINGS[mode],
            bool(tables_at_01),
            A.ClassRule.from_vector(params),
        )
        return self._compare(ranges, lambda x: self.hw("lg2.approx.ftz.f32", x), model.bits)

    def key(self, fn, spec, ranges):
        table = np.zeros(spec.size(), np.uint32)
        hit = np.zeros(spec.size(), np.uint8)
        for x in self._inputs(ranges):
            k = A.key_of(x, **spec.params())
            table[k] = self.hw(fn, x)
            hit[k] = 1
        self._last = (table, hit)
        return self._compare(ranges, lambda x: self.hw(fn, x), lambda x: table[A.key_of(x, **spec.params())])

    def key_table(self):
        return self._last

    def key_check(self, fn, spec, table, ranges):
        return self._compare(ranges, lambda x: self.hw(fn, x), lambda x: table[A.key_of(x, **spec.params())])

    def keys(self, spec, x):
        return A.key_of(np.asarray(x, np.uint32), **spec.params())

    def lg2_model(self, x, L, T1, T0, mode, tables_at_01, params):
        rule = A.ClassRule.from_vector(params)
        return A.Lg2Model(np.asarray(L, np.float64), T1, T0, A.LG2_ROUNDINGS[mode], bool(tables_at_01), rule).bits(x)

    def relation(self, fn, rel, ranges):
        def want(x):
            got = self.hw(fn, x)
            s = np.uint32(0x80000000)
            return [self.hw(fn, x ^ s) ^ s, self.hw(fn, x ^ s), x, (x & s) | np.uint32(0x3F800000), got & s][rel]

        return self._compare(ranges, lambda x: self.hw(fn, x), want)


# -- the run -------------------------------------------------------------------------------------------------------


def quick_ranges() -> list[tuple[int, int]]:
    """Windows of 4096 at the start, middle and end of a spread of binades, both signs (the fake device's sweep)."""
    out = []
    for sign in (0, 1):
        for e in (0, 1, 60, 100, 110, 118, 122, 125, 126, 127, 128, 129, 130, 133, 140, 150, 160, 200, 254, 255):
            base = (sign << 31) | (e << 23)
            out += [(base + o, 4096) for o in (0, (1 << 22) - 2048, (1 << 23) - 4096)]
    return out


def _source_sha256() -> str:
    h = hashlib.sha256(kernel_path(KERNEL).read_bytes())
    h.update(pathlib.Path(__file__).read_bytes())
    h.update(pathlib.Path(A.__file__).read_bytes())
    return h.hexdigest()


class Capture:
    """One run on ``device`` (GpuDevice or FakeDevice); see the module docstring."""

    def __init__(self, device, *, quick: bool = False, seed: int = 2027, deadline: float = 1e9, log=print):
        self.dev, self.log = device, log
        self.deadline = time.time() + deadline  # key hypotheses past it are skipped (the files must still be written)
        self.ranges = quick_ranges() if quick else FULL
        self.checked = int(sum(n for _, n in self.ranges))
        self.rng = np.random.default_rng(seed)
        self.summary: dict = {
            "arch": device.arch,
            "device": device.name,
            "quick": quick,
            "checked_per_sweep": self.checked,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
            "sources_sha256": _source_sha256(),
            "forms": {},
        }
        self.tables: dict[str, np.ndarray] = {}
        self.key_tables: dict[str, dict] = {}  # written to files of their own (each may be several MB)
        self.models: dict[str, dict] = {}
        self.sample: dict[str, np.ndarray] = {}
        self.timing: dict[str, float] = {}

    def _verdict(self, name: str, hist, rec, n) -> dict:
        """Summary of one sweep: mismatch count, per-bucket counts (nonzero only), first records kept."""
        self.sample[f"rec/{name}"] = np.asarray(rec, np.uint32).reshape(-1, 3)
        nz = np.flatnonzero(hist)
        return {
            "checked": self.checked,
            "mismatches": int(n),
            "buckets": {f"{'+-'[b >> 8]}e{b & 255}": int(hist[b]) for b in nz},
        }

    def _form(self, fn: str) -> dict:
        return self.summary["forms"].setdefault(fn, {})

    def run(self, out_dir) -> int:
        t0 = time.time()
        steps = [self.specials, self.halves, self.composed, self.roots, self.lg2, self.samples, self.keyed]
        for step in steps:
            t = time.time()
            try:
                step()
            except Exception as exc:  # keep going: one failed hypothesis family must not cost the others
                self.summary.setdefault("errors", []).append(f"{step.__name__}: {type(exc).__name__}: {exc}")
                self.log(f"!! {step.__name__} failed: {type(exc).__name__}: {exc}")
            self.timing[step.__name__] = round(time.time() - t, 2)
            self.log(f"[{step.__name__}: {self.timing[step.__name__]} s]")
        self.summary["seconds"] = round(time.time() - t0, 1)
        self.summary["timing"] = self.timing
        paths = self.write(out_dir)
        self.log("wrote " + ", ".join(str(p) for p in paths))
        return 0

    # 1. specials
    def specials(self):
        self.specials_in = f32_specials()
        self.spot = np.concatenate([self.specials_in, random_f32(self.rng, 1 << 18)])
        self.specials_out = {}
        for fn in F32_FORMS:
            out = self.dev.hw(fn, self.specials_in)
            self.specials_out[fn] = out
            self._form(fn)["specials"] = {f"{int(i):08x}": f"{int(o):08x}" for i, o in zip(self.specials_in, out)}
        self.log(f"specials: {self.specials_in.size} inputs through {len(F32_FORMS)} f32 forms")

    # 2. f16 / bf16
    def halves(self):
        allh = np.arange(1 << 16, dtype=np.uint32)
        for fn in HALF_FORMS:
            t = self.dev.hw(fn, allh) & np.uint32(0xFFFF)
            self.tables[A.FORMS[fn].table] = t.astype(np.uint16)
            self.models[fn] = {"kind": "half_table", "table": A.FORMS[fn].table}
            self._form(fn)["table_distinct_outputs"] = int(np.unique(t).size)
        for fn in PAIR_FORMS:
            scalar = A.FORMS[fn].scalar
            v = self._verdict(f"pair {fn}", *self.dev.pair(fn, scalar, self.ranges))
            self._form(fn)["pair_of_halves"] = v
            if v["mismatches"] == 0:
                self.models[fn] = {"kind": "pair", "scalar": scalar}
            self.log(f"{fn} == two {scalar}: {v['mismatches']} mismatches of {self.checked:,}")

    # 3. SASS compositions
    def composed(self):
        for fn in COMPOSED + list(SAME_SASS):
            v = self._verdict(f"compose {fn}", *self.dev.compose(fn, self.ranges))
            self._form(fn)["sass_sequence"] = v
            self.log(f"{fn} == SASS sequence around {A.FORMS[fn].ftz_form}: {v['mismatches']} mismatches")

    # 4. rsqrt / sqrt
    def roots(self):
        x = A.root_table_inputs()
        for fn in ("rsqrt.approx.ftz.f32", "sqrt.approx.ftz.f32"):
            rule = A.ClassRule.measure(self.specials_in, self.specials_out[fn], computed=("normal_pos",))
            T = self.dev.hw(fn, x)
            vec = rule.vector()
            v = self._verdict(f"table {fn}", *self.dev.table(fn, T, vec, self.ranges))
            spot = random_f32(self.rng, 1 << 20)
            model = A.RootModel(A.FORMS[fn].function, T, rule)
            spot_bad = int(np.count_nonzero(self.dev.table_model(fn, spot, T, vec) != model.bits(spot)))
            v["gpu_model_vs_numpy_model"] = {"checked": int(spot.size), "mismatches": spot_bad}
            v["rule"] = rule.to_json()
            self._form(fn)["table_model"] = v
            self.log(
                f"{fn}: table over [1, 4): {v['mismatches']} mismatches over {self.checked:,}; "
                f"GPU vs numpy model {spot_bad} of {spot.size:,}"
            )
            if v["mismatches"] == 0 and spot_bad == 0:
                name = A.FORMS[fn].table
                self.tables[name] = T
                self.models[fn] = {"kind": "root", "table": name, "rule": rule.to_json()}

    # 5. lg2
    def lg2(self):
        fn = "lg2.approx.ftz.f32"
        rule = A.ClassRule.measure(self.specials_in, self.specials_out[fn], computed=("normal_pos",))
        vec = rule.vector()
        T1 = self.dev.hw(fn, A.lg2_table_inputs(0))
        T0 = self.dev.hw(fn, A.lg2_table_inputs(-1))
        self.tables["lg2_t1"], self.tables["lg2_t0"] = T1, T0
        results = {}
        best = None
        for lname in A.LG2_L_CANDIDATES:
            L = A.lg2_L(lname, T1, T0)
            for mode, rname in enumerate(A.LG2_ROUNDINGS):
                for t01 in (0, 1) if not A.lg2_split(lname) else (0,):
                    label = f"{lname}/{rname}/{'tables at E=0,-1' if t01 else 'formula everywhere'}"
                    v = self._verdict(f"lg2 {label}", *self.dev.lg2(L, T1, T0, mode, t01, vec, self.ranges))
                    model = A.Lg2Model(L, T1, T0, rname, bool(t01), rule)
                    spot = self.spot
                    bad = int(np.count_nonzero(self.dev.lg2_model(spot, L, T1, T0, mode, t01, vec) != model.bits(spot)))
                    v["gpu_model_vs_numpy_model"] = {"checked": int(spot.size), "mismatches": bad}
                    results[label] = v
                    if best is None or v["mismatches"] < results[best]["mismatches"]:
                        best = label
                    self.log(f"lg2 {label}: {v['mismatches']:,} mismatches")
        self._form(fn)["hypotheses"] = results
        self._form(fn)["rule"] = rule.to_json()
        lname, rname, where = best.split("/")
        self.log(f"lg2 best: {best}")
        if results[best]["mismatches"] == 0 and results[best]["gpu_model_vs_numpy_model"]["mismatches"] == 0:
            self.models[fn] = {
                "kind": "lg2",
                "L": lname,
                "rounding": rname,
                "tables_at_01": where.startswith("tables"),
                "rule": rule.to_json(),
            }

    # 6. sin / cos / tanh
    def keyed(self):
        for fn in ("sin.approx.ftz.f32", "cos.approx.ftz.f32", "tanh.approx.f32"):
            form = self._form(fn)
            rels = (
                ("odd",)
                if fn.startswith("sin")
                else ("even",)
                if fn.startswith("cos")
                else ("odd", "identity", "saturation")
            )
            form["relations"] = {}
            for r in rels:
                v = self._verdict(f"relation {fn} {r}", *self.dev.relation(fn, RELATIONS[r], self.ranges))
                form["relations"][r] = v
                self.log(f"{fn} {r}: fails for {v['mismatches']:,}")
            form["keys"] = {}
            held = None
            for spec in key_specs(fn):
                if time.time() > self.deadline:
                    form.setdefault("skipped_past_deadline", []).append(spec.label())
                    continue
                hist, rec, n = self.dev.key(fn, spec, self.ranges)
                v = self._verdict(f"key {fn} {spec.label()}", hist, rec, n)
                v["spec"] = spec.params()
                bad = int(np.count_nonzero(self.dev.keys(spec, self.spot) != A.key_of(self.spot, **spec.params())))
                v["gpu_key_vs_numpy_key"] = {"checked": int(self.spot.size), "mismatches": bad}
                if bad:
                    self.log(f"!! {fn} key {spec.label()}: GPU and numpy keys differ for {bad} inputs")
                form["keys"][spec.label()] = v
                self.log(f"{fn} key {spec.label()}: {n:,} mismatches")
                if n == 0 and bad == 0 and held is None and spec.size() <= MAX_KEY_TABLE:
                    held = spec
                    table, hit = self.dev.key_table()
                    name = A.FORMS[fn].table
                    model = {"kind": "key", "table": name, "spec": spec.params()}
                    sym = {"sin": "odd", "cos": "even"}.get(A.FORMS[fn].function)
                    if sym and spec.kind == 1 and spec.periodic:
                        try:
                            table, hit = A.half_key_table(table, hit, spec.bits, sym)
                            model = {"kind": "half_key", "table": name, "spec": spec.params(), "symmetry": sym}
                        except ValueError as exc:
                            self.log(f"{fn}: {exc}")
                    table = A.fill_unhit(table, hit)
                    full = A.unfold_key_table(table, spec.bits, sym) if model["kind"] == "half_key" else table
                    check = self._verdict(f"shipped table {fn}", *self.dev.key_check(fn, spec, full, self.ranges))
                    form["shipped_table"] = {
                        **check,
                        "model": model,
                        "entries": int(table.size),
                        "reached": int(hit.sum()),
                    }
                    self.log(
                        f"{fn}: the shipped {model['kind']} table ({table.size:,} entries) over 2^32: "
                        f"{check['mismatches']:,} mismatches"
                    )
                    if check["mismatches"] == 0:
                        self.key_tables[name] = {name: table}
                        self.models[fn] = model

    # 7. samples and windows
    def samples(self):
        x32 = np.concatenate([self.specials_in, random_f32(self.rng, SAMPLE)])
        self.sample["in/f32"] = x32
        for fn in F32_FORMS + PAIR_FORMS:
            x = x32 if fn in F32_FORMS else self.rng.integers(0, 1 << 32, SAMPLE, dtype=np.uint64).astype(np.uint32)
            if fn in PAIR_FORMS:
                self.sample[f"in/{fn}"] = x
            self.sample[f"out/{fn}"] = self.dev.hw(fn, x)
        w = window_inputs()
        self.windows = {"inputs": w}
        for fn in ("lg2.approx.ftz.f32", "sin.approx.ftz.f32", "cos.approx.ftz.f32", "tanh.approx.f32"):
            self.windows[fn] = self.dev.hw(fn, w)

    def write(self, out_dir) -> list[pathlib.Path]:
        out_dir = pathlib.Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        tag = calibration.arch_tag(self.dev.arch)
        self.summary["models"] = self.models
        paths = []
        parts = []
        for name, entries in self.key_tables.items():  # large tables: a file each, listed by the main file
            kpath = out_dir / calibration.filename(f"sfu_approx_{name}", self.dev.arch)
            A.write_tables(kpath, entries, {}, arch=self.dev.arch)
            paths.append(kpath)
            parts.append(kpath.name)
        try:
            tables = out_dir / calibration.filename("sfu_approx", self.dev.arch)
            A.write_tables(tables, self.tables, self.models, arch=self.dev.arch, meta=self.summary, parts=parts)
            self.summary["tables_bytes"] = tables.stat().st_size
            paths.append(tables)
        except Exception as exc:
            self.summary.setdefault("errors", []).append(f"write_tables: {type(exc).__name__}: {exc}")
        sample = out_dir / f"sfu_approx_sample_{tag}.npz"
        record = provenance.to_json(provenance.fingerprint(PROVENANCE_NAME))  # what ran (tests/test_drift.py)
        np.savez_compressed(
            sample, summary=np.array(json.dumps(self.summary)), provenance=np.array(record), **self.sample
        )
        paths.append(sample)
        if getattr(self, "windows", None):
            wpath = out_dir / f"sfu_approx_windows_{tag}.npz"
            np.savez_compressed(wpath, **self.windows)
            paths.append(wpath)
        spath = out_dir / f"summary_{tag}.json"
        spath.write_text(json.dumps(self.summary, indent=1))
        paths.append(spath)
        return paths


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m flashsim.gpu.capture.sfu_approx", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", required=True, help="folder for the output files (created if missing)")
    parser.add_argument("--fake", action="store_true", help="numpy stand-ins for the GPU (tests the host logic)")
    parser.add_argument("--quick", action="store_true", help="sample windows of the binades instead of all 2^32 inputs")
    parser.add_argument("--seed", type=int, default=2027)
    parser.add_argument("--deadline", type=float, default=1e9, help="seconds after which key hypotheses are skipped")
    args = parser.parse_args(argv)
    try:
        device = FakeDevice() if args.fake else GpuDevice()
        print(f"capturing the SFU's approximate functions on {device.name} ({device.arch})", flush=True)
        return Capture(
            device,
            quick=args.quick or args.fake,
            seed=args.seed,
            deadline=args.deadline,
            log=lambda m: print(m, flush=True),
        ).run(args.out)
    except Exception as exc:
        print(f"sfu_approx capture failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
