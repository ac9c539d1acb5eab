"""An f16 P@V accumulator that leaves the f16 range is never silently wrong: the rule and the error, written once
for the emulator and the GPU runner.

With pv_accum "f16" the unnormalised O (sum over keys of p * v, p <= 1) lives in f16 for the whole row; with
"f16x2" each KV tile's part of it does. Either can exceed 65504 (e.g. q = 0, Nk = 1024, v = 100: O reaches
102400 before the division by l = 1024, so the kernel returns inf where the answer is 100). The kernel flags a row
whose final unnormalised O holds an inf or NaN while its l is finite and non-zero (kernel/flash_fwd.cu, the
`overflow` argument); the emulator applies the same rule to the same values (kernel_program.epilogue), so both
flag the same rows. An inf or NaN in v is flagged too: O is then not finite in any mode, and the error says so.
``check_overflow=False`` skips the check (and, on the GPU, the host synchronisation it needs);
``check_overflow="deferred"`` returns a third value, a callable that checks when the caller calls it.
"""

from __future__ import annotations

import numpy as np

from .constants import F16_MAX

__all__ = ["F16_MAX", "overflow_error", "overflow_error_at", "first_flagged", "check_mode", "OverflowCheck"]


def check_mode(check_overflow):
    """``check_overflow`` validated: True (check now), False (no check) or "deferred" (return a check to call
    later); ValueError otherwise."""
    if check_overflow is True or check_overflow is False or check_overflow == "deferred":
        return check_overflow
    raise ValueError(f"check_overflow must be True, False or 'deferred', got {check_overflow!r}")


class OverflowCheck:
    """What ``check_overflow="deferred"`` returns beside (o, lse): calling it reads the overflow flag (on the GPU the
    host waits for the kernel then, not at the launch) and raises FloatingPointError if a row overflowed."""

    __slots__ = ("_check",)

    def __init__(self, check=None):
        self._check = check

    def __call__(self) -> None:
        if self._check is not None:
            self._check()


def first_flagged(flags) -> int | None:
    """The smallest flat index (b * H + h) * Nq + row of a (B, H, Nq) boolean array that is set, or None."""
    idx = np.flatnonzero(np.asarray(flags))
    return int(idx[0]) if idx.size else None


def v_head(prob, v, flat_row: int):
    """The K / V head whose values row ``flat_row`` ((b * Hq + h) * Nq + row) of ``prob`` summed: v[b, h // group] in
    the problem's layout (basic indexing, so numpy, torch and cupy arrays alike), for the bound in the message."""
    b, h = divmod(int(flat_row) // prob.nq, prob.heads)
    hk = h // prob.group
    return v[b, hk] if prob.layout == "bhnd" else v[b, :, hk]


def overflow_error(prob, flat_row: int, vmax: float, l: float | None = None) -> FloatingPointError:
    """The FloatingPointError for row ``flat_row`` ((b * H + h) * Nq + row) of ``prob``: where, and the bound that
    was exceeded (``vmax`` = max |v| of that head; ``l`` the row's softmax denominator when known)."""
    bh, row = divmod(int(flat_row), prob.nq)
    b, h = divmod(bh, prob.heads)
    return overflow_error_at(prob.config, f"(b={b}, h={h}, row={row})", vmax, l, prob.nk)


def overflow_error_at(cfg, where: str, vmax: float, l: float | None, nk: int) -> FloatingPointError:
    """The FloatingPointError of an overflowed row named ``where`` (any call: dense or serving) of a kernel built with
    ``cfg``: the bound that was exceeded, from ``vmax`` (max |v| the row summed), ``l`` (its softmax denominator,
    when known) or ``nk`` (its keys)."""
    if not np.isfinite(vmax):
        return FloatingPointError(
            f"pv_accum={cfg.pv_accum!r}: the unnormalised O of row {where} is not finite "
            "because v holds inf or NaN (pass check_overflow=False to get the IEEE result)"
        )
    if cfg.pv_accum == "f16x2":
        bound, what = (
            cfg.kv_tile * vmax,
            f"one KV tile's sum of p * v is at most kv_tile * max|v| = "
            f"{cfg.kv_tile} * {vmax:g} = {cfg.kv_tile * vmax:g}",
        )
    elif l is not None:
        bound, what = l * vmax, f"its sum of p * v is at most l * max|v| = {l:g} * {vmax:g} = {l * vmax:g}"
    else:
        bound, what = (
            nk * vmax,
            f"its sum of p * v is at most Nk * max|v| = {nk} * {vmax:g} = {nk * vmax:g}",
        )
    other = "'f32'" if cfg.pv_accum == "f16x2" else "'f32' or 'f16x2'"
    return FloatingPointError(
        f"pv_accum={cfg.pv_accum!r}: the f16 accumulator of P@V overflowed at row {where}: {what}, past f16's "
        f"largest value {F16_MAX:g} (bound {bound:g}). Use pv_accum={other}, scale v down, or pass "
        "check_overflow=False to get the inf the kernel computes"
    )
