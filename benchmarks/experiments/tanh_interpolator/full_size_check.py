"""The analysis on one synthetic binade at the real size (M = 23, 2^23 inputs): recovers the generator or not, and
how long each step takes on this machine: ``python3 benchmarks/experiments/tanh_interpolator/full_size_check.py``
(about 2 minutes on 2 shared cores; output in full_size_timing.txt)."""

from __future__ import annotations

import pathlib
import sys
import time

from flashsim.gpu.capture.tanh import inputs
from flashsim.numerics import sfu_interp as S

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import analyse as A  # noqa: E402

E, M = 126, 23
t = time.time()
unit = S.synthetic_tanh([E], index_bits=7, mant_bits=M, guard_bits=2, c1_bits=16, c2_bits=10, sq_shift=6, rounding="rz")
x = inputs(E, M)
y = unit.bits(x)
print("generator", round(time.time() - t, 1), "s:", unit.binades[E].fmt, flush=True)
b = A.Binade(E, M, y, 0, 1 << M)
for k in (5, 6, 7, 8):
    t = time.time()
    print("scan", A.width_scan(b, [k]), round(time.time() - t, 1), "s", flush=True)
t = time.time()
r = A.analyse_binade(E, M, y, y ^ S.SIGN, ks=range(4, 10))
q = r.pop("tables", None)
print(r["verdict"], r.get("format"), round(time.time() - t, 1), "s", flush=True)
if q is not None:
    w = unit.binades[E]
    same = q.fmt == w.fmt and (q.c0 == w.c0).all() and (q.c1 == w.c1).all() and (q.c2 == w.c2).all()
    print("format and every coefficient equal to the generator's:", bool(same))
