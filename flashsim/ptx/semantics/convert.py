"""cvt: every conversion PTX has for sm_90 (PTX ISA, "cvt"): integer <-> integer (wrapping, sign / zero
extension, or clamping with .sat), integer <-> float with each rounding, float <-> float (f64, f32, f16, bf16)
with .rn / .rz / .rm / .rp, .ftz and .sat, round-to-integral (.rni / .rzi / .rmi / .rpi to the same type), tf32,
and the packing forms: f16x2 / bf16x2 from two f32 (a in the upper half) with .relu / .satfinite, e4m3x2 / e5m2x2
from two f32 or an f16x2 (.satfinite, .relu), and f16x2 from e4m3x2 / e5m2x2.

Roundings are flashsim.numerics' (numerics.ieee, and ieee32 / formats for the conversions the kernel runs). The
modifier rules are the ISA's as ptxas enforces them: a float result narrower than its source, every int -> float
and every float -> int needs a rounding; a widening takes none; an integer destination clamps with or without
.sat (NaN: numerics.ieee.to_integer's H200 rule); .ftz flushes f32 subnormal inputs and f32 results tiny before
rounding; .sat on a float destination clamps to [+0, 1] (NaN -> +0); .relu makes negative results +0 and NaN the
canonical NaN; .satfinite makes overflows (infinities too) the largest finite value of their sign and keeps NaN a
NaN. A NaN converted to or from f64 keeps its sign and leading payload bits, quieted (numerics.ieee.convert); the
other float conversions give the canonical NaN.

The OCP MX forms of sm_100a / sm_120a (PTX ISA 8.6+; refused elsewhere, as ptxas 13.0 refuses them): cvt.rn.satfinite
{.relu}.e2m1x2.{f32,f16x2} (d .b8: a in bits 4-7), cvt.rn{.relu}.f16x2.e2m1x2 (a .b8), cvt.rn.satfinite{.relu}
.{e2m3x2,e3m2x2}.f32 (d .b16: a in bits 8-13, bits 6-7 and 14-15 zero), cvt.rn{.relu}.f16x2.{e2m3x2,e3m2x2} (the
top two bits of each byte are not read: the ISA asks for them zero and says nothing of other values),
cvt.{rz,rp}{.satfinite}.ue8m0x2.{f32,bf16x2} (a -> bits 8-15), cvt.rn.bf16x2.ue8m0x2; their roundings are
flashsim.numerics.microscaling's. The .rs (stochastic rounding) and x4 forms are not simulated (Unsupported).

What ptxas makes of the forms the ISA leaves open, from nvdisasm of sm_90 cubins (pinned by the probes of
flashsim.ptx.probes.convert): cvt.f32.f32 without modifiers is a move (NaN payloads kept), with .ftz / .sat an
FADD (NaN canonical); cvt.ftz.f64.f32 is FMUL.FTZ by 1 and then F2F.F64.F32, so its NaN is the canonical f32 NaN
widened, 0x7FFFFFFFE0000000 (convert/cvt_ftz_f64_f32); cvt.f32.bf16 is a shift (NaN payloads kept);
cvt.rna{.satfinite}.tf32.f32 is integer arithmetic on the bits (``ieee.tf32_rna_in_f32``), so a NaN keeps its top 19
bits (and one whose payload lies in the low 13 bits becomes an infinity); cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} gives the
canonical f16 NaN 0x7FFF for a NaN byte (convert/cvt_rn_f16x2_e4m3x2, cvt_rn_f16x2_e5m2x2).
"""

from __future__ import annotations

import functools

import numpy as np

from ...numerics import formats, ieee, ieee32, microscaling
from ...numerics.formats import BF16, E2M1, E2M3, E3M2, E4M3, E5M2, F16, F32, F64, TF32
from .. import isa
from ..program import Decoded
from ..vectorize import ELEMENTWISE
from .common import bits_of, kind_of, udtype, widen
from .floating import result_modifiers

