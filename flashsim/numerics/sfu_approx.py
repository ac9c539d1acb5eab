"""The SFU's approximate functions beyond ``ex2.approx.ftz.f32`` / ``rcp.approx.ftz.f32`` (flashsim.numerics.sfu),
bit for bit, from structure measured on the GPU (``python -m flashsim.gpu.capture.sfu_approx``):

- the non-.ftz f32 forms are the SASS sequence ptxas 13.0 wraps around the bare MUFU (the .ftz form), read with
  nvdisasm for sm_90 and checked against the GPU over all 2^32 inputs (``composed_bits``):
  ex2: x < -126 -> (MUFU.EX2(x * 0.5))^2; rcp: s * MUFU.RCP(x * s), s = 0.25 above 2^126, 2^24 below 2^-126;
  rsqrt / sqrt / lg2: below 2^-126, x * 2^24 into the MUFU and the result * 2^12 / * 2^-12 / - 24 after it;
  sin / cos: RZ(x * 1/(2 pi)) into MUFU.SIN / COS, .ftz or not;
- rsqrt / sqrt .ftz: the result of a positive normal x depends on the parity of its exponent and its mantissa
  only: a table of 2^24 results over [1, 4), the exponent moved by -k / +k for x = x' 4^k (``RootModel``);
- lg2 .ftz: for x = (1 + m 2^-23) 2^E, RZ(E + L[m]): the unit truncates, and L is the captured result at E = 0
  (T1[m], over [1, 2)) for E >= 0 and 1 + the captured result at E = -1 (1 + T0[m], over [0.5, 1)) for E < 0
  (``Lg2Model``): one L for both signs, or rounding to nearest, fails (benchmarks/logs/2026-12-01/sfu_approx);
- sin / cos .ftz: MUFU.SIN / COS of u = RZ(x / (2 pi)) reads only the sign of u and floor(frac(|u|) 2^25): a table over
  those 2^25 fixed-point fractions (sin odd, cos even in the bits; ``HalfKeyModel``); 24 fraction bits fail;
- the f16 / bf16 forms: their whole 2^16-entry tables; an x2 form applies its scalar form to each half (the f16 /
  bf16 tanh are not the f32 tanh rounded: 14,730 / 2,086 of the 2^16 inputs differ on the H100);
- tanh.approx.f32: the piecewise-quadratic interpolator fitted from a whole-binade capture (flashsim.numerics.sfu_tanh).

Every rule used by a model is stored with it, and a model is shipped only where it reproduced every one of the
2^32 inputs on the GPU; the capture's summary (in the table file) says what was refuted and by how many inputs
where no model held. Tables: ``flashsim/data/sfu/sfu_approx_tables_<tag>.npz`` or the user cache
(flashsim.calibration.cache_dir); each table stored as lzma-compressed differences of consecutive entries (smooth
functions: a few distinct small integers) with the sha256 of the decoded values. The models are numpy (the PTX
simulator's consumer); the f32 arithmetic inside them is flashsim.numerics.ieee32 / rounding's.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from .. import calibration
from ..arch import get_arch
from . import ieee32, sfu
from .rounding import f32_to_f64, f64_to_f32, f64_to_f32_rz
from .sfu import ModelUnavailable

FORMAT_VERSION = 1
KIND = "sfu_approx"
INV_2PI_BITS = 0x3E22F983  # the f32 constant ptxas multiplies sin / cos arguments by (0.15915493667125701904)
CANONICAL_NAN = 0x7FFFFFFF
SIGN = np.uint32(0x80000000)
CLASSES = ("zero_pos", "zero_neg", "normal_pos", "normal_neg", "inf_pos", "inf_neg", "nan")
LG2_ROUNDINGS = ("rn", "rz", "rd", "ru")
LG2_L_CANDIDATES = ("t1", "t1_then_t0", "t0", "t1_above_t0_below")

__all__ = [
    "FORMS",
    "Form",
    "ClassRule",
    "RootModel",
    "Lg2Model",
    "KeyModel",
    "ModelUnavailable",
    "ApproxTables",
    "apply",
    "model_of",
    "load",
    "composed_bits",
    "pair_bits",
    "key_of",
    "mul_rz",
    "round_f64_to_f32",
    "encode_table",
    "decode_table",
    "write_tables",
    "read_tables",
]


@dataclass(frozen=True)
class Form:
    """One PTX form: ``id`` the capture kernel's FN_ number, ``width`` of its operand (16 or 32 bits), ``pair``
    for x2 forms (``scalar``: the per-half form), ``ftz_form``: the bare-MUFU form a non-.ftz form is composed
    around, ``function`` (ex2, rcp, ...), ``table``: the name of its table in the table file."""

    id: int
    function: str
    width: int = 32
    pair: bool = False
    scalar: str = ""
    ftz_form: str = ""
    table: str = ""


FORMS = {
    "ex2.approx.ftz.f32": Form(0, "ex2"),
    "ex2.approx.f32": Form(1, "ex2", ftz_form="ex2.approx.ftz.f32"),
    "rcp.approx.ftz.f32": Form(2, "rcp"),
    "rcp.approx.f32": Form(3, "rcp", ftz_form="rcp.approx.ftz.f32"),
    "rsqrt.approx.ftz.f32": Form(4, "rsqrt", table="rsqrt"),
    "rsqrt.approx.f32": Form(5, "rsqrt", ftz_form="rsqrt.approx.ftz.f32"),
    "sqrt.approx.ftz.f32": Form(6, "sqrt", table="sqrt"),
    "sqrt.approx.f32": Form(7, "sqrt", ftz_form="sqrt.approx.ftz.f32"),
    "lg2.approx.ftz.f32": Form(8, "lg2", table="lg2"),
    "lg2.approx.f32": Form(9, "lg2", ftz_form="lg2.approx.ftz.f32"),
    "sin.approx.ftz.f32": Form(10, "sin", table="sin"),
    "sin.approx.f32": Form(11, "sin", ftz_form="sin.approx.ftz.f32"),
    "cos.approx.ftz.f32": Form(12, "cos", table="cos"),
    "cos.approx.f32": Form(13, "cos", ftz_form="cos.approx.ftz.f32"),
    "tanh.approx.f32": Form(14, "tanh", table="tanh"),
    "ex2.approx.f16": Form(15, "ex2", width=16, table="ex2_f16"),
    "ex2.approx.ftz.bf16": Form(16, "ex2", width=16, table="ex2_bf16"),
    "tanh.approx.f16": Form(17, "tanh", width=16, table="tanh_f16"),
    "tanh.approx.bf16": Form(18, "tanh", width=16, table="tanh_bf16"),
    "ex2.approx.f16x2": Form(19, "ex2", pair=True, scalar="ex2.approx.f16"),
    "ex2.approx.ftz.bf16x2": Form(20, "ex2", pair=True, scalar="ex2.approx.ftz.bf16"),
    "tanh.approx.f16x2": Form(21, "tanh", pair=True, scalar="tanh.approx.f16"),
    "tanh.approx.bf16x2": Form(22, "tanh", pair=True, scalar="tanh.approx.bf16"),
}


# -- f32 helpers ---------------------------------------------------------------------------------------------------


def _f32(bits) -> np.ndarray:
    return np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32)


def _bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def mul_rz(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """mul.rz.f32 (FMUL.RZ, no flush): the exact product (float64 holds it) rounded toward zero once; a zero
    result keeps the product's sign, a finite overflow gives the largest finite value (IEEE), NaN is canonical."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    with np.errstate(all="ignore"):
        p = f32_to_f64(x) * f32_to_f64(y)
    r = _bits(f64_to_f32_rz(p))
    sign = (_bits(x) ^ _bits(y)) & SIGN
    finite = np.isfinite(x) & np.isfinite(y)
    r = np.where((r & 0x7FFFFFFF) == 0, sign, r)
    r = np.where(finite & ((r & 0x7FFFFFFF) == 0x7F800000), sign | np.uint32(0x7F7FFFFF), r)
    return np.where(np.isnan(p), np.uint32(CANONICAL_NAN), r).astype(np.uint32).view(np.float32)


