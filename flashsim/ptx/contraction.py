"""Which unrounded multiply / add pairs ptxas fused into one fused multiply-add.

PTX leaves ``mul`` / ``add`` / ``sub`` without a rounding modifier to ptxas, which may contract a product and the
addition that uses it into an FMA (one rounding instead of two); an explicit ``.rn`` forbids it. A kernel's bits
depend on what ptxas did, so the simulator follows it. A candidate is a ``mul.{f32,f64,f16,f16x2,bf16,bf16x2}``
without a rounding modifier whose result is read by exactly one instruction, an ``add`` / ``sub`` of the same type
without one, in the same function, under the same guard and flush-to-zero mode (and no .sat on the product).
``contraction_table(module, mode)`` decides each candidate:

    "sass"   as ptxas did for the module's arch: read from the SASS it makes of this PTX (flashsim.ptx.sass)
    "none"   none fused (what ``nvcc --fmad=false`` would give)
    "all"    every candidate fused

The decision is a table {(function, index of the add in its body): index of its product}; the semantics of mul and
add read it (flashsim/ptx/semantics/floating.py): a fused product keeps its operands for the add, which runs as one
fma of them.
"""

from __future__ import annotations

from .ir import Reg

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
        uses: dict[str, list[int]] = {}
        for i, ins in enumerate(fn.body):
            for k, op in enumerate(ins.operands):
                if k == 0 and ins.opcode not in ("st",):
                    continue  # a destination
                for reg in _regs(op):
                    uses.setdefault(reg, []).append(i)
        for i, ins in enumerate(fn.body):
            if not _unrounded(ins, ("mul",)) or not isinstance(ins.operands[0], Reg):
                continue
            readers = uses.get(ins.operands[0].name, [])
            if len(readers) != 1:
                continue
            j = readers[0]
            user = fn.body[j]
            same_mode = (".ftz" in user.mods) == (".ftz" in ins.mods) and ".sat" not in ins.mods
            if (
                j > i
                and _unrounded(user, ("add", "sub"))
                and _types(user) == _types(ins)
                and user.pred == ins.pred
                and same_mode
            ):
                out[(fn.name, j)] = i
    return out


def _types(ins) -> tuple:
    return tuple(m for m in ins.mods if m in _TYPES)


def _regs(op):
    if isinstance(op, Reg):
        yield op.name
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
    if mode == "none" or not found:
        return {}
    if mode == "all":
        return found
    from .sass import fused_pairs  # ptxas / nvdisasm: only where the PTX has candidates

    return fused_pairs(module, found)
