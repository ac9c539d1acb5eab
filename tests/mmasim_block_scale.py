"""The oracle of tests/test_mma_block_scale.py and benchmarks/experiments/block_scale_vs_mmasim/: MMA-Sim's RTX
Blackwell models of sm_120a's kind::f8f6f4 and block-scaled mma.sync (the ``mmasim`` package, mmasim/nv_ptx/sim.py:
classes MMA and MMABlockScale), fed flashsim.mma_block_scale's operands (one uint8 code per element) in mmasim's own
conventions, and random / adversarial operand generators shared by the test and the million-case run.

mmasim's conventions (mmasim/arithmetic/helper.py): a kind::f8f6f4 / mxf8f6f4 e2m1 code sits in bits 5..2 of its
byte, an e2m3 / e3m2 code in bits 5..0 (the PTX ISA's 8-bit containers); kind::mxf4 / mxf4nvf4 take e2m1 packed two
per byte, the element of lower k in the high nibble; scales as torch float8_e8m0fnu (ue8m0) or float8_e4m3fn
(ue4m3, sign bit cleared). Its ``dpa`` runs any batch of dot products: vectors (..., K), c (...), scales (..., n).
"""

from __future__ import annotations

import numpy as np
import torch
from mmasim.nv_ptx import sim

from flashsim.numerics.tensorcore.types import KIND_FORMS

torch.set_num_threads(1)  # small batches: torch's thread pool costs more than it gives, and the CPUs are shared
ARCH = "RTX Blackwell"
TORCH_FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
K_OF = {"f8f6f4": 32, "mxf8f6f4": 32, "mxf4": 64, "mxf4nvf4": 64}

FORMS = list(KIND_FORMS)  # (kind, scale_vec, scale format or None, a format, b format, accumulator)

_OPS: dict = {}


def _op(kind, n, sf, af, bf, acc):
    key = (kind, n, sf, af, bf, acc)
    if key not in _OPS:
        if kind == "f8f6f4":
            _OPS[key] = sim.MMA(ARCH, f"m16n8k32.kind::f8f6f4.{acc}.{af}.{bf}.{acc}")
        else:
            K = K_OF[kind]
            _OPS[key] = sim.MMABlockScale(ARCH, f"m16n8k{K}.kind::{kind}.block{K // n}.f32.{af}.{bf}.f32.{sf}")
    return _OPS[key]


def _elements(codes: np.ndarray, fmt: str, packed: bool):
    """uint8 codes (..., K) -> the tensor mmasim's dpa reads for ``fmt``."""
    if packed:  # two e2m1 per byte, lower k in the high nibble
        return torch.from_numpy(np.ascontiguousarray((codes[..., 0::2] << 4) | codes[..., 1::2]))
    if fmt in TORCH_FP8:
        return torch.from_numpy(np.ascontiguousarray(codes)).view(TORCH_FP8[fmt])
    return torch.from_numpy(np.ascontiguousarray(codes << 2 if fmt == "e2m1" else codes))


def _scales(codes: np.ndarray, sf: str):
    t = torch.from_numpy(np.ascontiguousarray(codes))
    return t.view(torch.float8_e8m0fnu if sf == "ue8m0" else torch.float8_e4m3fn)


def mmasim_mma(form, a, b, c, sa=None, sb=None) -> np.ndarray:
    """mmasim's d for a batch: a (B, 16, K), b (B, K, 8) uint8 codes, c (B, 16, 8), sa (B, 16, n), sb (B, n, 8)."""
    kind, n, sf, af, bf, acc = form
    op = _op(*form)
    av = np.broadcast_to(a[:, :, None, :], a.shape[:2] + (8, a.shape[2]))  # (B, 16, 8, K)
    bv = np.broadcast_to(np.swapaxes(b, 1, 2)[:, None], (b.shape[0], 16, 8, b.shape[1]))
    packed = kind in ("mxf4", "mxf4nvf4")
    args = [_elements(av, af, packed), _elements(bv, bf, packed), torch.from_numpy(np.ascontiguousarray(c))]
    if kind != "f8f6f4":
        sav = np.broadcast_to(sa[:, :, None, :], sa.shape[:2] + (8, sa.shape[2]))
        sbv = np.broadcast_to(np.swapaxes(sb, 1, 2)[:, None], (sb.shape[0], 16, 8, sb.shape[1]))
        args += [_scales(sav, sf), _scales(sbv, sf)]
    d = op.dpa(*args)
    return d.numpy()


# ---- operands ------------------------------------------------------------------------------------------------------

CODES = {"e2m1": 16, "e2m3": 64, "e3m2": 64, "e4m3": 256, "e5m2": 256, "ue8m0": 256, "ue4m3": 128}
STYLES = ("random", "all_codes", "scale_extremes", "specials", "cancel", "overflow", "c_extremes", "sparse")


SPECIALS = {"e4m3": (0x7F, 0xFF), "e5m2": tuple(range(0x7C, 0x80)) + tuple(range(0xFC, 0x100))}