def round_f64_to_f32(v: np.ndarray, mode: str) -> np.ndarray:
    """float64 -> f32 bits with rounding ``mode`` ("rn", "rz", "rd", "ru"), for finite v of normal f32 range: the
    nearest-even conversion of flashsim.numerics.rounding, stepped one ulp where it went the wrong way."""
    v = np.asarray(v, np.float64)
    r = _bits(f64_to_f32(v)).astype(np.int64)
    back = _f32(r.astype(np.uint32)).astype(np.float64)
    neg = v < 0
    mag_up = np.abs(back) > np.abs(v)  # the nearest rounding went away from zero
    mag_down = np.abs(back) < np.abs(v)
    if mode == "rn":
        step = np.zeros_like(r)
    elif mode == "rz":
        step = np.where(mag_up, -1, 0)
    elif mode == "rd":
        step = np.where(neg, np.where(mag_down, 1, 0), np.where(mag_up, -1, 0))
    elif mode == "ru":
        step = np.where(neg, np.where(mag_up, -1, 0), np.where(mag_down, 1, 0))
    else:
        raise ValueError(f"mode must be one of {LG2_ROUNDINGS}, got {mode!r}")
    return (r + step).astype(np.uint32)


def _sum_to_odd(E: np.ndarray, L: np.ndarray) -> np.ndarray:
    """The exact E + L rounded to odd at 53 bits (Fast2Sum, then an inexact sum moved to its odd neighbour): one
    rounding of it to f32 is the rounding of the exact sum (53 >= 24 + 2). Mirrors kernel/capture/sfu_approx.cu."""
    a = np.where(np.abs(E) >= np.abs(L), E, L)
    b = np.where(np.abs(E) >= np.abs(L), L, E)
    s = a + b
    t = b - (s - a)
    sb = s.view(np.int64)
    up = (t > 0) == (s > 0)
    moved = sb + np.where(up, 1, -1)
    return np.where((t == 0) | ((sb & 1) == 1), sb, moved).view(np.float64)


# -- special classes -----------------------------------------------------------------------------------------------


