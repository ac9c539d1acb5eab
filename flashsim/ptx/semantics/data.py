"""Data movement: mov (with vector packing), ld, st, cvta, isspacep, prefetch.

Loads and stores go through flashsim.ptx.memory (every byte inside a buffer the launch holds, or MemoryFault). A load
into a wider register zero- or sign-extends as its type says (ld.s8 into a .b32 register sign-extends); a store of a
narrower type stores the register's low bits. Cache operators, eviction priorities and prefetch sizes change where
data is cached on a GPU, never what a load returns: they are accepted (each one by name) and have no effect here; the
memory is sequentially consistent, so .weak / .relaxed / .acquire / .release / .volatile and their scopes read and
write the same bytes.
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Reg, Sink, Vec
from ..program import CLUSTER_RANK_SHIFT, SPACE_BASE, Decoded
from ..vectorize import ELEMENTWISE
from .common import bits_of, kind_of, udtype, widen

SPACES = {
    ".global": ".global",
    ".shared": ".shared",
    ".shared::cta": ".shared",
    ".shared::cluster": ".shared::cluster",  # the CTA's own shared memory or another CTA's of its cluster
    ".local": ".local",
    ".param": ".param",
    ".param::entry": ".param",
    ".param::func": ".frame",
    ".const": ".const",
}
CACHE = (".ca", ".cg", ".cs", ".lu", ".cv", ".wb", ".wt", ".nc")
ORDER = (".weak", ".volatile", ".relaxed", ".acquire", ".release", ".mmio")
SCOPES = (".cta", ".cluster", ".gpu", ".sys")
VECTORS = {".v2": 2, ".v4": 4, ".v8": 8}


def _consume_cache_hints(mods: isa.Mods) -> bool:
    """Take the cache / eviction / prefetch / ordering modifiers (no effect on the bits); True with .L2::cache_hint
    (one more operand: the cache policy)."""
    mods.take(*CACHE)
    mods.take(*ORDER)
    mods.take(*SCOPES)
    mods.take(".unified")
    hints = [m for m in mods.left if m.startswith((".L1::", ".L2::"))]
    for m in hints:
        mods.left.remove(m)
    return ".L2::cache_hint" in hints


def space_of(mods: isa.Mods) -> str | None:
    """The state space of a memory instruction (None: generic addressing)."""
    found = mods.take(*SPACES)
    return None if found is None else SPACES[found]


def address_fn(d: Decoded, i: int, space: str | None):
    """(space, function of a group giving each running lane's address as uint64) of memory operand ``i``."""
    sym_space, base, offset = d.addr(i)
    if sym_space is not None:
        if sym_space in (".function",):
            raise isa.Unsupported("a memory access to a function")
        if space is None or space == sym_space or (space == ".param" and sym_space == ".frame"):
            space = sym_space
        elif space == ".shared::cluster" and sym_space == ".shared":
            pass  # a shared variable's offset is the shared::cluster address of the CTA's own copy
        elif sym_space == ".global" and space == ".global":
            pass
        else:
            raise isa.Unsupported(f"a {sym_space} symbol accessed as {space}")
    if base is None:
        const = np.uint64(offset & (2**64 - 1))

        def addr(g):
            return np.full(g.lanes().size, const, np.uint64)

        return space, addr
    off = np.uint64(offset & (2**64 - 1))

    def addr(g):
        return g.lane_values(base).astype(np.uint64) + off

    return space, addr


B128 = np.dtype("V16")  # the register dtype of .b128 (flashsim.ptx.program.DTYPE_OF_BITS)


def _items(operand) -> tuple:
    return operand.items if isinstance(operand, Vec) else (operand,)


def _dst_list(d: Decoded, i: int) -> list:
    operand = d.operands[i]
    if isinstance(operand, Vec):
        return [None if isinstance(x, Sink) else d.reg(x) for x in operand.items]
    return [d.dst(i)]


def _src_list(d: Decoded, i: int, dtype) -> list:
    operand = d.operands[i]
    if isinstance(operand, Vec):
        return [d.value(x, dtype) for x in operand.items]
    return [d.src(i, dtype)]


@isa.implements("ld", "ldu")
def ld(d: Decoded):
    mods = d.mods
    space = space_of(mods)
    hint = _consume_cache_hints(mods)
    n = VECTORS.get(mods.take(*VECTORS), 1)
    t = mods.type()
    mods.done()
    bits = bits_of(t)
    width = bits // 8
    dsts = _dst_list(d, 0)
    if len(dsts) != n:
        raise isa.Unsupported(f"{n} destinations expected, got {len(dsts)}")
    space, addr = address_fn(d, 1, space)
    if hint and len(d.operands) != 3:
        raise isa.Unsupported(".L2::cache_hint without its cache-policy operand")
    signed = kind_of(t) == "s"
    reg_bits = [None if s is None else d.prog.dtypes[s].itemsize * 8 for s in dsts]
    for rb in reg_bits:
        if rb is not None and rb < bits:
            raise isa.Unsupported(f"a {bits}-bit load into a {rb}-bit register")
        if t == ".b128" and rb not in (None, 128):
            raise isa.Unsupported("ld .b128 loads into .b128 registers")
    unit = B128 if bits == 128 else udtype(bits)

    def run(g):
        raw = g.m.mem.load(space, addr(g), width * n, g.lanes())
        values = raw.view(unit).reshape(-1, n)
        for k, (s, rb) in enumerate(zip(dsts, reg_bits)):
            if s is not None:
                v = values[:, k]
                g.write_lanes(s, v if rb == bits else widen(v, bits, rb, signed))

    return d.op(run)


@isa.implements("st")
def st(d: Decoded):
    mods = d.mods
    space = space_of(mods)
    hint = _consume_cache_hints(mods)
    n = VECTORS.get(mods.take(*VECTORS), 1)
    t = mods.type()
    mods.done()
    bits = bits_of(t)
    width = bits // 8
    space, addr = address_fn(d, 0, space)
    if t == ".b128" and not all(isinstance(x, Reg) for x in _items(d.operands[1])):
        raise isa.Unsupported("st .b128 stores .b128 registers")
    srcs = _src_list(d, 1, B128 if bits == 128 else udtype(bits))
    if len(srcs) != n:
        raise isa.Unsupported(f"{n} sources expected, got {len(srcs)}")
    if hint and len(d.operands) != 3:
        raise isa.Unsupported(".L2::cache_hint without its cache-policy operand")
    ud = B128 if bits == 128 else udtype(bits)
    if bits == 128 and any(d.prog.dtypes[s] != B128 for s in srcs):
        raise isa.Unsupported("st .b128 stores .b128 registers")

    def run(g):
        cols = [g.lane_values(s).astype(ud) for s in srcs]  # a wider register stores its low bits
        data = np.stack(cols, axis=1).view(np.uint8).reshape(-1, width * n)
        g.m.mem.store(space, addr(g), data, g.lanes())
        g.m.progress += 1

    return d.op(run)


@isa.implements("mov")
def mov(d: Decoded):
    t = d.mods.type()
    d.mods.done()
    bits = bits_of(t)
    dst, src = d.operands
    if bits == 128:
        return _mov_b128(d, dst, src)
    if isinstance(dst, Vec) or isinstance(src, Vec):  # pack / unpack: mov.b64 %rd, {%r1, %r2} and back
        if t not in (".b16", ".b32", ".b64"):
            raise isa.Unsupported("vector mov of a non-.b type")
        if isinstance(src, Vec):
            parts = [d.value(x, udtype(bits // len(src.items))) for x in src.items]
            pbits = bits // len(parts)
            target = d.dst(0)

            def run(g):
                acc = np.zeros(g.m.T, udtype(bits))
                for k, p in enumerate(parts):
                    acc = acc | (np.asarray(g.R[p]).astype(udtype(bits)) << np.asarray(k * pbits, udtype(bits)))
                g.write(target, acc)

            return d.op(run)
        items = [None if isinstance(x, Sink) else d.reg(x) for x in dst.items]
        pbits = bits // len(items)
        source = d.src(1, udtype(bits))
        mask = (1 << pbits) - 1

        def run(g):
            v = np.asarray(g.R[source]).astype(udtype(bits))
            for k, s in enumerate(items):
                if s is not None:
                    g.write(s, ((v >> np.asarray(k * pbits, udtype(bits))) & np.asarray(mask, udtype(bits))))

        return d.op(run)
    target = d.dst(0)
    if isinstance(src, Reg):
        source = d.reg(src)
    else:
        d.float_kind = {16: "f16", 32: "f32", 64: "f64"}.get(bits) if kind_of(t) == "f" else None
        source = d.src(1, udtype(bits) if bits > 1 else np.dtype(bool))

    def run(g):
        g.write(target, g.R[source])

    return d.op(run, info=ELEMENTWISE if target is not None else None)


def _mov_b128(d: Decoded, dst, src):
    """mov.b128 between .b128 registers, d, {a, b} (two .b64 or four .b32, the first in the lowest bytes) and back."""
    if not isinstance(src, Vec) and not isinstance(dst, Vec):
        if not isinstance(src, Reg) or d.prog.dtypes[d.reg(src)] != B128:
            raise isa.Unsupported("mov.b128 d, a: a .b128 register")
        source, target = d.reg(src), d.dst(0)

        def run(g):
            g.write(target, g.R[source])

        return d.op(run)
    if isinstance(src, Vec):
        unit = udtype(128 // len(src.items))
        parts = [d.value(x, unit) for x in src.items]
        target = d.dst(0)

        def run(g):
            cols = [np.broadcast_to(np.asarray(g.R[p]).astype(unit), (g.m.T,)) for p in parts]
            g.write(target, np.ascontiguousarray(np.stack(cols, axis=1)).view(B128)[:, 0])

        return d.op(run)
    items = [None if isinstance(x, Sink) else d.reg(x) for x in dst.items]
    unit = udtype(128 // len(items))
    source = d.reg(src)

    def run(g):
        words = np.ascontiguousarray(np.broadcast_to(g.R[source], (g.m.T,))).view(unit).reshape(g.m.T, -1)
        for k, s in enumerate(items):
            if s is not None:
                g.write(s, words[:, k].copy())

    return d.op(run)


@isa.implements("cvta")
def cvta(d: Decoded):
    mods = d.mods
    to = mods.flag(".to")
    space = space_of(mods)
    t = mods.type()
    mods.done()
    if space is None or t not in (".u32", ".u64"):
        raise isa.Unsupported("cvta needs a state space and .u32 / .u64")
    target, source = d.dst(0), d.src(1, udtype(t))
    if space == ".global":

        def run(g):
            g.write(target, g.R[source])

        return d.op(run)
    if space == ".frame":
        raise isa.Unsupported("cvta of a function's parameters")
    # shared::cluster addresses live in the shared window too (flashsim.ptx.program.CLUSTER_RANK_SHIFT)
    base = np.uint64(SPACE_BASE[".shared" if space == ".shared::cluster" else space])

    def run(g):
        v = np.asarray(g.R[source]).astype(np.uint64)
        g.write(target, (v - base) if to else (v + base))

    return d.op(run)


@isa.implements("isspacep")
def isspacep(d: Decoded):
    space = space_of(d.mods)
    d.mods.done()
    target, source = d.dst(0), d.src(1, np.uint64)
    if space == ".global":

        def run(g):
            v = np.asarray(g.R[source]).astype(np.uint64)
            g.write(target, v < np.uint64(min(SPACE_BASE.values())))

        return d.op(run)
    if space == ".shared::cluster":
        space = ".shared"  # the whole shared window holds shared::cluster addresses
    elif space == ".shared" and ".shared::cta" in d.ins.mods:
        lo = np.uint64(SPACE_BASE[".shared"])

        def run(g):  # the executing CTA's own window: an offset, or an address of its own rank
            v = np.asarray(g.R[source]).astype(np.uint64)
            inside = (v >= lo) & (v < lo + np.uint64(1 << 32))
            hi = ((v - lo) >> np.uint64(CLUSTER_RANK_SHIFT)).astype(np.int64)
            rank = (g.m.block_of % g.m.cluster_size).astype(np.int64)
            g.write(target, inside & ((hi == 0) | (hi == rank + 1)))

        return d.op(run)
    if space not in SPACE_BASE:
        raise isa.Unsupported(f"isspacep{space}")
    lo = np.uint64(SPACE_BASE[space])
    hi = np.uint64(SPACE_BASE[space] + (1 << 32))

    def run(g):
        v = np.asarray(g.R[source]).astype(np.uint64)
        g.write(target, (v >= lo) & (v < hi))

    return d.op(run)


@isa.implements("prefetch", "prefetchu")
def prefetch(d: Decoded):
    """A cache hint: no effect on any value."""
    d.mods.left.clear()

    def run(g):
        return None

    return d.op(run)
