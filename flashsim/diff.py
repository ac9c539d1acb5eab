"""Element-wise comparison reports: bit equality, ulp distance, and where a mismatch was produced.

A mismatch in O or LSE is named twice: by tensor index (batch, head, row, column) and by the kernel's
coordinates that produced it (block (x, y, z), warp, lane, register), through the shared KernelConfig
and flashsim.layout's accumulator maps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import KernelConfig
from .layout import fragments
from .numerics.formats import NAN_DISTANCE, ulp_distance

_UINT = {2: np.uint16, 4: np.uint32}


def kernel_coordinates(config: KernelConfig, b, h, row, col, register_kind="o"):
    """(block (x, y, z), warp, lane, register) of the kernel that produced O[b, h, row, col] (or LSE row).

    O: the accumulator register of the C fragment, named as in kernel/flash_fwd.cu (o_acc32[ntile][i] or
    o_acc16[ntile][reg].lo/hi); LSE: the lane with t4 = 0 of the row's quad, which writes it, "lse_row[0|1]".
    """

    warp = (row % config.block_m) // config.warp_m
    mt = (row % config.warp_m) // 16  # m16 tile of the warp
    r16 = row % 16
    block = (row // config.block_m, h, b)
    if register_kind == "lse":
        lane = (r16 % 8) * 4
        return block, warp, lane, f"lse_row[{r16 // 8}] (m tile {mt})"
    loc = fragments.locate_c(
        r16, col, "f16" if config.o_f16 else "f32"
    )  # reg = ntile*4 + i (f32), ntile*2 + (i>>1) (f16x2 regs)
    lane, reg, half = int(loc.lane), int(loc.reg), int(loc.half)
    if config.o_f16:
        return block, warp, lane, f"o_acc16[{mt}][{reg // 2}][{reg % 2}].{'hi' if half else 'lo'}"
    return block, warp, lane, f"o_acc32[{mt}][{reg // 4}][{reg % 4}]"


@dataclass
class TensorDiff:
    name: str
    total: int
    equal: int
    max_ulp: int
    first_index: tuple | None = None
    first_values: tuple | None = None  # (got, expected) as hex bit patterns
    nan_mismatch: int = 0
    ulp_hist: dict = field(default_factory=dict)

    @property
    def bit_equal_fraction(self) -> float:
        return self.equal / self.total if self.total else 1.0

    @property
    def ok(self) -> bool:
        return self.equal == self.total


def compare(name: str, got: np.ndarray, expected: np.ndarray) -> TensorDiff:
    """Bit-level comparison of two arrays of one float dtype."""
    if got.shape != expected.shape or got.dtype != expected.dtype:
        raise ValueError(f"{name}: shapes/dtypes differ: {got.shape} {got.dtype} vs {expected.shape} {expected.dtype}")
    ut = _UINT[got.dtype.itemsize]
    gb, eb = np.ascontiguousarray(got).view(ut), np.ascontiguousarray(expected).view(ut)
    same = gb == eb
    u = ulp_distance(got, expected)  # +-0 equal; NaN vs a number: NAN_DISTANCE
    nan_vs_number = u == NAN_DISTANCE
    hist = {}
    for label, sel in (
        ("0", u == 0),
        ("1", u == 1),
        ("2", u == 2),
        ("3-15", (u >= 3) & (u < 16)),
        (">=16", (u >= 16) & ~nan_vs_number),
        ("nan-vs-number", nan_vs_number),
    ):
        hist[label] = int(sel.sum())
    diff = TensorDiff(
        name,
        int(same.size),
        int(same.sum()),
        int(np.where(nan_vs_number, 0, u).max(initial=0)),
        ulp_hist=hist,
        nan_mismatch=int(nan_vs_number.sum()),
    )
    if not same.all():
        idx = tuple(int(i) for i in np.argwhere(~same)[0])
        diff.first_index = idx
        diff.first_values = (hex(int(gb[idx])), hex(int(eb[idx])))
    return diff