def classify(bits: np.ndarray) -> np.ndarray:
    """The index in CLASSES of each f32 input (zero counts subnormals: the bare MUFU flushes them)."""
    e = (bits >> 23) & 0xFF
    neg = (bits >> 31).astype(np.int64)
    c = np.where(e == 0, 0 + neg, 2 + neg)
    c = np.where(e == 255, np.where((bits & 0x7FFFFF) != 0, 6, 4 + neg), c)
    return c


@dataclass
class ClassRule:
    """Results of the special classes: a constant per class (measured), or ``computed`` by the model; NaN inputs
    give the constant, or (``nan_quiet``) the input with its quiet bit set."""

    constants: dict = field(default_factory=dict)
    computed: tuple = ("normal_pos",)
    nan_quiet: bool = False
    varies: tuple = ()  # classes whose measured results were not one constant (the model cannot hold there)

    @classmethod
    def measure(cls, inputs, outputs, computed=("normal_pos",)) -> ClassRule:
        inputs, outputs = np.asarray(inputs, np.uint32), np.asarray(outputs, np.uint32)
        c = classify(inputs)
        consts, varies, quiet = {}, [], False
        for i, name in enumerate(CLASSES):
            if name in computed:
                continue
            out = outputs[c == i]
            if out.size == 0:
                raise ValueError(f"no special input of class {name}")
            if name == "nan" and np.all(out == (inputs[c == i] | np.uint32(0x400000))) and np.unique(out).size > 1:
                quiet = True
            elif np.unique(out).size > 1:
                varies.append(name)
            consts[name] = int(out[0])
        return cls(consts, tuple(computed), quiet, tuple(varies))

    def vector(self) -> np.ndarray:
        """The capture kernel's parameter vector: 7 constants, the computed-class mask, the NaN mode."""
        mask = sum(1 << CLASSES.index(n) for n in self.computed)
        return np.array([self.constants.get(n, 0) for n in CLASSES] + [mask, int(self.nan_quiet)], dtype=np.uint32)

    @classmethod
    def from_vector(cls, v) -> ClassRule:
        v = [int(t) for t in v]
        computed = tuple(n for i, n in enumerate(CLASSES) if (v[7] >> i) & 1)
        return cls({n: v[i] for i, n in enumerate(CLASSES) if n not in computed}, computed, bool(v[8]))

    def to_json(self) -> dict:
        return {
            "constants": self.constants,
            "computed": list(self.computed),
            "nan_quiet": self.nan_quiet,
            "varies": list(self.varies),
        }

    @classmethod
    def from_json(cls, d: dict) -> ClassRule:
        return cls(dict(d["constants"]), tuple(d["computed"]), bool(d["nan_quiet"]), tuple(d.get("varies", ())))

    def apply(self, bits: np.ndarray, computed_bits: np.ndarray) -> np.ndarray:
        """``computed_bits`` where the class is computed, the class's result elsewhere."""
        c = classify(bits)
        out = np.asarray(computed_bits, np.uint32)
        for i, name in enumerate(CLASSES):
            if name in self.computed:
                continue
            value = (
                bits | np.uint32(0x400000) if (name == "nan" and self.nan_quiet) else np.uint32(self.constants[name])
            )
            out = np.where(c == i, value, out)
        return out.astype(np.uint32)


# -- the models ----------------------------------------------------------------------------------------------------


def root_table_inputs() -> np.ndarray:
    """The 2^24 inputs of the rsqrt / sqrt tables: [1, 2) then [2, 4) (bits; index = parity << 23 | mantissa)."""
    i = np.arange(1 << 24, dtype=np.uint32)
    return (np.uint32(127 << 23) + i).astype(np.uint32)


@dataclass(eq=False)
class RootModel:
    """rsqrt.approx.ftz.f32 / sqrt.approx.ftz.f32: positive normal x = x' 4^k, x' in [1, 4): T[index of x'] with
    the exponent field moved by -k (rsqrt) or +k (sqrt); the special classes by ``rule``."""

    function: str
    table: np.ndarray
    rule: ClassRule

    def bits(self, x) -> np.ndarray:
        x = np.asarray(x, np.uint32)
        E = ((x >> 23) & 0xFF).astype(np.int64) - 127
        par = E & 1
        k = (E - par) // 2
        g = self.table[((par << 23) | (x & 0x7FFFFF)).astype(np.int64)].astype(np.int64)
        r = g + (-k if self.function == "rsqrt" else k) * (1 << 23)
        normal = classify(x) == 2
        return self.rule.apply(x, np.where(normal, r, 0).astype(np.uint32))


def lg2_table_inputs(E: int) -> np.ndarray:
    """The 2^23 inputs (1 + m 2^-23) 2^E, m = 0 .. 2^23 - 1 (bits)."""
    return (np.uint32((127 + E) << 23) + np.arange(1 << 23, dtype=np.uint32)).astype(np.uint32)


