"""The values ptxas knows at compile time: ``known_bits(definitions(fn), operand)`` for an operand of an instruction
of ``fn``.

ptxas propagates constants before it schedules: an instruction whose operand it knows can be evaluated at compile time,
and where its arithmetic is not the GPU's (flashsim.numerics.sfu_folding: the SFU's approximations) the bits differ
from what the unit would return. The simulator follows ptxas where it can prove the operand is known: a literal, or a
register whose only definition in its function is a ``mov`` of a literal or of another such register (nvcc's
spelling of a constant argument: ``mov.f32 %f215, 0f43000000; rsqrt.approx.f32 %f1, %f215;``). One definition in
the whole function means every read that is defined reads that value, whatever the control flow. Constants that
ptxas derives through arithmetic (``ex2(2.0 * 3.0)``) are not followed: such an instruction runs the SFU's model.
"""

from __future__ import annotations

import numpy as np

from .ir import Function, Imm, Pair, Reg, Vec

__all__ = ["definitions", "known_bits"]

_MOVES = ("mov",)
_MOVE_TYPES = (".f32", ".b32", ".u32", ".s32")


def _destinations(ins) -> list[str]:
    """Names of the registers ``ins`` writes: its first operand (a register, a vector's registers, a pair's)."""
    if not ins.operands:
        return []
    op = ins.operands[0]
    if isinstance(op, Reg):
        return [op.name]
    if isinstance(op, Vec):
        return [x.name for x in op.items if isinstance(x, Reg)]
    if isinstance(op, Pair):
        return [x.name for x in (op.first, op.second) if isinstance(x, Reg)]
    return []


_NO_DESTINATION = {"st", "red", "bar", "barrier", "bra", "ret", "exit", "call", "cp", "mbarrier", "fence", "membar"}


def definitions(fn: Function) -> dict[str, list]:
    """Register name -> the instructions of ``fn`` that write it (computed once per decoded function: pass the result
    to ``known_bits``)."""
    defs: dict[str, list] = {}
    for ins in fn.body:
        if ins.opcode in _NO_DESTINATION:
            continue
        for name in _destinations(ins):
            defs.setdefault(name, []).append(ins)
    return defs


def known_bits(defs: dict, operand, depth: int = 8) -> int | None:
    """The 32-bit pattern of ``operand`` (an operand of an instruction of a function whose ``definitions`` are
    ``defs``) if ptxas knows it at compile time (the module docstring), else None."""
    if isinstance(operand, Imm):
        if operand.kind == "f64":  # a double literal given to an f32 operand: rounded as ptxas rounds it
            return int(np.float32(operand.as_float()).view(np.uint32))
        return operand.value & 0xFFFFFFFF
    if not isinstance(operand, Reg) or depth == 0:
        return None
    found = defs.get(operand.name, [])
    if len(found) != 1:
        return None
    ins = found[0]
    if ins.pred is not None or ins.opcode not in _MOVES or len(ins.mods) != 1 or ins.mods[0] not in _MOVE_TYPES:
        return None
    return known_bits(defs, ins.operands[1], depth - 1)