def finite_codes(rng, fmt: str, shape) -> np.ndarray:
    """Random codes of ``fmt`` without its NaN / inf codes (the finite arithmetic; "specials" adds them back)."""
    x = rng.integers(0, CODES[fmt], shape, dtype=np.uint16).astype(np.uint8)
    bad = np.isin(x, np.array(SPECIALS.get(fmt, ()), np.uint8))
    x[bad] &= 0x3B  # e4m3 0x7F -> 0x3B, e5m2 0x7C.. -> 0x38..: finite codes of the same sign-free magnitude class
    return x


def _c(rng, shape, acc, style):
    """Accumulators: random bits of the type (every class: subnormals, inf, NaN), or values near the products."""
    if acc == "f16":
        c = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16).view(np.float16)
        return c if style in ("c_extremes", "specials") else (rng.standard_normal(shape) * 4).astype(np.float16)
    if style in ("c_extremes", "specials"):
        return rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32).view(np.float32)
    mag = np.exp2(rng.integers(-30, 30, shape)).astype(np.float32)
    c = (rng.standard_normal(shape) * mag).astype(np.float32)
    c[rng.random(shape) < 0.3] = 0
    return c


def operands(rng, form, batch: int, style: str):
    """(a, b, c, sa, sb) for ``batch`` mmas of ``form`` in ``style`` (STYLES): random codes; every code of each format
    in turn; scales at the extremes of their format; NaN / inf codes and scales; cancelling product pairs; products
    and scales that overflow f32; c across all its bit patterns; mostly zero operands."""
    kind, n, sf, af, bf, acc = form
    K = K_OF[kind]
    na, nb = CODES[af], CODES[bf]
    a = finite_codes(rng, af, (batch, 16, K))
    b = finite_codes(rng, bf, (batch, K, 8))
    c = _c(rng, (batch, 16, 8), acc, style)
    sa = sb = None
    if sf is not None:
        ns = CODES[sf]
        sa = rng.integers(0, ns, (batch, 16, n), dtype=np.uint16).astype(np.uint8)
        sb = rng.integers(0, ns, (batch, n, 8), dtype=np.uint16).astype(np.uint8)
        if style == "random":  # scales near 1, where products and c meet
            centre = 127 if sf == "ue8m0" else 0x38
            sa = np.clip(centre + rng.integers(-6, 7, sa.shape), 0, ns - 2).astype(np.uint8)
            sb = np.clip(centre + rng.integers(-6, 7, sb.shape), 0, ns - 2).astype(np.uint8)
    if style == "all_codes":  # every code of each format, cycling through the batch
        a = (np.arange(a.size) % na).reshape(a.shape).astype(np.uint8)
        b = (np.arange(b.size) % nb).reshape(b.shape)[::-1].copy().astype(np.uint8)
        if sf is not None:
            sa = (np.arange(sa.size) % CODES[sf]).reshape(sa.shape).astype(np.uint8)
            sb = (np.arange(sb.size)[::-1] % CODES[sf]).reshape(sb.shape).astype(np.uint8)
    elif style == "scale_extremes" and sf is not None:
        lo_hi = np.array([0, 1, 2, CODES[sf] - 3, CODES[sf] - 2], np.uint8)  # smallest and largest finite scales
        sa, sb = rng.choice(lo_hi, sa.shape), rng.choice(lo_hi, sb.shape)
    elif style == "specials":
        for x, f in ((a, af), (b, bf)):
            sp = {"e4m3": [0x7F, 0xFF, 0x7E, 0xFE], "e5m2": [0x7C, 0xFC, 0x7D, 0xFF, 0x7B]}.get(f)
            if sp is not None:
                m = rng.random(x.shape) < 0.05
                x[m] = rng.choice(np.array(sp, np.uint8), m.sum())
        if sf is not None:
            nan = 0xFF if sf == "ue8m0" else 0x7F
            for s in (sa, sb):
                s[rng.random(s.shape) < 0.1] = nan
    elif style == "cancel":  # pairs of k whose products cancel exactly (A's element negated)
        sign = {"e2m1": 8, "e2m3": 32, "e3m2": 32}.get(af, 0x80)
        a[..., 1::2] = a[..., 0::2] ^ sign
        b[..., 1::2, :] = b[..., 0::2, :]
        c[...] = 0 if rng.random() < 0.5 else c
    elif style == "overflow" and sf is not None:  # large elements and scales: results beyond f32
        top = np.array([CODES[sf] - 2, CODES[sf] - 3], np.uint8)
        sa, sb = rng.choice(top, sa.shape), rng.choice(top, sb.shape)
    elif style == "overflow":
        pass  # unscaled: f16 accumulators overflow with large e4m3 / e5m2 products, random codes reach them
    elif style == "sparse":
        a[rng.random(a.shape) < 0.8] = 0
        b[rng.random(b.shape) < 0.8] = 0
    return a, b, c, sa, sb