INT_ROUND = {".rni": "rne", ".rzi": "rz", ".rmi": "rm", ".rpi": "rp"}
FLOAT_ROUND = {".rn": "rne", ".rz": "rz", ".rm": "rm", ".rp": "rp", ".rna": "rna"}
FLOATS = {".f64": F64, ".f32": F32, ".f16": F16, ".bf16": BF16}
FP8 = {".e4m3x2": E4M3, ".e5m2x2": E5M2}
MX = {".e2m1x2": E2M1, ".e2m3x2": E2M3, ".e3m2x2": E3M2}  # the OCP MX element pairs
X4 = (".e2m1x4", ".e4m3x4", ".e5m2x4", ".e2m3x4", ".e3m2x4")

_MX_RULE = "PTX ISA 8.6+: sm_100a, sm_101a, sm_120a (ptxas 13.0 refuses them on sm_90a and on plain sm_120)"
for _t in (*MX, ".ue8m0x2"):
    isa.requires("cvt", _t, archs=("sm_100", "sm_120"), source=_MX_RULE)
for _t in FP8:
    isa.requires("cvt", _t, archs=isa.since(89), source="ptxas 13.0: cvt with .e4m3x2/.e5m2x2 requires sm_89 or higher")


@isa.implements("cvt")
def cvt(d: Decoded):
    mods = d.mods
    rnd = mods.take(*INT_ROUND, *FLOAT_ROUND, ".rs")
    ftz = mods.flag(".ftz")
    sat = mods.flag(".sat")
    satfinite = mods.flag(".satfinite")
    relu = mods.flag(".relu")
    unknown = [m for m in mods.left if m in X4]
    if unknown or rnd == ".rs":
        raise isa.Unsupported(
            f"cvt {' '.join(unknown) or '.rs'}: stochastic rounding and the x4 packs are not simulated"
        )
    mx = [m for m in mods.left if m in MX or m == ".ue8m0x2"]
    for m in mx:  # not fundamental types of isa.TYPES: taken here
        mods.left.remove(m)
    types = mods.types()
    mods.done()
    if mx:
        return _mx(d, mx, types, rnd, relu, satfinite, ftz or sat)
    if len(types) != 2:
        raise isa.Unsupported("cvt needs a destination and a source type")
    dt, st = types
    if dt in (".f16x2", ".bf16x2") and st == ".f32":
        return _pack_half2(d, dt, rnd, relu, satfinite, ftz or sat)
    if dt in FP8 or st in FP8:
        return _fp8(d, dt, st, rnd, relu, satfinite, ftz or sat)
    if dt == ".tf32":
        return _tf32(d, st, rnd, relu, satfinite, ftz or sat)
    if satfinite or relu:
        if not (dt in (".f16", ".bf16") and st == ".f32" and rnd in (".rn", ".rz")):
            raise isa.Unsupported(f"cvt .relu / .satfinite to {dt} from {st}")
    dk, sk = kind_of(dt), kind_of(st)
    if dk in "usb" and sk in "usb":
        if rnd is not None or ftz:
            raise isa.Unsupported(f"cvt{rnd or '.ftz'} between integers")
        return _int_to_int(d, dt, st, sat)
    if dt not in FLOATS and dk == "f" or st not in FLOATS and sk == "f":
        raise isa.Unsupported(f"cvt{dt}{st}")
    if ftz and F32 not in (FLOATS.get(dt), FLOATS.get(st)):
        raise isa.Unsupported(".ftz needs an .f32 source or destination")
    if dk == "f" and sk in "us":
        if rnd not in (".rn", ".rz", ".rm", ".rp"):
            raise isa.Unsupported(f"cvt{rnd or ''}{dt}{st}: int -> float needs .rn / .rz / .rm / .rp")
        return _int_to_float(d, dt, st, FLOAT_ROUND[rnd], ftz, sat)
    if dk in "us" and sk == "f":
        if rnd not in INT_ROUND:
            raise isa.Unsupported(f"cvt{rnd or ''}{dt}{st}: float -> int needs .rni / .rzi / .rmi / .rpi")
        return _float_to_int(d, dt, st, INT_ROUND[rnd], ftz)
    return _float_to_float(d, dt, st, rnd, ftz, sat, relu, satfinite)


