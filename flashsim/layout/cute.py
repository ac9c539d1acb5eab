"""A small CuTe-style layout algebra, used as an independent oracle for the fragment maps.

A layout is a pair of congruent nested integer tuples, shape and stride. It is an integer function on
``range(size)``: the index is split into a coordinate colexicographically (first mode fastest), and the
value is the dot product of coordinate and stride. ``(4,8):(32,1)`` maps 0,1,2,3,4,... to 0,32,64,96,1,...

This module implements evaluation (scalar, nested coordinates, or the whole function as one numpy
table), flatten, coalesce, composition, complement and the right / left inverse: enough to state the
fragment maps of mma.m16n8k16 as CuTe writes them and to check identities between them. Written for
this project from the published definitions (CuTe documentation, "CuTe Layout Algebra"); no code taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

IntTuple = int | tuple


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def flatten(t: IntTuple) -> tuple:
    """The leaves of a nested tuple, left to right."""
    if _is_int(t):
        return (int(t),)
    return tuple(leaf for sub in t for leaf in flatten(sub))


def _congruent(a: IntTuple, b: IntTuple) -> bool:
    if _is_int(a) or _is_int(b):
        return _is_int(a) and _is_int(b)
    return len(a) == len(b) and all(_congruent(x, y) for x, y in zip(a, b))


def _size(shape: IntTuple) -> int:
    return prod(flatten(shape))


@dataclass(frozen=True)
class Layout:
    """shape:stride, an integer function on range(size). Immutable; use ``Layout(shape, stride)``."""

    shape: IntTuple
    stride: IntTuple

    def __post_init__(self):
        shape, stride = _normalise(self.shape), _normalise(self.stride)
        if not _congruent(shape, stride):
            raise ValueError(f"shape {shape} and stride {stride} must be congruent nested tuples of ints")
        if any(s < 1 for s in flatten(shape)):
            raise ValueError(f"shape must hold positive ints, got {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "stride", stride)

    # ---- basic properties ------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of points of the domain."""
        return _size(self.shape)

    @property
    def rank(self) -> int:
        """Number of top-level modes (1 for an integer shape)."""
        return 1 if _is_int(self.shape) else len(self.shape)

    @property
    def cosize(self) -> int:
        """One past the largest value: the extent of the codomain actually touched."""
        return int(self.table().max()) + 1 if self.size else 0

    def modes(self) -> list[Layout]:
        """The top-level modes as layouts."""
        if _is_int(self.shape):
            return [self]
        return [Layout(s, d) for s, d in zip(self.shape, self.stride)]

    def __getitem__(self, i: int) -> Layout:
        return self.modes()[i]

    def flat(self) -> list[tuple[int, int]]:
        """The (shape, stride) leaves, first mode first."""
        return list(zip(flatten(self.shape), flatten(self.stride)))

    def __repr__(self) -> str:
        return f"{_fmt(self.shape)}:{_fmt(self.stride)}"

    # ---- evaluation ------------------------------------------------------------------------
    def __call__(self, *coord):
        """Evaluate at a 1-D index (int or integer numpy array) or at a coordinate.

        A coordinate has one entry per top-level mode; each entry is an index into that mode (split
        colexicographically) or a nested coordinate congruent with it. Arrays broadcast.
        """
        if len(coord) == 1:
            coord = coord[0]
        return _crd2val(coord, self.shape, self.stride)

    def table(self) -> np.ndarray:
        """The whole function, ``[L(0), L(1), ..., L(size-1)]``, as one int64 array."""
        idx = np.arange(self.size, dtype=np.int64)
        return self(idx)

    def coords(self) -> np.ndarray:
        """The flat coordinate of every index: an int64 array (size, number of leaves)."""
        idx = np.arange(self.size, dtype=np.int64)
        out, step = [], 1
        for s, _ in self.flat():
            out.append((idx // step) % s)
            step *= s
        return np.stack(out, axis=1) if out else np.zeros((self.size, 0), np.int64)

    # ---- algebra ---------------------------------------------------------------------------
    def flatten(self) -> Layout:
        leaves = self.flat()
        if len(leaves) == 1:
            return Layout(*leaves[0])
        return Layout(tuple(s for s, _ in leaves), tuple(d for _, d in leaves))

    def coalesce(self) -> Layout:
        """Fewest modes with the same function on range(size): drops size-1 modes, merges contiguous ones."""
        merged: list[list[int]] = []
        for s, d in self.flat():
            if s == 1:
                continue
            if merged and merged[-1][0] * merged[-1][1] == d:
                merged[-1][0] *= s
            else:
                merged.append([s, d])
        if not merged:
            return Layout(1, 0)
        if len(merged) == 1:
            return Layout(merged[0][0], merged[0][1])
        return Layout(tuple(s for s, _ in merged), tuple(d for _, d in merged))

    def compose(self, other: Layout) -> Layout:
        """``self o other``: the layout R with R(i) = self(other(i)) for every i < other.size.

        R keeps other's shape hierarchy. Each leaf (s:d) of other is resolved against self's modes by
        first skipping d points (a division of self's shape) and then keeping s points, as CuTe does.
        Leaf by leaf is function composition only when other's modes land on whole modes of self (for
        example (6,2):(0,1) o (3,2):(2,3) is not: 2*2 + 3 crosses a mode boundary), so the result is
        checked against self(other(i)) on other's domain; ValueError where the shapes do not divide
        or the composition is not a layout.
        """
        if not isinstance(other, Layout):
            raise ValueError(f"other must be a Layout, got {type(other).__name__}")
        result = _map_leaves(other, lambda s, d: _compose_leaf(self, s, d))
        if not np.array_equal(result.table(), self(other.table())):
            raise ValueError(f"{self} o {other} is not a layout: other's modes cross the modes of self")
        return result

    def complement(self, cotarget: int) -> Layout:
        """The layout of the points of range(cotarget) that self does not reach, in order.

        ``Layout((self, complement))`` is then a bijection onto range(cotarget rounded up to a
        multiple of the complement's period). Requires self injective with divisible sorted strides.
        """
        if not (_is_int(cotarget) and cotarget >= 1):
            raise ValueError(f"cotarget must be a positive int, got {cotarget!r}")
        leaves = sorted((d, s) for s, d in self.coalesce().flat() if s > 1 and d != 0)
        modes, current = [], 1
        for d, s in leaves:
            if d % current:
                raise ValueError(f"complement of {self}: stride {d} is not a multiple of {current}")
            modes.append((d // current, current))
            current = s * d
        modes.append((-(-cotarget // current), current))
        return _from_modes(modes).coalesce()

    def right_inverse(self) -> Layout:
        """R with self(R(i)) = i for every i < R.size, R.size as large as the contiguous image allows."""
        leaves = [(s, d) for s, d in self.coalesce().flat() if s > 1]
        domain_strides, step = [], 1
        for s, _ in leaves:
            domain_strides.append(step)
            step *= s
        modes, current = [], 1
        while True:
            match = [k for k, (s, d) in enumerate(leaves) if d == current]
            if not match:
                break
            k = match[0]
            modes.append((leaves[k][0], domain_strides[k]))
            current *= leaves[k][0]
        if not modes:
            return Layout(1, 0)
        return _from_modes(modes).coalesce()

    def left_inverse(self) -> Layout:
        """L with L(self(i)) = i for every i < self.size (self injective)."""
        rest = self.complement(self.cosize)
        return Layout((self.shape, rest.shape), (self.stride, rest.stride)).right_inverse()

    def is_injective(self) -> bool:
        t = self.table()
        return len(np.unique(t)) == len(t)

    def is_bijective(self) -> bool:
        """True when self is a bijection range(size) -> range(size)."""
        t = np.sort(self.table())
        return bool(np.array_equal(t, np.arange(self.size)))


# ---- helpers ---------------------------------------------------------------------------------


def _normalise(t):
    if _is_int(t):
        return int(t)
    if isinstance(t, (tuple, list)):
        return tuple(_normalise(x) for x in t)
    raise ValueError(f"expected an int or a nested tuple of ints, got {t!r}")


def _fmt(t) -> str:
    if _is_int(t):
        return str(t)
    return "(" + ",".join(_fmt(x) for x in t) + ")"


def _crd2val(coord, shape, stride):
    """Value of a coordinate: an index is split colexicographically within its (sub)shape."""
    if _is_int(shape):
        return coord * stride
    if isinstance(coord, tuple):
        if len(coord) != len(shape):
            raise ValueError(f"coordinate {coord} does not match shape {_fmt(shape)}")
        return sum(_crd2val(c, s, d) for c, s, d in zip(coord, shape, stride))
    # a 1-D index into a tuple shape: split it over the modes, last mode takes the remainder
    total, step = 0, 1
    for k, (s, d) in enumerate(zip(shape, stride)):
        sub = coord // step if k == len(shape) - 1 else (coord // step) % _size(s)
        total = total + _crd2val(sub, s, d)
        step *= _size(s)
    return total


def _from_modes(modes):
    if len(modes) == 1:
        return Layout(*modes[0])
    return Layout(tuple(s for s, _ in modes), tuple(d for _, d in modes))


def _map_leaves(layout: Layout, fn) -> Layout:
    """Rebuild ``layout`` with each (s, d) leaf replaced by the layout fn(s, d), keeping the hierarchy."""

    def rec(shape, stride):
        if _is_int(shape):
            return fn(shape, stride)
        subs = [rec(s, d) for s, d in zip(shape, stride)]
        return Layout(tuple(x.shape for x in subs), tuple(x.stride for x in subs))

    return rec(layout.shape, layout.stride)


def _compose_leaf(a: Layout, s: int, d: int) -> Layout:
    """a o (s:d) for one leaf: skip d points of a's domain, then keep s points."""
    if s == 1:
        return Layout(1, 0)
    if d == 0:
        return Layout(s, 0)
    modes = [list(m) for m in a.coalesce().flat()]
    # divide out d: modes before the one where the stride lands are consumed entirely
    rest = d
    while rest > 1 and len(modes) > 1:
        shp, std = modes[0]
        if rest % shp == 0:
            rest //= shp
            modes.pop(0)
        elif shp % rest == 0:
            modes[0] = [shp // rest, std * rest]
            rest = 1
        else:
            raise ValueError(f"cannot compose {a} with {s}:{d}: stride {d} does not divide shape {shp}")
    if rest > 1:  # last mode: extend it past its shape, as a layout's last mode may be
        modes[0] = [max(modes[0][0] // rest, 1), modes[0][1] * rest]
    # keep s points
    out, want = [], s
    for k, (shp, std) in enumerate(modes):
        last = k == len(modes) - 1
        if want <= shp or last:
            if not last and shp % want:
                raise ValueError(f"cannot compose {a} with {s}:{d}: {want} points do not divide shape {shp}")
            out.append((want, std))
            want = 1
            break
        if want % shp:
            raise ValueError(f"cannot compose {a} with {s}:{d}: shape {shp} does not divide {want}")
        out.append((shp, std))
        want //= shp
    return _from_modes(out).coalesce() if len(out) > 1 else Layout(*out[0])
