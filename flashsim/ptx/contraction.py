"""Which unrounded multiply / add pairs ptxas fused into one fused multiply-add.

PTX leaves ``mul`` / ``add`` / ``sub`` without a rounding modifier to ptxas, which may contract a product and the
addition that uses it into an FMA (one rounding instead of two); an explicit ``.rn`` forbids it. A kernel's bits
depend on what ptxas did, so the simulator follows it. A candidate pair is a product, a
``mul.{f32,f64,f16,f16x2,bf16,bf16x2}`` without a rounding modifier or .sat whose destination no other instruction
of its function writes, and one reader of it, an ``add`` / ``sub`` of the same type without a rounding modifier and
with the same flush-to-zero mode (ptxas fuses neither a .ftz product into a plain add nor the reverse). A product
may pair with several adds (ptxas fuses each reader into its own FMA, repeating the product), and it may have other
readers too (then ptxas usually keeps the rounded product and fuses nothing: the SASS says). An add whose two
operands are both products pairs with one of them, the one ptxas fuses where it can: the product whose every
reader is an add it may fuse, else the first operand (an ``a*b + c*d`` gives ``FMUL`` of the second product and
``FFMA`` of the first). The guard does not matter: a product keeps its operands exactly when it writes its
destination, so a fused add under another guard still reads the operands of the product it would have read.
A quotient of ``div.approx.f32`` / ``div.full.f32`` is a product too: ptxas builds it as the reciprocal of the divisor
times the dividend, and fuses that multiply into an add like a mul's (a fused pair is then one fma of the dividend and
the reciprocal, both after the division's range scalings). ``contraction_table(module, mode)`` decides each
candidate:

    "sass"   as ptxas did for the module's arch: read from the SASS it makes of this PTX (flashsim.ptx.sass)
    "none"   none fused (what ``nvcc --fmad=false`` would give)
    "all"    every candidate fused

"sass" reads the SASS wherever the PTX has a candidate, or an unrounded mul and an unrounded add / sub of one type
in one function (ptxas fuses a product through a ``mov`` or ``neg`` too, which no candidate models: the reader then
raises rather than let the table be wrong); a module without either never runs ptxas.

The decision is a table {(function, index of the add in its body): index of its product}; the semantics of mul and
add read it (flashsim/ptx/semantics/floating.py): a fused product keeps its operands for the add, which runs as one
fma of them.
"""

from __future__ import annotations

from .ir import Addr, AddrTuple, Pair, Reg
from .quotients import approximate_division

__all__ = ["candidates", "contraction_table", "MODES"]

MODES = ("sass", "none", "all")
_TYPES = (".f32", ".f64", ".f16", ".f16x2", ".bf16", ".bf16x2")
_ROUNDINGS = (".rn", ".rz", ".rm", ".rp")


def _unrounded(ins, opcodes) -> bool:
    return ins.opcode in opcodes and not any(m in _ROUNDINGS for m in ins.mods) and any(m in _TYPES for m in ins.mods)


def candidates(module) -> dict:
    """{(function name, add index): mul index} of every mul / add pair ptxas may fuse (the module docstring)."""
    out = {}
    for fn in module.functions.values():
        writes, reads = _writes_and_reads(fn)
        products = {
            ins.operands[0].name: i
            for i, ins in enumerate(fn.body)
            if (_unrounded(ins, ("mul",)) or approximate_division(ins))
            and isinstance(ins.operands[0], Reg)
            and ".sat" not in ins.mods
            and writes[ins.operands[0].name] == 1
        }
        pairing = {}  # add index -> indices of the products it may fuse
        for reg, i in products.items():
            for j in sorted(set(reads.get(reg, ()))):
                if _fusable(fn.body[i], fn.body[j]):
                    pairing.setdefault(j, []).append(i)
        for j, muls in pairing.items():
            out[(fn.name, j)] = muls[0] if len(muls) == 1 else _preferred(fn, j, muls, reads)
    return out


def _fusable(mul, user) -> bool:
    return (
        _unrounded(user, ("add", "sub"))
        and _types(user) == _types(mul)
        and (".ftz" in user.mods) == (".ftz" in mul.mods)
    )


def _preferred(fn, add: int, muls: list, reads: dict) -> int:
    """The product of ``muls`` (the two operands of the add at ``add``) that ptxas fuses: the first operand's unless
    it has a reader that is not an add it may fuse and the second has none."""
    first = fn.body[add].operands[1]
    by_operand = sorted(muls, key=lambda i: fn.body[i].operands[0] != first)

    def only_adds(i):
        return all(_fusable(fn.body[i], fn.body[j]) for j in reads[fn.body[i].operands[0].name])

    return next((i for i in by_operand if only_adds(i)), by_operand[0])


def _writes_and_reads(fn) -> tuple[dict, dict]:
    """({register: number of instructions that write it}, {register: indices of the instructions that read it})."""
    writes: dict[str, int] = {}
    reads: dict[str, list[int]] = {}
    for i, ins in enumerate(fn.body):
        for k, op in enumerate(ins.operands):
            written = k == 0 and ins.opcode != "st" and not isinstance(op, (Addr, AddrTuple))
            for reg in _regs(op):
                if written:
                    writes[reg] = writes.get(reg, 0) + 1
                else:
                    reads.setdefault(reg, []).append(i)
    return writes, reads


def _types(ins) -> tuple:
    return tuple(m for m in ins.mods if m in _TYPES)


def _regs(op):
    if isinstance(op, Reg):
        yield op.name
    if isinstance(op, Pair):
        yield from _regs(op.first)
        yield from _regs(op.second)
    for field in ("items",):
        for x in getattr(op, field, ()):
            yield from _regs(x)
    base = getattr(op, "base", None)
    if isinstance(base, Reg):
        yield base.name
    reg = getattr(op, "reg", None)
    if isinstance(reg, Reg):
        yield reg.name


def contraction_table(module, mode: str = "sass") -> dict:
    """The fused pairs of ``module`` (a flashsim.ptx.module.Module) under ``mode`` (the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"contraction must be one of {MODES}, got {mode!r}")
    found = candidates(module.ir)
    if mode == "none":
        return {}
    if mode == "all":
        return found
    if not found and not _may_contract(module.ir):
        return {}
    from .sass import fused_pairs  # ptxas / nvdisasm: only where the PTX has something to contract

    return fused_pairs(module, found)


def _may_contract(ir) -> bool:
    """Whether some function has an unrounded mul and an unrounded add / sub of one type: ptxas may then fuse a
    product that reaches its add through a copy or a negation (``mov`` / ``neg`` between them), which no candidate
    pair models; the SASS reader (flashsim.ptx.sass) then checks that it did not."""
    for fn in ir.functions.values():
        muls = {_types(ins) for ins in fn.body if _unrounded(ins, ("mul",))}
        if muls and any(_types(ins) in muls for ins in fn.body if _unrounded(ins, ("add", "sub"))):
            return True
    return False