def _int_to_int(d: Decoded, dt: str, st: str, sat: bool):
    db, sb = bits_of(dt), bits_of(st)
    dst = d.dst(0)
    reg_bits = d.prog.dtypes[dst].itemsize * 8 if dst is not None else db
    src = d.src(1, udtype(sb))
    s_signed, d_signed = kind_of(st) == "s", kind_of(dt) == "s"
    dmask = np.uint64((1 << db) - 1 if db < 64 else 2**64 - 1)
    hi = np.uint64((1 << (db - 1)) - 1 if d_signed else int(dmask))  # the largest destination value
    lo_mag = np.uint64(1 << (db - 1) if d_signed else 0)  # the magnitude of the smallest

    def run(g):
        x = widen(np.asarray(g.R[src]).astype(udtype(sb)), sb, 64, s_signed)  # 64-bit two's complement
        if sat:
            negative = (x >> np.uint64(63)) == 1 if s_signed else np.zeros(x.shape, bool)
            mag = np.where(negative, ~x + np.uint64(1), x)
            r = np.where(negative, (~np.minimum(mag, lo_mag) + np.uint64(1)) & dmask, np.minimum(mag, hi))
        else:
            r = x & dmask  # truncate to the low bits (a widening is already sign- or zero-extended)
        r = r.astype(udtype(db))
        if reg_bits > db:  # a narrow destination type in a wider register: sign- or zero-extended
            r = widen(r, db, reg_bits, d_signed)
        g.write(dst, r)

    return d.op(run)


def _int_to_float(d: Decoded, dt: str, st: str, mode: str, ftz: bool, sat: bool):
    sb, f = bits_of(st), FLOATS[dt]
    dst, src = d.dst(0), d.src(1, udtype(sb))
    signed = kind_of(st) == "s"

    def run(g):
        r = ieee.from_integer(np.asarray(g.R[src]).astype(udtype(sb)), sb, signed, f, mode)
        g.write(dst, result_modifiers(r, f, ftz and f is F32, sat))

    return d.op(run)


def _float_to_int(d: Decoded, dt: str, st: str, mode: str, ftz: bool):
    """Round to an integer in ``mode`` and clamp to dt's range (NaN: ieee.to_integer's H200 rule); .sat changes
    nothing (PTX: the clamp is the default for float -> integer)."""
    f, db = FLOATS[st], bits_of(dt)
    dst, src = d.dst(0), d.src(1, udtype(st))
    reg_bits = d.prog.dtypes[dst].itemsize * 8 if dst is not None else db
    signed = kind_of(dt) == "s"

    def run(g):
        x = np.asarray(g.R[src]).astype(udtype(st))
        if ftz:
            x = ieee.flush_subnormal(x, f)
        r = ieee.to_integer(x, f, mode, db, signed).astype(udtype(db))
        if reg_bits > db:
            r = widen(r, db, reg_bits, signed)
        g.write(dst, r)

    return d.op(run)


