"""What the layout capture kernel (kernel/capture/layout.cu) must dump, according to flashsim.layout.

The capture runs one warp that loads known tiles with ldmatrix, runs mma.m16n8k16 (f32 and f16 accumulation,
f16 and bf16 inputs), repacks S into P with cvt.rn.f16x2.f32, runs P @ V, converts chosen f32 pairs with
cvt.rn.{f16,bf16}x2.f32 and runs shfl.sync in every mode; every lane writes its raw 32-bit registers into
slots of one (32, NOUT) uint32 array. This module owns the slot table (the kernel receives the offsets as
defines), builds the inputs, and computes every slot's expected words from the fragment maps alone, so
the comparison needs numpy only: the capture tool uses it on the GPU machine, the silicon test uses it on
the saved npz in CI.

Inputs are chosen so that layout is the only thing under test: ldmatrix tiles hold distinct bit patterns
(a misplaced element cannot go unseen), and mma operands are small integers whose products and sums are
exact in f16 and f32, so the expected D needs no tensor-core rounding model.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from . import ldmatrix
from .fragments import a_fragment, b_fragment, c_fragment
from .regfile import shfl_source_lanes
from .repack import cvt_rn_x2, repack_s_to_p

NCVT = 64  # cvt words per lane (each from a pair of f32 inputs)
NSHFL = 24  # shuffle operations
TILE = 256  # 16-bit elements per tile (16x16, or 32 rows x 8 for R)
TILES = ("a_u", "k_u", "v_u", "r", "a_m", "k_m", "v_m")  # order in shared memory (u: distinct patterns, m: mma)
ADDRS = ("a_x4", "kt_x2", "kt_x4", "v_x2t", "v_x4t", "r_perm")
HOST_REGS = (("c_f32", 4), ("c_f16", 2), ("a_bf16", 4), ("b_bf16", 2))
SHFL_MODES = ("up", "down", "bfly", "idx")  # the kernel's mode numbering

SLOTS = (
    ("ld_a_x4", 4),
    ("ld_kt_x2", 2),
    ("ld_kt_x4", 4),
    ("ld_v_x2t", 2),
    ("ld_v_x4t", 4),
    ("ld_r_x1", 1),
    ("ld_r_x2", 2),
    ("ld_r_x4", 4),
    ("ld_r_x1t", 1),
    ("ld_r_x2t", 2),
    ("ld_r_x4t", 4),
    ("mma_f32", 4),
    ("mma_f16", 2),
    ("mma_bf16", 4),
    ("s", 8),
    ("p", 4),
    ("o_f32", 8),
    ("o_f16", 4),
    ("cvt_f16x2", NCVT),
    ("cvt_bf16x2", NCVT),
    ("shfl", NSHFL),
    ("shfl_pred", NSHFL),
)


def slot_offsets(slots=SLOTS) -> dict[str, tuple[int, int]]:
    """name -> (offset, words) within a lane's row of the output."""
    out, off = {}, 0
    for name, n in slots:
        out[name] = (off, n)
        off += n
    return out


def nout(slots=SLOTS) -> int:
    return sum(n for _, n in slots)


def defines() -> dict[str, int]:
    """The kernel build's defines: every slot offset and every size, written here only."""
    d = {f"LC_{name.upper()}": off for name, (off, _) in slot_offsets().items()}
    d.update(
        LC_NOUT=nout(),
        LC_NCVT=NCVT,
        LC_NSHFL=NSHFL,
        LC_TILE=TILE,
        LC_NTILES=len(TILES),
        LC_NADDR=len(ADDRS),
        LC_NHOST=sum(n for _, n in HOST_REGS),
    )
    d.update({f"LC_T_{t.upper()}": k for k, t in enumerate(TILES)})
    d.update({f"LC_ADDR_{a.upper()}": k for k, a in enumerate(ADDRS)})
    return d


# ---- inputs ---------------------------------------------------------------------------------


def _small_ints(rng, shape, lo, hi, dtype):
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)


def cvt_inputs(rng) -> np.ndarray:
    """(32, 2*NCVT) f32 bit patterns: rounding midpoints and their neighbours for f16 and bf16, overflow and
    underflow edges, signed zeros, infinities, NaNs with payloads and signs, and random patterns."""
    f = np.float32
    edges = f(
        [
            0.0,
            -0.0,
            1.0,
            65504.0,
            65519.99,
            65520.0,
            65536.0,
            1e5,
            2.0**-24,
            2.0**-25,
            3 * 2.0**-26,
            2.0**-14,
            2.0**-15 * 1.5,
            3.3895314e38,
            3.3961776e38,
            3.4028235e38,
            1e-40,
            np.inf,
            -np.inf,
        ]
    )
    nans = np.array(
        [0x7FC00000, 0x7F800001, 0xFFC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000, 0xFF812345], np.uint32
    ).view(np.float32)
    mids = []
    for dt, top in ((np.float16, 0x7C00), (ml_dtypes.bfloat16, 0x7F80)):
        v = rng.integers(0, top - 1, size=300, dtype=np.uint16).view(dt)
        a, b = v.astype(np.float64), np.nextafter(v, np.array(np.inf, dt)).astype(np.float64)
        m = ((a + b) / 2).astype(np.float32)
        mids += [m, np.nextafter(m, f(0)), np.nextafter(m, f(np.inf))]
    chosen = np.concatenate([edges, -edges, nans, *mids, -mids[0][:200], -mids[3][:200]])
    n = 32 * 2 * NCVT
    rest = rng.integers(0, 1 << 32, size=n - len(chosen), dtype=np.uint32).view(np.float32)
    x = np.concatenate([chosen, rest])
    return rng.permutation(x).view(np.uint32).reshape(32, 2 * NCVT)


