"""``tanh.approx.f32`` of sm_90 (H100 / H200, one GH100 die) as fitted from the whole-binade capture
(benchmarks/logs/2026-12-06-tanh; analysis in benchmarks/experiments/tanh_interpolator/README.md).

The unit, per biased input exponent E in 119 .. 129 (flashsim.numerics.sfu_interp's family, one ``QuadBinade`` each):
it reads only the top 17 + k mantissa bits (k = index bits: 0 for E 119-121, 1 for 122-123, 2 for 124-126, 3 for
127, 4 for 128, 3 for 129), takes the top k as the segment index i and the next 17 as X, squares X on a folded
squarer array whose partial products in columns below 19 are left out (S = Sq(X) >> 19), and forms the exact sum
A = C0[i] + C1[i] X + C2[i] S on a grid of 2^(u - 12) (u: the exponent of the largest result ulp of the binade),
then truncates A toward zero to f32. Below E = 119 (|x| < 2^-8: subnormals and zero too) the result is x, from
E = 130 on (|x| >= 8, inf) it is +-1, tanh(-x) = -tanh(x), NaN gives 0x7FFFFFFF
(benchmarks/logs/2026-12-01/sfu_approx/summary_sm90.json ``relations`` / ``specials``).

Measured: every input of biased exponents 117 .. 130, both signs (2 x 14 x 2^23 results, reproduced bit for bit by
tests/test_sfu_tanh.py), the exhaustive sweep's relations for the other exponents, and the H200's random sample of
every exponent (held out: tests/test_ptx_sfu.py). The 51 segments' tables (``flashsim/data/sfu/tanh_interp_sm90.npz``,
2 KB, with a sha256 checked on load) are one exact solution each; where several reproduce a segment, the one with
the smallest C0 was kept (any of them gives the same results on every input of the binade).
"""

from __future__ import annotations

import functools
import hashlib
import json
import pathlib

import numpy as np

from .sfu_interp import QuadBinade, QuadFormat, QuadUnit

ARCH = "sm_90"  # the H100 capture; the exhaustive H200 sweep's sample agrees (tests/test_ptx_sfu.py)
TABLES = pathlib.Path(__file__).resolve().parent.parent / "data" / "sfu" / "tanh_interp_sm90.npz"
LOW_BITS = 17  # X: the mantissa bits below the segment index that the unit reads
SQ_DROP = 19  # the folded squarer's columns below this one are not summed; S = Sq(X) >> SQ_DROP

__all__ = ["ARCH", "TABLES", "tanh_unit", "tanh_f32_bits", "write_tables"]


def _sha256(c0, c1, c2, formats: str) -> str:
    h = hashlib.sha256()
    for c in (c0, c1, c2):
        h.update(np.ascontiguousarray(c, dtype="<i8").tobytes())
    h.update(formats.encode())
    return h.hexdigest()


def write_tables(path, binades: dict[int, QuadBinade]) -> None:
    """Store ``binades`` (biased exponent -> QuadBinade) as flat int64 arrays plus the formats (json) and the sha256
    of both (checked on load, as the other SFU tables' are)."""
    es = sorted(binades)
    c0, c1, c2 = (np.concatenate([getattr(binades[e], n) for e in es]).astype(np.int64) for n in ("c0", "c1", "c2"))
    formats = json.dumps({str(e): binades[e].fmt.__dict__ for e in es})
    np.savez_compressed(
        path, c0=c0, c1=c1, c2=c2, formats=np.array(formats), sha256=np.array(_sha256(c0, c1, c2, formats))
    )


@functools.lru_cache(maxsize=1)
def tanh_unit() -> QuadUnit:
    """The model of the module docstring (tables read once)."""
    with np.load(TABLES) as z:
        text, c0, c1, c2 = str(z["formats"]), z["c0"], z["c1"], z["c2"]
        if _sha256(c0, c1, c2, text) != str(z["sha256"]):
            raise ValueError(f"{TABLES}: the tables do not match their stored sha256 (corrupt file)")
    formats = json.loads(text)
    binades, at = {}, 0
    for e in sorted(formats, key=int):
        fmt = QuadFormat(**formats[e])
        n = 1 << fmt.index_bits
        binades[int(e)] = QuadBinade(fmt, c0[at : at + n], c1[at : at + n], c2[at : at + n])
        at += n
    return QuadUnit(binades, identity_below=min(binades), saturate_from=max(binades) + 1)


def tanh_f32_bits(x) -> np.ndarray:
    """``tanh.approx.f32`` of sm_90 on f32 bit patterns (uint32 in, uint32 out, any shape)."""
    x = np.asarray(x, np.uint32)
    return tanh_unit().bits(x.ravel()).reshape(x.shape)