def _float_to_float(d: Decoded, dt: str, st: str, rnd, ftz: bool, sat: bool, relu: bool, satfinite: bool):
    fd, fs = FLOATS[dt], FLOATS[st]
    dst, src = d.dst(0), d.src(1, udtype(st))
    if dt == st:
        if rnd is not None and rnd not in INT_ROUND:
            raise isa.Unsupported(f"cvt{rnd}{dt}{st}: a same-type cvt rounds to an integer (.rni ...) or not at all")
    elif fd.bits > fs.bits or (fs, fd) in ((F16, F32), (BF16, F32)):  # a widening: exact
        if rnd is not None:
            raise isa.Unsupported(f"cvt{rnd}{dt}{st}: a widening takes no rounding")
    elif rnd is None and fd.bits == fs.bits:
        rnd = ".rn"  # f16 <-> bf16 (neither holds the other): ptxas takes no modifier as .rn (F2F.F16.BF16)
    elif rnd not in (".rn", ".rz", ".rm", ".rp"):
        raise isa.Unsupported(f"cvt{rnd or ''}{dt}{st} needs .rn / .rz / .rm / .rp")
    flush_in, flush_out = ftz and fs is F32, ftz and fd is F32
    overflow = "finite" if satfinite else "ieee"

    def convert(x):
        if dt == st:
            if rnd is not None:
                return ieee.round_integral(x, fs, INT_ROUND[rnd])
            if ftz or sat:  # FADD of -0 (.ftz) or FADD.SAT: the value, NaN canonical
                return np.where(ieee.unpack(x, fs).nan, fs.uint(fs.canonical_nan), x)
            return x  # a move
        if (fs, fd) == (BF16, F32):
            return ieee32.cvt_bf16_to_f32(x.view(BF16.dtype)).view(np.uint32)  # a shift: NaN payloads kept
        if (fs, fd) == (F16, F32):
            return ieee32.cvt_f16_to_f32(x.view(np.float16)).view(np.uint32)
        if (fs, fd) in ((F32, F16), (F32, BF16)) and rnd == ".rn" and not satfinite:
            return np.asarray(ieee32.cvt_f32_to(x.view(np.float32), fd.dtype)).view(np.uint16)
        return ieee.convert(x, fs, fd, FLOAT_ROUND.get(rnd, "rne"), overflow, ftz=flush_out)

    def run(g):
        x = np.asarray(g.R[src]).astype(fs.uint)
        if flush_in:  # ptxas's FMUL.FTZ x, 1 (or the .FTZ of the F2F / FADD itself): the f32 unit, NaN canonical
            x = np.where(ieee.unpack(x, fs).nan, fs.uint(fs.canonical_nan), ieee.flush_subnormal(x, fs))
        g.write(dst, result_modifiers(convert(x), fd, flush_out, sat, relu))

    return d.op(run)


def _pack_half2(d: Decoded, dt: str, rnd, relu: bool, satfinite: bool, ftz_sat: bool):
    """cvt.{rn,rz}{.relu}{.satfinite}.{f16x2,bf16x2}.f32 d, a, b: a -> the upper half, b -> the lower."""
    if rnd not in (".rn", ".rz") or ftz_sat:
        raise isa.Unsupported(f"cvt{rnd or ''}{dt}.f32 (.rn / .rz; no .ftz / .sat)")
    f = F16 if dt == ".f16x2" else BF16
    dst, a, b = d.dst(0), d.src(1, np.uint32), d.src(2, np.uint32)
    one = _single(f, FLOAT_ROUND[rnd], relu, satfinite)

    def run(g):  # lane-wise: an unrolled loop's conversions of one form stack (flashsim.ptx.vectorize)
        hi, lo = (one(np.asarray(g.R[s]).astype(np.uint32)) for s in (a, b))
        g.write(dst, (hi.astype(np.uint32) << np.uint32(16)) | lo.astype(np.uint32))

    return d.op(run, info=ELEMENTWISE)


@functools.cache  # one function per form: the closures of ops of one form hold the same one (they stack)
def _single(f, mode: str, relu: bool, satfinite: bool):
    """f32 bits -> ``f`` bits in ``mode`` with .relu / .satfinite (the kernel's cvt.rn for the plain case)."""

    def one(x):
        if mode == "rne" and not satfinite and f in (F16, BF16):
            r = np.asarray(ieee32.cvt_f32_to(x.view(np.float32), f.dtype)).view(np.uint16)
        else:
            r = ieee.convert(x, F32, f, mode, "finite" if satfinite else "ieee")
        return result_modifiers(r, f, False, relu=relu)

    return one