def shfl_ops(rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mode (NSHFL,), b (NSHFL, 32), c (NSHFL,)): every mode at several widths, odd clamps, per-lane b."""
    ops = [
        ("bfly", 1, 0x1F),
        ("bfly", 2, 0x1F),
        ("bfly", 4, 0x1F),
        ("bfly", 8, 0x1F),
        ("bfly", 16, 0x1F),
        ("bfly", 1, 0x1C1F),
        ("bfly", 5, 0x181F),
        ("bfly", 3, 0x0310),
        ("idx", 0, 0x1F),
        ("idx", 13, 0x1F),
        ("idx", "rand", 0x1F),
        ("idx", "rand", 0x181F),
        ("idx", "rand", 0x1C1F),
        ("idx", "rand", 0x0005),
        ("idx", "rand", 0x0A17),
        ("up", 1, 0x0),
        ("up", 3, 0x0),
        ("up", 2, 0x1800),
        ("up", 4, 0x0C03),
        ("down", 1, 0x1F),
        ("down", 5, 0x1F),
        ("down", 2, 0x101F),
        ("down", 3, 0x1C1F),
        ("down", 7, 0x0309),
    ]
    assert len(ops) == NSHFL
    mode = np.array([SHFL_MODES.index(m) for m, _, _ in ops], np.int32)
    b = np.stack([rng.integers(0, 64, 32) if v == "rand" else np.full(32, v) for _, v, _ in ops]).astype(np.int32)
    c = np.array([cc for _, _, cc in ops], np.int32)
    return mode, b, c


def make_inputs(seed: int = 2026) -> dict[str, np.ndarray]:
    """Every input array of the capture (all saved into the npz beside the dump)."""
    rng = np.random.default_rng(seed)
    distinct = rng.choice(1 << 16, size=4 * TILE, replace=False).astype(np.uint16).reshape(4, TILE)
    mma = [_small_ints(rng, (TILE,), -2, 2, np.float16).view(np.uint16) for _ in range(3)]
    tiles = np.concatenate([distinct, np.stack(mma)])  # (7, 256) uint16
    r_perm = rng.permutation(32)
    addr = np.stack(
        [ldmatrix.a_x4(16), ldmatrix.kt_x2(16), ldmatrix.kt_x4(16), ldmatrix.v_x2t(16), ldmatrix.v_x4t(16), 8 * r_perm],
        axis=1,
    ).astype(np.int32)
    c32 = _small_ints(rng, (16, 8), -100, 100, np.float32)
    c16 = _small_ints(rng, (16, 8), -100, 100, np.float16)
    abf = _small_ints(rng, (16, 16), -3, 3, np.float32).astype(ml_dtypes.bfloat16)
    bbf = _small_ints(rng, (16, 8), -3, 3, np.float32).astype(ml_dtypes.bfloat16)
    host_regs = np.concatenate([c_fragment(c32), c_fragment(c16), a_fragment(abf), b_fragment(bbf)], axis=1)
    mode, b, c = shfl_ops(rng)
    return {
        "tiles": tiles,
        "addr": addr,
        "host_regs": host_regs.astype(np.uint32),
        "c32": c32,
        "c16": c16.view(np.uint16),
        "abf": abf.view(np.uint16),
        "bbf": bbf.view(np.uint16),
        "cvt_in": cvt_inputs(rng),
        "shfl_in": (rng.integers(0, 1 << 32, size=(NSHFL, 32), dtype=np.uint32)),
        "shfl_mode": mode,
        "shfl_b": b,
        "shfl_c": c,
    }


# ---- expectations ---------------------------------------------------------------------------


def _tile(inputs, name, dtype=np.float16):
    return inputs["tiles"][TILES.index(name)].view(dtype).reshape(16, 16)


def _exact(x: np.ndarray, dtype) -> np.ndarray:
    """float64 results that the small-integer inputs make exact in ``dtype`` (checked, not assumed)."""
    y = x.astype(dtype)
    if not np.array_equal(y.astype(np.float64), x):
        raise ValueError(f"capture inputs give a result not exact in {np.dtype(dtype)}: rounding would be under test")
    return y


def expected(inputs: dict) -> dict[str, np.ndarray]:
    """Slot name -> expected (32, words) uint32, from flashsim.layout's maps."""
    a_u, k_u, v_u = (_tile(inputs, n) for n in ("a_u", "k_u", "v_u"))
    r = inputs["tiles"][TILES.index("r")].reshape(32, 8)
    rows = r[inputs["addr"][:, ADDRS.index("r_perm")] // 8]  # the row each lane points at
    a_m, k_m, v_m = (_tile(inputs, n).astype(np.float64) for n in ("a_m", "k_m", "v_m"))
    s = a_m @ k_m.T
    p = _exact(s, np.float16)
    pv = p.astype(np.float64) @ v_m
    ab = inputs["abf"].view(ml_dtypes.bfloat16).astype(np.float64)
    bb = inputs["bbf"].view(ml_dtypes.bfloat16).astype(np.float64)
    cvt = inputs["cvt_in"]
    exp = {
        "ld_a_x4": a_fragment(a_u),
        "ld_kt_x2": b_fragment(np.ascontiguousarray(k_u.T[:, :8])),
        "ld_kt_x4": b_fragment(np.ascontiguousarray(k_u.T)),
        "ld_v_x2t": b_fragment(np.ascontiguousarray(v_u[:, :8])),
        "ld_v_x4t": b_fragment(v_u),
        "mma_f32": c_fragment(_exact(s[:, :8] + inputs["c32"], np.float32)),
        "mma_f16": c_fragment(_exact(s[:, :8] + inputs["c16"].view(np.float16), np.float16)),
        "mma_bf16": c_fragment(_exact(ab @ bb, np.float32)),
        "s": c_fragment(_exact(s, np.float32)),
        "p": a_fragment(p),
        "o_f32": c_fragment(_exact(pv, np.float32)),
        "o_f16": c_fragment(_exact(pv, np.float16)),
        "cvt_f16x2": cvt_rn_x2(cvt[:, 0::2], cvt[:, 1::2], np.float16),
        "cvt_bf16x2": cvt_rn_x2(cvt[:, 0::2], cvt[:, 1::2], ml_dtypes.bfloat16),
    }
    for num in (1, 2, 4):
        exp[f"ld_r_x{num}"] = ldmatrix.load_rows(rows[: 8 * num])
        exp[f"ld_r_x{num}t"] = ldmatrix.load_rows(rows[: 8 * num], trans=True)
    srcs = [
        shfl_source_lanes(SHFL_MODES[m], b, int(c))
        for m, b, c in zip(inputs["shfl_mode"], inputs["shfl_b"], inputs["shfl_c"])
    ]
    exp["shfl"] = np.stack([inputs["shfl_in"][k][j] for k, (j, _) in enumerate(srcs)], axis=1)
    exp["shfl_pred"] = np.stack([v for _, v in srcs], axis=1).astype(np.uint32)
    return {k: np.asarray(v, dtype=np.uint32) for k, v in exp.items()}


# ---- comparison ------------------------------------------------------------------------------


@dataclass
class SlotCheck:
    name: str
    ok: bool
    mismatches: int
    words: int
    detail: str

    def __str__(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name:<11} {self.words - self.mismatches}/{self.words} words" + (
            f"  {self.detail}" if self.detail else ""
        )