def lg2_L(name: str, T1: np.ndarray, T0: np.ndarray) -> np.ndarray:
    """Candidate L[m] (float64) for lg2(1 + m 2^-23) from the captured T1 (over [1, 2)) and T0 (over [0.5, 1)):
    "t1" T1; "t0" 1 + T0 (exact); "t1_then_t0" T1 below 0.5, 1 + T0 from there (where T0 keeps more bits);
    "t1_above_t0_below" 2^24 entries: T1 for E >= 0, then 1 + T0 for E < 0 (``lg2_split``). The unit truncates
    E + L: T1 is L truncated (down), 1 + T0 is L truncated toward zero of a negative sum (up), and truncating
    again to the coarser grid of E + L keeps the truncation of E + L only when the direction agrees."""
    t1 = _f32(T1).astype(np.float64)
    t0 = 1.0 + _f32(T0).astype(np.float64)
    if name == "t1_above_t0_below":
        return np.concatenate([t1, t0])
    if name == "t1":
        return t1
    if name == "t0":
        return t0
    if name == "t1_then_t0":
        return np.where(t1 < 0.5, t1, t0)
    raise ValueError(f"name must be one of {LG2_L_CANDIDATES}, got {name!r}")


def lg2_split(name: str) -> bool:
    """Whether candidate ``name`` holds separate L for E >= 0 and E < 0."""
    return name == "t1_above_t0_below"


@dataclass(eq=False)
class Lg2Model:
    """lg2.approx.ftz.f32: positive normal x = (1 + m 2^-23) 2^E -> round(E + L[m]) (``rounding``; L of 2^24
    entries: E < 0 reads L[2^23 + m]), or the captured tables themselves for E = 0 and -1 (``tables_at_01``); the
    special classes by ``rule``."""

    L: np.ndarray
    T1: np.ndarray
    T0: np.ndarray
    rounding: str
    tables_at_01: bool
    rule: ClassRule

    def bits(self, x) -> np.ndarray:
        x = np.asarray(x, np.uint32)
        E = ((x >> 23) & 0xFF).astype(np.int64) - 127
        m = (x & 0x7FFFFF).astype(np.int64)
        normal = classify(x) == 2
        index = m + np.where(E < 0, 1 << 23, 0) if self.L.size == 2 << 23 else m
        v = _sum_to_odd(np.where(normal, E, 0).astype(np.float64), np.where(normal, self.L[index], 0.0))
        r = round_f64_to_f32(v, self.rounding)
        if self.tables_at_01:
            r = np.where(E == 0, self.T1[m], np.where(E == -1, self.T0[m], r))
        return self.rule.apply(x, np.where(normal, r, 0).astype(np.uint32))


def _scaled(M, s, rounding):
    """floor(M 2^s) (rounding 1: nearest, ties away) modulo 2^64 and whether s >= 40; M < 2^24 (uint64)."""
    over = s >= 40
    left = np.left_shift(M, np.clip(s, 0, 39).astype(np.uint64))
    rs = np.clip(-s, 0, 63).astype(np.uint64)
    q = np.right_shift(M, rs)
    if rounding == 1:
        q = q + (np.right_shift(M, np.maximum(rs, np.uint64(1)) - np.uint64(1)) & np.uint64(1))
    q = np.where(-s >= 40, np.uint64(0), q)
    return np.where(s >= 0, np.where(over, np.uint64(0), left), q).astype(np.uint64), over


def key_of(x, kind, shift=0, frac=0, bits=0, periodic=0, rounding=0, arg_rz_mul=0, mul_bits=0) -> np.ndarray:
    """The key of each input (kernel/capture/sfu_approx.cu's key_of): kind 0 the bit pattern >> shift; kind 1 the
    sign and the fixed-point |a| 2^frac (``periodic``: modulo 2^frac; else saturated to ``bits`` bits); kind 2 the
    two's complement fixed point modulo 2^frac; a = x, or RZ(x * f32(mul_bits)) with ``arg_rz_mul``."""
    ab = np.asarray(x, np.uint32)
    if arg_rz_mul:
        ab = _bits(mul_rz(_f32(ab), np.float32(np.uint32(mul_bits).view(np.float32))))
    if kind == 0:
        return (ab >> np.uint32(shift)).astype(np.int64)
    e = ((ab >> 23) & 0xFF).astype(np.int64)
    neg = (ab >> 31).astype(np.uint64)
    mant = (ab & 0x7FFFFF).astype(np.uint64)
    M = np.where(e > 0, mant | np.uint64(0x800000), mant)
    s = np.maximum(e, 1) - 150 + frac
    one = np.uint64(1)
    if kind == 1:
        j, over = _scaled(M, s, rounding)
        if periodic:
            j = j & np.uint64((1 << frac) - 1)
        else:
            j = np.where(over | (j >= np.uint64(1 << bits)), np.uint64((1 << bits) - 1), j)
        key = (neg << np.uint64(bits)) | j
        special = np.uint64(2 << bits) + neg
    else:
        pos, _ = _scaled(M, s, rounding)
        if rounding == 1:
            negj = np.uint64(0) - pos
        else:
            low = np.left_shift(one, np.clip(-s, 0, 63).astype(np.uint64)) - one
            exact = np.where(s >= 0, True, np.where(-s >= 40, M == 0, (M & low) == 0))
            negj = np.uint64(0) - (pos + np.where(exact, np.uint64(0), one))
        key = np.where(neg == 1, negj, pos) & np.uint64((1 << frac) - 1)
        special = np.uint64(1 << frac) + neg
    return np.where(e == 255, special, key).astype(np.int64)


