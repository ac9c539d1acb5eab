"""A parsed module decoded into what the machine runs: one flat list of ops, their basic blocks, the register file's
layout and the memory layout of parameters, variables and frames.

Every function reachable from the kernel is decoded once into ``Op`` objects (a closure built by the instruction's
semantics module, flashsim/ptx/semantics/, through the table of flashsim.ptx.isa) and placed in one list: a PC is an
index into it. A basic block starts at the entry of a function, at a label (threads that branched there may meet
threads that fell through: the scheduler merges them) and after every op that transfers control or may stop
threads (branches, exits, calls, barriers); it ends before the next block. The machine runs a block for a group of
threads at a time.

The register file: every register of every function (prefixed by its function's index, so that a callee's %r1 is
not its caller's), every special register, and one slot per constant operand (an immediate or an address known at
decode time, as a numpy scalar), each with a numpy dtype: registers hold bit patterns, unsigned, of their declared
width (.pred: bool).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import batching, isa, vectorize
from .constants import definitions
from .errors import UnsupportedInstruction
from .ir import SPECIAL_REGISTERS, TYPE_SIZES, Addr, Function, Imm, Instruction, Module, Reg, Sink, Sym, Var

__all__ = [
    "Program",
    "Op",
    "Decoded",
    "DTYPE_OF_BITS",
    "reg_bits",
    "SPACE_BASE",
    "CLUSTER_RANK_SHIFT",
    "CLUSTER_OFFSET_MASK",
]

DTYPE_OF_BITS = {
    1: np.dtype(bool),
    8: np.dtype(np.uint8),
    16: np.dtype(np.uint16),
    32: np.dtype(np.uint32),
    64: np.dtype(np.uint64),
    128: np.dtype("V16"),  # a .b128 register: 16 opaque bytes (lane 0's byte 0 the lowest), moved, loaded, stored whole
}

# Generic address windows (the simulated GPU's address map, documented in docs/ptx.md): global buffers at their
# synthetic addresses below 2^47; a block's shared memory, a thread's local memory, the constant bank and the
# kernel's parameters each in a 2^32-byte window whose low 32 bits are the address in that space.
SPACE_BASE = {
    ".shared": 0x0000_F000_0000_0000,
    ".local": 0x0000_F100_0000_0000,
    ".const": 0x0000_F200_0000_0000,
    ".param": 0x0000_F300_0000_0000,
}
FUNCTION_BASE = 0x0000_F400_0000_0000  # function "addresses" (function pointers, call tables)
# The .shared::cluster window (docs/ptx.md, "The address map"): a 32-bit shared::cluster address below 2^24 is an
# offset in the executing CTA's own shared memory (so every shared::cta address is the shared::cluster address of
# the same byte of the CTA itself, as the PTX ISA guarantees); ``(rank + 1) << CLUSTER_RANK_SHIFT | offset`` is
# ``offset`` in CTA ``rank`` of the cluster (what mapa returns). A CTA has at most 227 KiB < 2^24 bytes of shared
# memory and a cluster at most 16 CTAs, so every address fits 32 bits; the generic shared window holds them too
# (SPACE_BASE[".shared"] + the shared::cluster address).
CLUSTER_RANK_SHIFT = 24
CLUSTER_OFFSET_MASK = (1 << CLUSTER_RANK_SHIFT) - 1

# op kinds: how the block runner treats an op
PLAIN, BRANCH, EXIT, BARRIER, CALL, RETURN = range(6)


def reg_bits(type_name: str) -> int:
    """Bits a register of declared type ``type_name`` holds (".pred" 1)."""
    if type_name == ".pred":
        return 1
    return TYPE_SIZES[type_name] * 8


@dataclass(slots=True)
class Op:
    """One decoded instruction. ``run(g)`` executes it for the lanes of group ``g`` (flashsim.ptx.machine.Group);
    ``kind`` PLAIN, BRANCH, EXIT, BARRIER, CALL or RETURN; ``name`` the full spelling (opcode and modifiers);
    ``line`` the PTX line; ``loc`` the .loc (file, line, column) or None; ``function`` the function's name;
    ``regs`` the register slots its operands name, ``writes`` those it writes; ``info`` a builder's description
    for later passes."""

    run: object
    kind: int
    name: str
    line: int
    loc: tuple | None
    function: str
    regs: set = field(default_factory=set)  # every register slot the instruction names (its guard too)
    writes: set = field(default_factory=set)  # the slots it names as destinations (Decoded.dst)
    info: object = None  # what a later pass needs to know of it (flashsim.ptx.batching: an mma's operands)


@dataclass
class FunctionInfo:
    """Where a decoded function lies in the op list and how its parameters are stored."""

    name: str
    start: int
    end: int
    fn: Function
    params: dict = field(default_factory=dict)  # .param name -> (offset, size) in the function's param frame
    frame: int = 0  # bytes of the param frame (callee's params, then returns)


class Program:
    """A kernel's decoded program (see the module docstring). ``ops`` the flat op list; ``block_end[pc]`` the last
    PC of the block that starts at ``pc`` (-1 where no block starts); ``regs`` name -> register index; ``dtypes``
    and ``init`` the dtype and initial value of every register slot (constants: their numpy scalar; registers and
    specials: None); ``specials`` special register name -> index; ``functions`` by name; ``kernel`` the entry's
    FunctionInfo; ``param_layout`` kernel parameter name -> (offset, size, Param); ``param_size`` their bytes;
    ``shared_static`` the static shared-memory variables -> offset; ``shared_size`` their bytes (dynamic shared
    memory starts at ``dynamic_offset``); ``local_layout`` / ``local_size`` the per-thread local frame;
    ``const_layout`` / ``const_image`` the constant bank; ``global_vars`` the module's .global variables;
    ``unsupported`` the UnsupportedInstruction of every instruction it cannot run (raised when a thread reaches it)."""

    def __init__(self, module: Module, kernel: Function, arch: str, memory_layout, contraction=None):
        self.module, self.kernel_fn, self.arch = module, kernel, arch
        self.layout = memory_layout
        self.contraction = contraction or {}
        self._fused_products = {(fn, mul) for (fn, _add), mul in self.contraction.items()}
        self._kept: dict = {}
        self.ops: list[Op] = []
        self.regs: dict[str, int] = {}
        self.dtypes: list[np.dtype] = []
        self.init: list = []
        self.specials: dict[str, int] = {}
        self._consts: dict = {}
        self.functions: dict[str, FunctionInfo] = {}
        self.labels: dict[tuple[str, str], int] = {}
        self.call_returns: dict[int, list] = {}  # call PC -> (callee frame offset, caller frame offset, size)
        self.unsupported: list[UnsupportedInstruction] = []  # instructions decoded into ops that raise when run
        self._definitions: dict[str, dict] = {}  # function name -> its register definitions (flashsim.ptx.constants)
        self._leaders: set[int] = set()
        self._decode_all()

    # -- register file ----------------------------------------------------------------------------------

    def _slot(self, dtype, init) -> int:
        self.dtypes.append(np.dtype(dtype))
        self.init.append(init)
        return len(self.dtypes) - 1

    def register(self, fn_index: int, name: str, fn: Function) -> int:
        """The slot of register ``name`` of function ``fn`` (special registers shared by all)."""
        if name in SPECIAL_REGISTERS:
            slot = self.specials.get(name)
            if slot is None:
                t = SPECIAL_REGISTERS[name]
                if t.startswith(".v4"):
                    raise isa.Unsupported(f"the vector special register {name} (read its components)")
                slot = self.specials[name] = self._slot(DTYPE_OF_BITS[reg_bits(t)], None)
            return slot
        key = f"{fn_index}:{name}"
        slot = self.regs.get(key)
        if slot is None:
            t = fn.regs.get(name)
            if t is None:
                raise isa.Unsupported(f"register {name} is not declared")
            if t.startswith(".v"):
                raise isa.Unsupported(f"vector register {name} (declared {t})")
            slot = self.regs[key] = self._slot(DTYPE_OF_BITS[reg_bits(t)], None)
        return slot

    def const(self, value, dtype) -> int:
        """The slot of a constant (a numpy scalar of ``dtype``, the value's bits reduced to its width)."""
        dtype = np.dtype(dtype)
        if dtype == np.dtype(bool):
            scalar = np.bool_(bool(value))
        else:
            bits = dtype.itemsize * 8
            scalar = dtype.type(int(value) & ((1 << bits) - 1))
        key = (dtype.str, scalar.item())
        slot = self._consts.get(key)
        if slot is None:
            slot = self._consts[key] = self._slot(dtype, scalar)
        return slot

    def kept_operands(self, key: tuple, dtype) -> tuple[int, int] | None:
        """The two hidden slots where the product ``key`` (function, index) keeps its operands for the add ptxas fused
        it into (flashsim.ptx.contraction), or None when it was not fused."""
        if key not in self._fused_products:
            return None
        slots = self._kept.get(key)
        if slots is None:
            slots = self._kept[key] = (self._slot(dtype, None), self._slot(dtype, None))
        return slots

    def definitions(self, fn: Function) -> dict:
        """The register definitions of ``fn`` (flashsim.ptx.constants.definitions), computed once per function."""
        found = self._definitions.get(fn.name)
        if found is None:
            found = self._definitions[fn.name] = definitions(fn)
        return found

    # -- decoding ---------------------------------------------------------------------------------------

    def _reachable(self) -> list[Function]:
        order, todo, seen = [], [self.kernel_fn], set()
        while todo:
            fn = todo.pop()
            if fn.name in seen:
                continue
            seen.add(fn.name)
            order.append(fn)
            for ins in fn.body:
                callee = getattr(ins, "callee", None)
                if isinstance(callee, Sym):
                    target = self.module.functions.get(callee.name)
                    if target is not None and not target.declaration_only:
                        todo.append(target)
        return order

    def _decode_all(self) -> None:
        functions = self._reachable()
        for fn in functions:  # placement first: calls and branches refer to PCs
            info = FunctionInfo(fn.name, 0, 0, fn)
            self.functions[fn.name] = info
        pc = 0
        for fn in functions:
            info = self.functions[fn.name]
            info.start = pc
            pc += len(fn.body) + 1  # + the implicit return / exit at the end of a body
            info.end = pc
            for label, index in fn.labels.items():
                self.labels[(fn.name, label)] = info.start + index
        self.kernel = self.functions[self.kernel_fn.name]
        self.layout.bind(self)
        for fi, fn in enumerate(functions):
            info = self.functions[fn.name]
            self._leaders.add(info.start)
            self._leaders.update(info.start + i for i in fn.labels.values())
            for i, ins in enumerate(fn.body):
                op = self._decode(fi, fn, ins, info.start + i)
                self.ops.append(op)
                if op.kind != PLAIN:
                    self._leaders.add(info.start + i + 1)
            self.ops.append(self._implicit_end(fn, info))
            self._leaders.add(info.end)
        n = len(self.ops)
        self.block_end = np.full(n + 1, -1, np.int64)
        starts = sorted(p for p in self._leaders if p < n)
        for a, b in zip(starts, starts[1:] + [n]):
            self.block_end[a] = b - 1
        self.op_names = [op.name for op in self.ops]
        self.batch_plan = batching.plan(self)
        self.schedule = vectorize.schedule(self, self.batch_plan.flush_before)

    def _implicit_end(self, fn: Function, info: FunctionInfo) -> Op:
        """The op after a body's last instruction: falling off the end of a kernel exits, of a function returns."""
        name = "exit" if fn.entry else "ret"
        ins = Instruction(name, (), (), None, fn.body[-1].line if fn.body else fn.line, None)
        return self._decode(list(self.functions).index(fn.name), fn, ins, info.end - 1)

    def _decode(self, fi: int, fn: Function, ins: Instruction, pc: int) -> Op:
        spelled = ins.opcode + "".join(ins.mods)
        try:
            isa.check_target(ins.opcode, ins.mods, self.arch)  # the arch-restricted forms (isa.requires), first
        except isa.Unsupported as exc:
            return self._unsupported(UnsupportedInstruction(spelled, ins.line, self.kernel_fn.name, str(exc)), fn, ins)
        build = isa.builder(ins.opcode, ins.mods)
        if build is None:
            what = (
                "opcode not implemented"
                if isa.builder(ins.opcode) is None and not any(isa.builder(ins.opcode, (t,)) for t in (".b32", ".f32"))
                else "type not implemented for this opcode"
            )
            return self._unsupported(UnsupportedInstruction(spelled, ins.line, self.kernel_fn.name, what), fn, ins)
        d = Decoded(self, fi, fn, ins, pc)
        try:
            op = build(d)
        except isa.Unsupported as exc:
            return self._unsupported(UnsupportedInstruction(spelled, ins.line, self.kernel_fn.name, str(exc)), fn, ins)
        if ins.pred is not None:
            op = d.guarded(op)
        return op

    def _unsupported(self, error: UnsupportedInstruction, fn: Function, ins: Instruction) -> Op:
        """An instruction the simulator does not implement: recorded in ``unsupported``, and an op that raises the
        error when a thread reaches it (so a kernel whose unsupported forms lie on paths a launch never takes, an
        error branch say, still runs; one that reaches them stops there, never guessing)."""
        self.unsupported.append(error)

        def run(g):
            raise error

        return Op(run, PLAIN, ins.opcode + "".join(ins.mods), ins.line, ins.loc, fn.name)

    # -- queries ----------------------------------------------------------------------------------------

    def source_of(self, pc: int) -> str | None:
        """ "file:line" of the op at ``pc`` from its .loc, or None."""
        op = self.ops[pc]
        if op.loc is None:
            return None
        f = self.module.files.get(op.loc[0])
        path = f.path if f is not None else f"file{op.loc[0]}"
        return f"{path}:{op.loc[1]}"


class Decoded:
    """One instruction being decoded, as a builder sees it: ``ins`` (the IR), ``mods`` (flashsim.ptx.isa.Mods over
    its modifiers), ``src(i, dtype)`` / ``dst(i)`` register slots of operand i (an immediate or a symbol's address
    becomes a constant slot of ``dtype``), ``addr(i)`` a memory operand, ``op(run, kind)`` the Op to return, and the
    program (``prog``) for what the decode needs beyond that."""

    def __init__(self, prog: Program, fi: int, fn: Function, ins: Instruction, pc: int):
        self.prog, self.fi, self.fn, self.ins, self.pc = prog, fi, fn, ins, pc
        self.mods = isa.Mods(ins.mods)
        self.name = ins.opcode + "".join(ins.mods)
        self.key = (fn.name, pc - prog.functions[fn.name].start)  # (function, index in its body)
        self.touched: set[int] = set()  # the register slots the builder asked for (Op.regs)
        self.written: set[int] = set()  # those asked for as destinations (Op.writes)

    @property
    def operands(self) -> tuple:
        return self.ins.operands

    def op(self, run, kind: int = PLAIN, info=None) -> Op:
        return Op(run, kind, self.name, self.ins.line, self.ins.loc, self.fn.name, self.touched, self.written, info)

    def reg(self, operand) -> int:
        if not isinstance(operand, Reg):
            raise isa.Unsupported(f"expected a register, got {operand!r}")
        slot = self.prog.register(self.fi, operand.name, self.fn)
        self.touched.add(slot)
        return slot

    def dst(self, i: int) -> int | None:
        """The register slot of destination operand ``i`` (None for the sink ``_``)."""
        operand = self.operands[i]
        if isinstance(operand, Sink):
            return None
        if isinstance(operand, Reg) and operand.name in SPECIAL_REGISTERS:
            raise isa.Unsupported(f"{operand.name} is read-only")
        slot = self.reg(operand)
        self.written.add(slot)
        return slot

    def src(self, i: int, dtype) -> int:
        """The slot of source operand ``i`` read as ``dtype``: a register, or a constant slot for an immediate (its
        bits, or a float literal rounded to ``dtype`` when that is f32 / f64 as ptxas does) or a symbol's address."""
        return self.value(self.operands[i], dtype)

    def value(self, operand, dtype) -> int:
        dtype = np.dtype(dtype)
        if isinstance(operand, Reg):
            return self.reg(operand)
        if isinstance(operand, Imm):
            return self.prog.const(imm_bits(operand, dtype, self.float_kind), dtype)
        if isinstance(operand, Sym):
            space, address = self.prog.layout.symbol(self.prog, self.fn, operand.name)
            return self.prog.const(address + operand.offset, dtype)
        raise isa.Unsupported(f"operand {operand!r} where a value is expected")

    float_kind: str | None = None  # set by float builders: "f16", "f32", "f64" for literal conversion

    def addr(self, i: int):
        """(space of the symbol or None, base slot or None, offset) of memory operand ``i``."""
        operand = self.operands[i]
        if not isinstance(operand, Addr):
            raise isa.Unsupported(f"expected a memory operand [..], got {operand!r}")
        if operand.base is None:
            return None, None, operand.offset
        if isinstance(operand.base, Sym):
            space, address = self.prog.layout.symbol(self.prog, self.fn, operand.base.name)
            return space, None, address + operand.offset + operand.base.offset
        return None, self.reg(operand.base), operand.offset

    def label(self, name: str) -> int:
        pc = self.prog.labels.get((self.fn.name, name))
        if pc is None:
            raise isa.Unsupported(f"label {name} is not in {self.fn.name}")
        return pc

    def guarded(self, op: Op) -> Op:
        """``op`` under its guard ``@%p`` / ``@!%p``: run for the lanes where the predicate holds (a branch, exit or
        barrier keeps its kind: the runner reads which lanes took it from the group)."""
        name, negated = self.ins.pred
        p = self.prog.register(self.fi, name, self.fn)
        inner = op.run

        def run(g):
            sub = g.restrict(p, negated)
            if sub is not None:
                inner(sub)

        return Op(run, op.kind, op.name, op.line, op.loc, op.function, op.regs | {p}, op.writes, None)


def imm_bits(imm: Imm, dtype: np.dtype, float_kind: str | None = None) -> int:
    """The bits a literal ``imm`` gives an operand of ``dtype``: an integer's two's complement bits; a float literal
    to float_kind ("f32" / "f64" / "f16"), rounded to nearest as ptxas does (0f / 0d literals are exact bits)."""
    if imm.kind in ("int", "uint"):
        return imm.value
    bits = dtype.itemsize * 8
    if imm.kind == "f32":
        value = np.uint32(imm.value).view(np.float32)
    else:
        value = np.uint64(imm.value).view(np.float64)
    with np.errstate(all="ignore"):
        if bits == 64:
            return int(np.float64(value).view(np.uint64))
        if bits == 32:
            return int(np.float32(value).view(np.uint32))
        if bits == 16:
            return int(np.float16(value).view(np.uint16))
    raise isa.Unsupported(f"a float literal {imm.text} for a {bits}-bit operand")


def var_align(var: Var) -> int:
    return max(var.align or 1, TYPE_SIZES[var.type])