def _fp8(d: Decoded, dt: str, st: str, rnd, relu: bool, satfinite: bool, ftz_sat: bool):
    """cvt.rn.satfinite{.relu}.{e4m3x2,e5m2x2}.f32 d, a, b (a -> bits 8-15) and .f16x2 d, a (upper half -> bits
    8-15); cvt.rn{.relu}.f16x2.{e4m3x2,e5m2x2} d, a (bits 8-15 -> the upper half), exactly (formats.fp8_to_f16,
    the unpacking mma.sync FP8 uses)."""
    if rnd != ".rn" or ftz_sat:
        raise isa.Unsupported(f"cvt{rnd or ''}{dt}{st} (only .rn, no .ftz / .sat)")
    if dt in FP8:
        if not satfinite:
            raise isa.Unsupported(f"cvt.rn{dt}{st} needs .satfinite")
        f8 = FP8[dt]
        if st == ".f32":
            dst, a, b = d.dst(0), d.src(1, np.uint32), d.src(2, np.uint32)
            srcs, fs = (a, b), F32
        elif st == ".f16x2":
            dst, srcs, fs = d.dst(0), (d.src(1, np.uint32),), F16
        else:
            raise isa.Unsupported(f"cvt{dt}{st}")

        def narrow(x):
            return result_modifiers(ieee.convert(x, fs, f8, "rne", "finite"), f8, False, relu=relu).astype(np.uint16)

        def run(g):
            if len(srcs) == 2:
                hi, lo = (narrow(np.asarray(g.R[s]).astype(np.uint32)) for s in srcs)
            else:
                x = np.asarray(g.R[srcs[0]]).astype(np.uint32)
                hi, lo = narrow(x >> np.uint32(16)), narrow(x & np.uint32(0xFFFF))
            g.write(dst, (hi << np.uint16(8)) | lo)

        return d.op(run)
    if dt != ".f16x2" or satfinite:
        raise isa.Unsupported(f"cvt{'.satfinite' if satfinite else ''}{dt}{st}")
    dtype8 = FP8[st].dtype
    dst, a = d.dst(0), d.src(1, np.uint16)

    def widen8(x):  # exact, but a NaN byte gives the canonical f16 NaN (the F2FP unpack's; relu keeps it)
        r = formats.fp8_to_f16(np.ascontiguousarray(x.astype(np.uint8)).view(dtype8)).view(np.uint16)
        r = np.where(ieee.unpack(r, F16).nan, F16.uint(F16.canonical_nan), r)
        return result_modifiers(r, F16, False, relu=relu).astype(np.uint32)

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint16)
        g.write(dst, (widen8(x >> np.uint16(8)) << np.uint32(16)) | widen8(x & np.uint16(0xFF)))

    return d.op(run)


def _mx(d: Decoded, mx: list, types: list, rnd, relu: bool, satfinite: bool, ftz_sat: bool):
    """The OCP MX forms (module docstring): one MX type and one of f32 / f16x2 / bf16x2, in PTX's order."""
    if ftz_sat or len(mx) != 1 or len(types) != 1:
        raise isa.Unsupported(
            f"cvt{''.join(mx + types)}: one MX type and one of .f32 / .f16x2 / .bf16x2, no .ftz / .sat"
        )
    (m,), (t,) = mx, types
    spelled = f"cvt{rnd or ''}{'.satfinite' if satfinite else ''}{'.relu' if relu else ''}"
    widening = d.ins.mods.index(t) < d.ins.mods.index(m)  # the destination type comes first
    if m == ".ue8m0x2":
        if widening:
            if t != ".bf16x2" or rnd != ".rn" or relu or satfinite:
                raise isa.Unsupported(f"{spelled}{t}{m} (cvt.rn.bf16x2.ue8m0x2 only)")
            return _unpack2(d, np.uint16, 8, microscaling.ue8m0_to_bf16)
        if t not in (".f32", ".bf16x2") or rnd not in (".rz", ".rp") or relu:
            raise isa.Unsupported(f"{spelled}{m}{t} (cvt.{{rz,rp}}{{.satfinite}}.ue8m0x2.{{f32,bf16x2}})")
        src = F32 if t == ".f32" else BF16
        mode = FLOAT_ROUND[rnd]
        return _pack2(d, t, 8, lambda x: microscaling.to_ue8m0(x, src, mode, satfinite=satfinite))
    f = MX[m]
    width = 4 if f is E2M1 else 8
    if widening:
        if t != ".f16x2" or rnd != ".rn" or satfinite:
            raise isa.Unsupported(f"{spelled}{t}{m} (cvt.rn{{.relu}}.f16x2{m})")
        src_dtype = np.uint8 if width == 4 else np.uint16
        return _unpack2(d, src_dtype, width, lambda c: microscaling.element_to_f16(c, f, relu=relu))
    sources = (".f32", ".f16x2") if f is E2M1 else (".f32",)
    if t not in sources or rnd != ".rn" or not satfinite:
        raise isa.Unsupported(f"{spelled}{m}{t} (cvt.rn.satfinite{{.relu}}{m} from {' / '.join(sources)})")
    src = F32 if t == ".f32" else F16
    return _pack2(d, t, width, lambda x: microscaling.to_element(x, src, f, relu=relu))