def fill_unhit(table: np.ndarray, hit: np.ndarray) -> np.ndarray:
    """The table with every entry no input reaches set to the last reached one before it (they are never read;
    equal neighbours compress to nothing)."""
    table = np.asarray(table, np.uint32)
    idx = np.where(hit.astype(bool), np.arange(table.size), 0)
    np.maximum.accumulate(idx, out=idx)
    return table[idx]


@dataclass(eq=False)
class KeyModel:
    """A function of ``key_of(x, **spec)``: the captured table over the keys (entries no f32 input reaches hold a
    neighbour's value)."""

    table: np.ndarray
    spec: dict

    def bits(self, x) -> np.ndarray:
        return self.table[key_of(np.asarray(x, np.uint32), **self.spec)]


def half_key_table(table: np.ndarray, hit: np.ndarray, bits: int, symmetry: str) -> tuple[np.ndarray, np.ndarray]:
    """The table of a sign-magnitude key (kind 1: 2^(bits+1) + 2 entries) folded onto its positive half plus the two
    inf / NaN slots, for a function that is ``symmetry`` ("odd": f(-a) = -f(a) in the bits, "even": f(-a) = f(a))
    where both halves were reached; (table, hit) of 2^bits + 2 entries."""
    K = 1 << bits
    flip = SIGN if symmetry == "odd" else np.uint32(0)
    hit = hit.astype(bool)
    half = np.where(hit[:K], table[:K], table[K : 2 * K] ^ flip)
    both = hit[:K] & hit[K : 2 * K]
    if np.any(table[:K][both] != (table[K : 2 * K][both] ^ flip)):
        raise ValueError(f"the table is not {symmetry} where both signs were reached")
    return np.concatenate([half, table[2 * K :]]).astype(np.uint32), np.concatenate(
        [hit[:K] | hit[K : 2 * K], hit[2 * K :]]
    )


def unfold_key_table(half: np.ndarray, bits: int, symmetry: str) -> np.ndarray:
    """The full kind-1 key table (2^(bits+1) + 2 entries) from ``half_key_table``'s."""
    K = 1 << bits
    flip = SIGN if symmetry == "odd" else np.uint32(0)
    return np.concatenate([half[:K], half[:K] ^ flip, half[K:]]).astype(np.uint32)


@dataclass(eq=False)
class HalfKeyModel:
    """A function of a sign-magnitude key (``key_of`` kind 1) that is odd or even: the table over the positive keys
    and the inf / NaN slots; a negative key reads its positive twin (sign flipped when odd)."""

    table: np.ndarray
    spec: dict
    symmetry: str

    def bits(self, x) -> np.ndarray:
        bits = self.spec["bits"]
        key = key_of(np.asarray(x, np.uint32), **self.spec)
        K = 1 << bits
        special = key >= 2 * K
        neg = ((key >> bits) & 1).astype(bool) & ~special
        index = np.where(special, key - K, key & (K - 1))
        out = self.table[index]
        return np.where(neg & (self.symmetry == "odd"), out ^ SIGN, out).astype(np.uint32)


@dataclass(eq=False)
class HalfTable:
    """An f16 / bf16 form: the result of each of the 2^16 inputs."""

    table: np.ndarray

    def bits(self, x) -> np.ndarray:
        return self.table[np.asarray(x, np.uint32) & 0xFFFF].astype(np.uint32)


def pair_bits(x, scalar) -> np.ndarray:
    """An x2 form from its per-half form ``scalar`` (bits -> bits): the low half of the result from the low half."""
    x = np.asarray(x, np.uint32)
    return (scalar(x & 0xFFFF) & 0xFFFF) | ((scalar(x >> 16) & 0xFFFF) << 16)


def composed_bits(form: str, x, ftz) -> np.ndarray:
    """A non-.ftz f32 form as the SASS sequence around its bare MUFU ``ftz`` (bits -> bits); see the module
    docstring and kernel/capture/sfu_approx.cu's ``composed``. FSETP.GEU is true for NaN (no scaling then)."""
    x = np.asarray(x, np.uint32)
    xf = _f32(x)
    fn = FORMS[form].function
    with np.errstate(invalid="ignore"):
        small = np.abs(xf) < np.float32(2.0**-126)
        if fn == "ex2":
            low = xf < np.float32(-126.0)
            r = _f32(ftz(_bits(ieee32.mul(xf, np.float32(0.5)))))
            return np.where(low, _bits(ieee32.mul(r, r)), ftz(x)).astype(np.uint32)
        if fn == "rcp":
            s = np.where(
                np.abs(xf) > np.float32(2.0**126), np.float32(0.25), np.where(small, np.float32(2.0**24), np.float32(1))
            )
            s = s.astype(np.float32)
            return _bits(ieee32.mul(s, _f32(ftz(_bits(ieee32.mul(xf, s))))))
        if fn in ("rsqrt", "sqrt", "lg2"):
            r = _f32(ftz(_bits(ieee32.mul(xf, np.float32(2.0**24)))))
            if fn == "lg2":
                fixed = ieee32.add(r, np.float32(-24.0))
            else:
                fixed = ieee32.mul(r, np.float32(4096.0 if fn == "rsqrt" else 2.0**-12))
            return np.where(small, _bits(fixed), ftz(x)).astype(np.uint32)
    if fn in ("sin", "cos"):
        return ftz(x)
    raise ValueError(f"{form} is not a composed form")


