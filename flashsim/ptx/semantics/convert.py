"""cvt: conversions between integer types (wrapping, or clamping with .sat), integer <-> float with every rounding
PTX names, float <-> float, and the packing forms (cvt.rn.f16x2.f32 d, a, b puts a in the upper half).

Roundings of float results are flashsim.numerics' (rounding / ieee32); float -> integer conversions round with the
.rni / .rzi / .rmi / .rpi modifier (the default for float -> integer is .rzi only where PTX allows it: PTX requires
the modifier), clamp to the destination's range and give 0 for NaN, as PTX specifies.
"""

from __future__ import annotations

import numpy as np

from ...numerics import ieee32, rounding
from .. import isa
from ..program import Decoded
from .common import bits_of, kind_of, sdtype, udtype, widen

INT_ROUND = {".rni": np.rint, ".rzi": np.trunc, ".rmi": np.floor, ".rpi": np.ceil}
FLOAT_ROUND = (".rn", ".rz", ".rm", ".rp", ".rna")


@isa.implements("cvt")
def cvt(d: Decoded):
    mods = d.mods
    rnd = mods.take(*INT_ROUND, *FLOAT_ROUND)
    ftz = mods.flag(".ftz")
    sat = mods.flag(".sat") or mods.flag(".satfinite")
    relu = mods.flag(".relu")
    types = mods.types()
    mods.done()
    if len(types) != 2:
        raise isa.Unsupported("cvt needs a destination and a source type")
    dt, st = types
    dk, sk = kind_of(dt), kind_of(st)
    if dt in (".f16x2", ".bf16x2") and st == ".f32":
        return _pack_half2(d, dt, rnd, relu, sat)
    if relu:
        raise isa.Unsupported(".relu here")
    if dk in "usb" and sk in "usb":
        return _int_to_int(d, dt, st, sat)
    if dk == "f" and sk in "us":
        return _int_to_float(d, dt, st, rnd)
    if dk in "us" and sk == "f":
        return _float_to_int(d, dt, st, rnd, ftz)
    if dk == "f" and sk == "f":
        return _float_to_float(d, dt, st, rnd, ftz, sat)
    raise isa.Unsupported(f"cvt{dt}{st}")


def _int_to_int(d, dt, st, sat):
    db, sb = bits_of(dt), bits_of(st)
    dst = d.dst(0)
    reg_bits = d.prog.dtypes[dst].itemsize * 8 if dst is not None else db
    src = d.src(1, udtype(sb))
    s_signed, d_signed = kind_of(st) == "s", kind_of(dt) == "s"

    def run(g):
        x = np.asarray(g.R[src]).astype(udtype(sb))
        if sat:
            v = x.view(sdtype(sb)).astype(np.int64) if s_signed else x.astype(np.uint64)
            lo, hi = (-(2 ** (db - 1)), 2 ** (db - 1) - 1) if d_signed else (0, 2**db - 1)
            if s_signed:
                v = np.clip(v, lo, hi).astype(np.int64).view(np.uint64)
            else:
                v = np.minimum(v, np.uint64(hi))
            r = (v & np.uint64((1 << db) - 1) if db < 64 else v).astype(udtype(db))
        elif db <= sb:
            r = x.astype(udtype(db))  # truncate to the low bits
        else:
            r = widen(x, sb, db, s_signed)
        if reg_bits > db:  # a narrow destination type in a wider register: sign- or zero-extended
            r = widen(r, db, reg_bits, d_signed)
        g.write(dst, r)

    return d.op(run)


def _int_to_float(d, dt, st, rnd):
    sb = bits_of(st)
    dst, src = d.dst(0), d.src(1, udtype(sb))
    signed = kind_of(st) == "s"
    if rnd is None:
        raise isa.Unsupported("int -> float cvt without a rounding")
    mode = {".rn": "rne", ".rz": "rz"}.get(rnd)
    if mode is None or dt not in (".f32", ".f16", ".f64"):
        raise isa.Unsupported(f"cvt{rnd}{dt}{st}")

    def run(g):
        x = np.asarray(g.R[src]).astype(udtype(sb))
        m = x.view(sdtype(sb)).astype(np.int64) if signed else x.astype(np.uint64)
        if not signed and sb == 64:
            big = m >= np.uint64(1 << 62)  # round_scaled takes |m| < 2^62: halve exactly with a sticky bit
            m2 = np.where(big, (m >> np.uint64(2)) | ((m & np.uint64(3)) != 0), m).astype(np.int64)
            e = np.where(big, 2, 0)
        else:
            big = (np.abs(m) >= (1 << 62)) if signed else np.zeros(m.shape, bool)
            m2 = np.where(big, (m >> 2) | ((m & 3) != 0), m).astype(np.int64)
            e = np.where(big, 2, 0)
        fmt = {".f32": "f32", ".f16": "f16", ".f64": None}[dt]
        if fmt is None:
            with np.errstate(all="ignore"):
                r = np.where(big, np.nan, m.astype(np.float64))
            g.write(dst, np.asarray(r).view(np.uint64))
            return
        r = rounding.round_scaled(m2, e.astype(np.int64), fmt, mode)
        g.write(dst, np.asarray(r).view(udtype(dt)))

    return d.op(run)