def split(out: np.ndarray, slots=SLOTS) -> dict[str, np.ndarray]:
    """A (32, NOUT) dump -> slot name -> (32, words)."""
    if out.shape != (32, nout(slots)):
        raise ValueError(f"out must have shape (32, {nout(slots)}), got {out.shape}")
    return {name: out[:, off : off + n] for name, (off, n) in slot_offsets(slots).items()}


def compare(inputs: dict, out: np.ndarray, slots=SLOTS) -> list[SlotCheck]:
    """Every slot of a dump against its expectation, plus the repack applied to the dump's own S."""
    got = split(np.asarray(out, dtype=np.uint32), slots)
    exp = expected(inputs)
    checks = []
    for name, _ in slots:
        checks.append(_check(name, got[name], exp[name], inputs))
    checks.append(_check("p_from_s", got["p"], repack_s_to_p(got["s"]), inputs))  # silicon's S, our repack
    return checks


def _check(name, got, exp, inputs) -> SlotCheck:
    bad = got != exp
    n = int(bad.sum())
    detail = ""
    if n:
        lane, reg = (int(x[0]) for x in np.nonzero(bad))
        detail = (
            f"first at lane {lane} word {reg}: got 0x{int(got[lane, reg]):08x}, expected 0x{int(exp[lane, reg]):08x}"
        )
        if name.startswith("cvt"):
            x = inputs["cvt_in"].view(np.float32)
            nan_pair = np.isnan(x[:, 0::2]) | np.isnan(x[:, 1::2])
            detail += f"; {int((bad & nan_pair).sum())} of the mismatches involve a NaN input"
    return SlotCheck(name, n == 0, n, got.size, detail)