# -- table files ---------------------------------------------------------------------------------------------------


def _sha256(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return hashlib.sha256(memoryview(a).cast("B")).hexdigest()


def encode_table(name: str, values: np.ndarray) -> dict[str, np.ndarray]:
    """npz entries for table ``name``: differences of consecutive entries (the first against 0) modulo 2^bits of the
    values' type, as the narrowest signed type that holds them, lzma-compressed, with the dtype and the sha256 of
    the values."""
    values = np.ascontiguousarray(values)
    if values.ndim != 1 or values.dtype.kind != "u":
        raise ValueError(f"table {name!r}: expected a 1-d unsigned array, got {values.dtype} {values.shape}")
    signed = np.dtype(f"i{values.dtype.itemsize}")
    d = np.diff(values, prepend=values.dtype.type(0)).view(signed)  # wraps modulo 2^bits: exact
    dtype = next(
        t for t in (np.int8, np.int16, np.int32, np.int64) if np.iinfo(t).min <= d.min() and d.max() <= np.iinfo(t).max
    )
    data = lzma.compress(d.astype(np.dtype(dtype).newbyteorder("<")).tobytes(), preset=6)
    return {
        f"{name}__data": np.frombuffer(data, np.uint8),
        f"{name}__diff_dtype": np.array(np.dtype(dtype).name),
        f"{name}__dtype": np.array(values.dtype.name),
        f"{name}__sha256": np.array(_sha256(values)),
    }


def decode_table(name: str, entries) -> np.ndarray:
    """The table ``name`` from npz ``entries`` (the prefix sum modulo 2^bits); ValueError if its sha256 does not
    match. Decoded tables are cached in the user cache (flashsim.calibration.derived_path, named by that sha256)
    and memory-mapped from there on later loads."""
    digest = str(entries[f"{name}__sha256"])
    dtype = np.dtype(str(entries[f"{name}__dtype"]))
    cache = calibration.derived_path(f"sfu_approx_v{FORMAT_VERSION}_{digest}.npy")
    try:
        cached = np.load(cache, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        cached = None
    if cached is not None and cached.dtype == dtype and cached.ndim == 1:
        return cached
    data = lzma.decompress(bytes(entries[f"{name}__data"]))
    d = np.frombuffer(data, np.dtype(str(entries[f"{name}__diff_dtype"])).newbyteorder("<"))
    values = np.cumsum(d.astype(np.dtype(f"i{dtype.itemsize}")).view(dtype), dtype=dtype)
    if _sha256(values) != digest:
        raise ValueError(f"table {name!r}: decoded values do not match the stored sha256 (corrupt file)")
    calibration.save_array(cache, values)
    return values


def write_tables(path, tables: dict, models: dict, *, arch: str, meta: dict | None = None, parts=()) -> None:
    """Write ``tables`` (name -> unsigned array) and ``models`` (form -> json rule) to ``path`` (npz); ``parts``:
    names of companion files in the same folder whose tables belong to it too (large tables, kept apart so that
    each file stays a few MB)."""
    entries = {
        "format": np.array(FORMAT_VERSION),
        "arch": np.array(get_arch(arch).name),
        "models": np.array(json.dumps(models)),
        "meta": np.array(json.dumps(meta or {})),
        "tables": np.array(json.dumps(sorted(tables))),
        "parts": np.array(json.dumps(list(parts))),
    }
    for name, values in tables.items():
        entries.update(encode_table(name, values))
    with open(path, "wb") as fh:
        np.savez(fh, **entries)


@dataclass
class ApproxTables:
    """The models of one architecture's table file."""

    arch: str
    source: str
    models: dict
    tables: Mapping  # name -> values (LazyTables: decoded on first use)
    meta: dict


class LazyTables(Mapping):
    """Table name -> values, each decoded from its file on first use (``decode_table``, then the user cache): a
    kernel that uses one approximate function pays for its table only, not for the hundreds of MB of all of them."""

    def __init__(self, files: dict[str, pathlib.Path]):
        self._files, self._values = dict(files), {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._values:
            with np.load(self._files[name], allow_pickle=False) as z:
                self._values[name] = decode_table(name, z)
        return self._values[name]

    def __iter__(self):
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def _table_files(path) -> tuple[dict, dict]:
    """(the header entries of the file written by ``write_tables`` at ``path``, {table name: the file holding it})
    over the file and its parts; ValueError on a bad format."""
    with np.load(path, allow_pickle=False) as z:
        if int(z["format"]) != FORMAT_VERSION:
            raise ValueError(f"{path}: table format {int(z['format'])}, this flashsim reads {FORMAT_VERSION}")
        head = {k: str(z[k]) for k in ("arch", "models", "meta")}
        files = dict.fromkeys(json.loads(str(z["tables"])), pathlib.Path(path))
        parts = json.loads(str(z["parts"])) if "parts" in z.files else []
    for part in parts:
        files.update(_table_files(pathlib.Path(path).parent / part)[1])
    return head, files


def read_tables(path) -> ApproxTables:
    """Read a file written by ``write_tables`` (its tables decoded on first use); ValueError on a bad file, or on a
    corrupt table when it is used."""
    head, files = _table_files(path)
    return ApproxTables(
        head["arch"], str(path), json.loads(head["models"]), LazyTables(files), json.loads(head["meta"])
    )


def shipped_path(arch) -> pathlib.Path:
    """Where the package keeps the tables of ``arch`` (the SFU's data folder; the file may not exist)."""
    return calibration.shipped_path("sfu", arch).parent / calibration.filename(KIND, arch)


_LOADED: dict = {}


def load(arch="sm_90") -> ApproxTables:
    """The tables of ``arch`` (user cache, then package data; never another arch's); ModelUnavailable without."""
    name = get_arch(arch).name
    if name not in _LOADED:
        found = None
        for path in (calibration.cache_dir(name) / calibration.filename(KIND, name), shipped_path(name)):
            if path.is_file():
                found = path
                break
        _LOADED[name] = read_tables(found) if found else None
    if _LOADED[name] is None:
        raise ModelUnavailable(
            f"no SFU approximate-function tables for {name}: capture them on that GPU "
            f"(`python -m flashsim.gpu.capture.sfu_approx --out DIR`, then copy the tables into "
            f"{calibration.cache_dir(name)}; `flashsim calibrate` installs the ex2 / rcp .ftz tables)"
        )
    return _LOADED[name]


def reload() -> None:
    """Forget loaded tables and the models built from them."""
    _LOADED.clear()
    _model.cache_clear()


def _refusal(form: str, t: ApproxTables) -> str:
    """Why ``form`` has no model on ``t.arch``: the hypotheses the capture refuted and their counts."""
    info = t.meta.get("forms", {}).get(form, {})
    tried = []
    for group in ("hypotheses", "keys"):
        for label, v in info.get(group, {}).items():
            tried.append((v["mismatches"], label))
    for label in ("table_model", "sass_sequence", "pair_of_halves"):
        if label in info:
            tried.append((info[label]["mismatches"], label))
    tried.sort()
    checked = t.meta.get("checked_per_sweep", 0)
    where = f"on the {t.meta.get('device', 'GPU')} over {checked:,} inputs each"
    if not tried:
        return f"{form}: no model of it exists for {t.arch} (no hypothesis was tested)"
    best = "; ".join(f"{label}: {n:,} mismatches" for n, label in tried[:3])
    return f"{form}: no model of it exists for {t.arch}: {len(tried)} hypotheses refuted {where} (fewest: {best})"


def model_of(form: str, arch="sm_90"):
    """A callable bits -> bits (numpy uint32) for ``form`` on ``arch``; ModelUnavailable saying why not. Built once
    per process and arch (``reload`` forgets them)."""
    return _model(form, get_arch(arch).name)


@cache
def _model(form: str, arch: str):
    if form not in FORMS:
        raise ModelUnavailable(f"{form}: not an SFU form flashsim knows")
    f = FORMS[form]
    if form == "tanh.approx.f32":  # the fitted interpolator (flashsim.numerics.sfu_tanh), not a captured table
        return sfu.tanh_model(arch)
    if form in ("ex2.approx.ftz.f32", "rcp.approx.ftz.f32"):
        found = calibration.locate("sfu", arch, warn=False)
        if found is None or found.borrowed:  # another arch's tables are not this arch's bits
            raise ModelUnavailable(
                f"{form}: no model for {get_arch(arch).name} (no tables of that arch: run `flashsim calibrate` on it)"
            )
        fn = sfu.ex2 if f.function == "ex2" else sfu.rcp
        return lambda x: np.asarray(fn(_f32(x), arch=arch)).view(np.uint32)
    t = load(arch)
    if f.ftz_form:
        seq = t.meta.get("forms", {}).get(form, {}).get("sass_sequence", {})
        if seq.get("mismatches") != 0:
            raise ModelUnavailable(_refusal(form, t))
        base = model_of(f.ftz_form, arch)
        return lambda x: composed_bits(form, x, base)
    m = t.models.get(form)
    if m is None:
        raise ModelUnavailable(_refusal(form, t))
    if m["kind"] == "pair":
        scalar = model_of(m["scalar"], arch)
        return lambda x: pair_bits(x, scalar)
    if m["kind"] == "half_table":
        return HalfTable(t.tables[m["table"]]).bits
    if m["kind"] == "root":
        return RootModel(f.function, t.tables[m["table"]], ClassRule.from_json(m["rule"])).bits
    if m["kind"] == "lg2":
        T1, T0 = t.tables["lg2_t1"], t.tables["lg2_t0"]
        return Lg2Model(
            lg2_L(m["L"], T1, T0), T1, T0, m["rounding"], m["tables_at_01"], ClassRule.from_json(m["rule"])
        ).bits
    if m["kind"] == "key":
        return KeyModel(t.tables[m["table"]], m["spec"]).bits
    if m["kind"] == "half_key":
        return HalfKeyModel(t.tables[m["table"]], m["spec"], m["symmetry"]).bits
    raise ValueError(f"{form}: unknown model kind {m['kind']!r} in {t.source}")


def apply(form: str, x, arch="sm_90") -> np.ndarray:
    """The result bits of ``form`` for input bits ``x`` (uint32; f16 / bf16 forms in the low 16 bits)."""
    return np.asarray(model_of(form, arch)(np.asarray(x, np.uint32)), np.uint32)


# -- a synthetic unit (the capture's fake device) --------------------------------------------------------------------


def synthetic_hardware():
    """bits -> bits for every form, built from the real ex2 / rcp models and correctly rounded functions with
    structures the capture's hypotheses can find (for tests of the capture's host logic, not a model of anything)."""
    from .rounding import f16_to_f32, f32_to_bf16, f32_to_f16

    def f64(b):
        return f32_to_f64(_f32(b))

    def cr(v):
        with np.errstate(all="ignore"):
            return _bits(f64_to_f32(np.asarray(v, np.float64)))

    def root(fn):
        def g(b):
            with np.errstate(all="ignore"):
                y = 1.0 / np.sqrt(f64(b)) if fn == "rsqrt" else np.sqrt(f64(b))
            rule = ClassRule(
                {
                    "zero_pos": 0x7F800000 if fn == "rsqrt" else 0,
                    "zero_neg": 0xFF800000 if fn == "rsqrt" else 0x80000000,
                    "normal_neg": CANONICAL_NAN,
                    "inf_pos": 0 if fn == "rsqrt" else 0x7F800000,
                    "inf_neg": CANONICAL_NAN,
                    "nan": CANONICAL_NAN,
                }
            )
            return rule.apply(b, cr(y))

        return g

    def lg2(b):
        with np.errstate(all="ignore"):
            y = np.log2(f64(b))
        rule = ClassRule(
            {
                "zero_pos": 0xFF800000,
                "zero_neg": 0xFF800000,
                "normal_neg": CANONICAL_NAN,
                "inf_pos": 0x7F800000,
                "inf_neg": CANONICAL_NAN,
                "nan": CANONICAL_NAN,
            }
        )
        return rule.apply(b, cr(y))

    def trig(fn):
        spec = {"kind": 1, "frac": 22, "bits": 22, "periodic": 1, "rounding": 0, "arg_rz_mul": 0}

        def g(b):
            u = mul_rz(_f32(b), np.float32(np.uint32(INV_2PI_BITS).view(np.float32)))
            k = key_of(_bits(u), **spec)
            j = (k & ((1 << 22) - 1)).astype(np.float64) * 2.0**-22
            sgn = np.where((k >> 22) & 1, -1.0, 1.0)
            y = sgn * np.sin(2 * np.pi * j) if fn == "sin" else np.cos(2 * np.pi * j)
            return np.where(k >= (2 << 22), np.uint32(CANONICAL_NAN), cr(y)).astype(np.uint32)

        return g

    def tanh(b):
        with np.errstate(all="ignore"):
            y = np.tanh(f64(b & np.uint32(0xFFFFFF00)))
        return np.where(np.isnan(y), np.uint32(CANONICAL_NAN), cr(y)).astype(np.uint32)

    def half(fn, fmt):
        def g(b):
            h = (np.asarray(b, np.uint32) & 0xFFFF).astype(np.uint16)
            x = f16_to_f32(h.view(np.float16)) if fmt == "f16" else (h.astype(np.uint32) << 16).view(np.float32)
            with np.errstate(all="ignore"):
                y = np.exp2(x.astype(np.float64)) if fn == "ex2" else np.tanh(x.astype(np.float64))
            y32 = y.astype(np.float32)
            out = f32_to_f16(y32).view(np.uint16) if fmt == "f16" else f32_to_bf16(y32).view(np.uint16)
            return out.astype(np.uint32)

        return g

    ftz = {
        "ex2.approx.ftz.f32": lambda b: _bits(sfu.ex2(_f32(b))),
        "rcp.approx.ftz.f32": lambda b: _bits(sfu.rcp(_f32(b))),
        "rsqrt.approx.ftz.f32": root("rsqrt"),
        "sqrt.approx.ftz.f32": root("sqrt"),
        "lg2.approx.ftz.f32": lg2,
        "sin.approx.ftz.f32": trig("sin"),
        "cos.approx.ftz.f32": trig("cos"),
        "tanh.approx.f32": tanh,
        "ex2.approx.f16": half("ex2", "f16"),
        "ex2.approx.ftz.bf16": half("ex2", "bf16"),
        "tanh.approx.f16": half("tanh", "f16"),
        "tanh.approx.bf16": half("tanh", "bf16"),
    }

    def hw(form: str, b):
        f = FORMS[form]
        if form in ftz:
            return np.asarray(ftz[form](b), np.uint32)
        if f.pair:
            return pair_bits(b, ftz[f.scalar])
        return composed_bits(form, b, ftz[f.ftz_form])

    return hw