def _float_to_int(d, dt, st, rnd, ftz):
    db = bits_of(dt)
    if rnd not in INT_ROUND or st not in (".f32", ".f64", ".f16"):
        raise isa.Unsupported(f"cvt{rnd or ''}{dt}{st}")
    fd = {".f32": np.float32, ".f64": np.float64, ".f16": np.float16}[st]
    dst, src = d.dst(0), d.src(1, udtype(st))
    signed = kind_of(dt) == "s"
    fn = INT_ROUND[rnd]
    lo, hi = (-(2 ** (db - 1)), 2 ** (db - 1) - 1) if signed else (0, 2**db - 1)

    def run(g):
        x = np.asarray(g.R[src]).astype(udtype(st)).view(fd).astype(np.float64)
        if ftz and st == ".f32":
            x = np.where(np.abs(x) < 2.0**-126, 0.0, x)
        with np.errstate(all="ignore"):
            v = fn(x)
        nan = np.isnan(v)
        v = np.where(nan, 0, v)
        if db == 64:  # exact clamp through Python ints past float64's exact integers
            ints = [0 if n else max(lo, min(hi, int(f))) for f, n in zip(v.tolist(), nan.tolist())]
            r = np.array([i & (2**64 - 1) for i in ints], np.uint64)
        else:
            r = np.clip(v, lo, hi).astype(np.int64).astype(sdtype(db) if signed else udtype(db)).view(udtype(db))
        g.write(dst, r)

    return d.op(run)


def _float_to_float(d, dt, st, rnd, ftz, sat):
    dst, src = d.dst(0), d.src(1, udtype(st))
    if (dt, st) == (".f32", ".f16") and rnd is None:

        def run(g):
            x = np.asarray(g.R[src]).astype(np.uint16).view(np.float16)
            g.write(dst, np.asarray(ieee32.cvt_f16_to_f32(x)).view(np.uint32))

        return d.op(run)
    if (dt, st) == (".f32", ".bf16") and rnd is None:

        def run(g):
            x = np.asarray(g.R[src]).astype(np.uint16)
            g.write(dst, x.astype(np.uint32) << np.uint32(16))

        return d.op(run)
    if (dt, st) in ((".f16", ".f32"), (".bf16", ".f32")) and rnd == ".rn" and not sat:
        fn = ieee32.cvt_f32_to_f16 if dt == ".f16" else ieee32.cvt_f32_to_bf16

        def run(g):
            x = np.asarray(g.R[src]).astype(np.uint32).view(np.float32)
            if ftz:
                x = ieee32.flush_subnormals(x)
            g.write(dst, np.asarray(fn(x)).view(np.uint16))

        return d.op(run)
    if (dt, st) == (".f64", ".f32") and rnd is None:

        def run(g):
            x = np.asarray(g.R[src]).astype(np.uint32).view(np.float32)
            g.write(dst, np.asarray(rounding.f32_to_f64(x)).view(np.uint64))

        return d.op(run)
    if (dt, st) == (".f32", ".f64") and rnd == ".rn":

        def run(g):
            x = np.asarray(g.R[src]).astype(np.uint64).view(np.float64)
            g.write(dst, np.asarray(rounding.f64_to_f32(x)).view(np.uint32))

        return d.op(run)
    if (dt, st) == (".f32", ".f32") and rnd in (".rni", ".rzi", ".rmi", ".rpi"):
        fn = INT_ROUND[rnd]

        def run(g):
            x = np.asarray(g.R[src]).astype(np.uint32).view(np.float32)
            if ftz:
                x = ieee32.flush_subnormals(x)
            r = np.asarray(fn(x), np.float32)
            r = np.where(np.isnan(x), np.float32(np.nan), r)
            bits = r.view(np.uint32)
            g.write(dst, np.where(np.isnan(r), np.uint32(0x7FFFFFFF), bits))

        return d.op(run)
    raise isa.Unsupported(f"cvt{rnd or ''}{dt}{st} (not yet)")


def _pack_half2(d, dt, rnd, relu, sat):
    """cvt.rn{.relu}{.satfinite}.f16x2.f32 d, a, b: d = {a -> upper half, b -> lower half}."""
    if rnd != ".rn" or relu or sat:
        raise isa.Unsupported(f"cvt{rnd or ''}{'.relu' if relu else ''}{dt}.f32 (only .rn so far)")
    dst, a, b = d.dst(0), d.src(1, np.uint32), d.src(2, np.uint32)
    fn = ieee32.cvt_f32_to_f16 if dt == ".f16x2" else ieee32.cvt_f32_to_bf16

    def run(g):
        hi = np.asarray(fn(np.asarray(g.R[a]).astype(np.uint32).view(np.float32))).view(np.uint16)
        lo = np.asarray(fn(np.asarray(g.R[b]).astype(np.uint32).view(np.float32))).view(np.uint16)
        g.write(dst, (hi.astype(np.uint32) << np.uint32(16)) | lo.astype(np.uint32))

    return d.op(run)