def _pack2(d: Decoded, st: str, width: int, narrow):
    """d := narrow(a) << width | narrow(b) for cvt d, a, b with f32 sources, or d := narrow(a's upper half) << width |
    narrow(its lower half) for cvt d, a with a packed .f16x2 / .bf16x2 source; d of 2 * width bits."""
    dst = d.dst(0)
    out = np.uint8 if width == 4 else np.uint16
    if st == ".f32":
        if len(d.operands) != 3:
            raise isa.Unsupported("cvt from .f32 to a pair takes two sources")
        a, b = d.src(1, np.uint32), d.src(2, np.uint32)

        def halves(g):
            return (np.asarray(g.R[s]).astype(np.uint32) for s in (a, b))
    else:
        if len(d.operands) != 2:
            raise isa.Unsupported(f"cvt from {st} takes one source")
        a = d.src(1, np.uint32)

        def halves(g):
            x = np.asarray(g.R[a]).astype(np.uint32)
            return x >> np.uint32(16), x & np.uint32(0xFFFF)

    def run(g):
        hi, lo = (narrow(x).astype(out) for x in halves(g))
        g.write(dst, (hi << out(width)) | lo)

    return d.op(run)


def _unpack2(d: Decoded, src_dtype, width: int, widen):
    """d := widen(a's upper ``width`` bits) << 16 | widen(its lower ``width`` bits), 16-bit results."""
    dst, a = d.dst(0), d.src(1, src_dtype)
    mask = np.uint32((1 << width) - 1)

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint32)
        hi, lo = (widen(v).astype(np.uint32) for v in ((x >> np.uint32(width)) & mask, x & mask))
        g.write(dst, (hi << np.uint32(16)) | lo)

    return d.op(run)


def _tf32(d: Decoded, st: str, rnd, relu: bool, satfinite: bool, ftz_sat: bool):
    """cvt.rna{.satfinite}.tf32.f32 as ptxas builds it (``ieee.tf32_rna_in_f32``); cvt.{rn,rz}{.relu}.tf32.f32 (sm_90's
    F2FP.TF32) as one IEEE rounding to tf32's 10 fraction bits, the result in the upper 19 bits of d."""
    if st != ".f32" or ftz_sat:
        raise isa.Unsupported(f"cvt.tf32{st} (from .f32 only, no .ftz / .sat)")
    dst, a = d.dst(0), d.src(1, np.uint32)
    if rnd == ".rna":
        if relu:
            raise isa.Unsupported("cvt.rna.relu.tf32.f32")

        def run(g):
            g.write(dst, ieee.tf32_rna_in_f32(g.R[a], satfinite))

        return d.op(run)
    if rnd not in (".rn", ".rz") or satfinite:
        raise isa.Unsupported(f"cvt{rnd or ''}{'.satfinite' if satfinite else ''}.tf32.f32 (sm_100+ or invalid)")
    mode = FLOAT_ROUND[rnd]

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint32)
        r = result_modifiers(ieee.convert(x, F32, TF32, mode), TF32, False, relu=relu)
        g.write(dst, r.astype(np.uint32) << np.uint32(13))

    return d.op(run)
