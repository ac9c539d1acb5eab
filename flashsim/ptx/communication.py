"""Whether a kernel's blocks communicate through global memory, read from its PTX, and how atomics merge.

A launch splits over workers by block (flashsim.ptx.distributed): each worker holds its own copy of global memory,
so blocks may share nothing but what they read before the launch and what they write apart. Blocks communicate,
and must run on one worker, where the PTX has

- an ``atom`` on global (or generic) memory whose returned old value some other instruction reads: a ticket, a
  lock, a semaphore, a "last block done" counter; the old value steers the kernel, so no split is the launch;
- a global (or generic) load that reads what other blocks write while it runs: ``ld.volatile``, or a load with
  ``.acquire`` / ``.relaxed`` semantics (the loads of flags, locks and grid-wide barriers: a spin loop);
- an ``atom`` / ``red`` / bulk reduction whose result depends on the order of the updates (a float add rounds at
  every step, ``.inc`` / ``.dec`` wrap at a bound, ``.exch`` / ``.cas`` keep the last): merged from several
  workers they could not give the bits one process gives.

A ``red`` (or an ``atom`` whose old value nothing reads) with an integer ``.add``, ``.and``, ``.or``, ``.xor``,
``.min`` or ``.max`` does not steer the kernel and merges exactly: each worker's final value is the initial one
updated by its own blocks, and ``merge`` folds the workers' values into the one final value every order gives
(sums of differences modulo 2^n, ands, ors, xors of differences, minima, maxima).
"""

from __future__ import annotations

import numpy as np

from .ir import Reg, Vec

__all__ = ["communicates", "reduction_of", "mergeable", "merge", "element_width"]

REDUCTION_OPS = (".add", ".and", ".or", ".xor", ".min", ".max", ".inc", ".dec", ".exch", ".cas")
_INTEGER = (".u32", ".s32", ".u64", ".s64", ".b32", ".b64")
_TYPES = _INTEGER + (".b16", ".f16", ".f16x2", ".bf16", ".bf16x2", ".f32", ".f64")
_MERGEABLE = (".add", ".and", ".or", ".xor", ".min", ".max")
_OTHER_SPACES = (".shared", ".local", ".param", ".const")


def reduction_of(name: str) -> tuple[str, str]:
    """(operation, element type) of an atomic instruction's full name ("red.global.add.u32" -> (".add", ".u32"))."""
    mods = ["." + m for m in name.split(".")[1:]]
    op = next((m for m in mods if m in REDUCTION_OPS), "")
    kind = next((m for m in reversed(mods) if m in _TYPES), "")
    return op, kind


def mergeable(op: str, kind: str) -> bool:
    """Whether updates of this kind, made apart on several workers, merge into the bits of any order of them."""
    if op in (".and", ".or", ".xor"):
        return kind in _INTEGER
    return op in _MERGEABLE and kind in _INTEGER


def _global(name: str) -> bool:
    """Whether an instruction's state space may be global memory (named, or generic)."""
    return not any(space in name for space in _OTHER_SPACES) or ".global" in name


def communicates(prog) -> str | None:
    """Why the blocks of ``prog`` (flashsim.ptx.program.Program) communicate through global memory (a sentence naming
    the instruction and its PTX line: the module docstring), or None where they can run apart."""
    readers: dict[int, int] = {}
    for op in prog.ops:
        for slot in op.regs:
            readers[slot] = readers.get(slot, 0) + 1
    for pc, op in enumerate(prog.ops):
        name = op.name
        head = name.split(".", 1)[0]
        where = f"{name} at PTX line {op.line}"
        if head == "atom" and _global(name) and any(readers.get(s, 0) > 1 for s in _destinations(prog, pc)):
            return f"{where} returns an old value the kernel reads (an atomic whose result steers it)"
        if head in ("atom", "red") or name.startswith("cp.reduce.async.bulk"):
            if name.startswith("cp.reduce") and ".global" not in name and ".tensor" not in name:
                continue
            if head != "cp" and not _global(name):
                continue
            op_kind = reduction_of(name)
            if not mergeable(*op_kind):
                return f"{where} updates global memory in an order-dependent way ({''.join(op_kind)})"
        if head == "ld" and _global(name) and any(m in name for m in (".volatile", ".acquire", ".relaxed")):
            return f"{where} reads global memory other blocks may write while it runs (a flag, a lock: a spin)"
    return None


def _destinations(prog, pc: int) -> list[int]:
    """The register slots an atom at ``pc`` returns its old value(s) into (none for the sink ``_``)."""
    op = prog.ops[pc]
    info = prog.functions[op.function]
    ins = info.fn.body[pc - info.start]
    dest = ins.operands[0]
    regs = dest.items if isinstance(dest, Vec) else (dest,)
    fi = list(prog.functions).index(op.function)
    slots = (prog.regs.get(f"{fi}:{r.name}") for r in regs if isinstance(r, Reg))
    return [s for s in slots if s is not None]


def merge(op: str, kind: str, current: np.ndarray, value: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """One worker's final ``value`` of elements updated by a mergeable reduction folded into ``current`` (what the
    workers merged so far gave, ``initial`` before any: unsigned ints of the element's width)."""
    if op == ".add":
        return current + (value - initial)  # modulo 2^n: unsigned wrap-around, the same bits for signed types
    if op == ".and":
        return current & value
    if op == ".or":
        return current | value
    if op == ".xor":
        return current ^ (value ^ initial)
    signed = kind.startswith(".s")
    view = (lambda a: a.view(a.dtype.str.replace("u", "i"))) if signed else (lambda a: a)
    pick = np.minimum if op == ".min" else np.maximum
    return pick(view(current), view(value)).view(current.dtype)


def element_width(kind: str) -> int:
    """Bytes of one element of an atomic's type."""
    return {".b16": 2, ".f16": 2, ".bf16": 2, ".f16x2": 4, ".bf16x2": 4, ".f64": 8}.get(kind) or int(kind[2:]) // 8
