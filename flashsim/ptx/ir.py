"""The intermediate representation of a PTX module: what flashsim.ptx.parser builds and the simulator runs.

Every node is a frozen dataclass with __slots__: cheap to build, hashable where its fields are, compared by value.
Names are flat per function: the parser renames every declaration of an inner ``{ }`` block (the inline-asm blocks
and call sequences NVRTC emits) to ``name{k}``, k the block's number in the function (1, 2, ... in order of
opening), and rewrites its uses, so a later stage never needs to know about scopes. A brace cannot occur in a PTX
identifier, so a renamed name never collides with a written one.

Spellings: opcodes without a dot ("mma"), modifiers and types with their dot, as written (".sync", ".f32",
".shared::cta", ".L2::128B"); state spaces with their dot (".global", ".param", ".reg").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# -- types -------------------------------------------------------------------------------------------

# Bytes per element of each fundamental type that a variable or parameter can have (.texref & co. are 64-bit handles).
TYPE_SIZES = {
    ".b8": 1,
    ".u8": 1,
    ".s8": 1,
    ".b16": 2,
    ".u16": 2,
    ".s16": 2,
    ".f16": 2,
    ".b32": 4,
    ".u32": 4,
    ".s32": 4,
    ".f32": 4,
    ".f16x2": 4,
    ".b64": 8,
    ".u64": 8,
    ".s64": 8,
    ".f64": 8,
    ".b128": 16,
    ".texref": 8,
    ".samplerref": 8,
    ".surfref": 8,
}
# Types a register can be declared with: the fundamental ones, and predicates.
REGISTER_TYPES = frozenset(TYPE_SIZES) - {".texref", ".samplerref", ".surfref"} | {".pred"}
INTEGER_TYPES = frozenset(t for t in TYPE_SIZES if t[1] in "bus" and t != ".b128")


def _special_registers() -> dict[str, str]:
    """Every special register of the PTX ISA (chapter "Special Registers") with its type."""
    table = {}
    for name in ("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid"):
        table[f"%{name}"] = ".v4.u32"
        for axis in "xyz":
            table[f"%{name}.{axis}"] = ".u32"
    for name in (
        "laneid",
        "warpid",
        "nwarpid",
        "smid",
        "nsmid",
        "cluster_ctarank",
        "cluster_nctarank",
        "lanemask_eq",
        "lanemask_le",
        "lanemask_lt",
        "lanemask_ge",
        "lanemask_gt",
        "clock",
        "clock_hi",
        "globaltimer_lo",
        "globaltimer_hi",
        "reserved_smem_offset_begin",
        "reserved_smem_offset_end",
        "reserved_smem_offset_cap",
        "reserved_smem_offset_0",
        "reserved_smem_offset_1",
        "total_smem_size",
        "aggr_smem_size",
        "dynamic_smem_size",
    ):
        table[f"%{name}"] = ".u32"
    for name in ("gridid", "clock64", "globaltimer", "current_graph_exec"):
        table[f"%{name}"] = ".u64"
    table["%is_explicit_cluster"] = ".pred"
    for i in range(8):
        table[f"%pm{i}"] = ".u32"
        table[f"%pm{i}_64"] = ".u64"
    for i in range(32):
        table[f"%envreg{i}"] = ".b32"
    return table


SPECIAL_REGISTERS = _special_registers()

# -- operands ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reg:
    """A register: declared ("%r12", "done{3}" after scope renaming, "%v.x" a component of a vector register) or
    special ("%tid.x", "%laneid"). Its type is ``Function.regs[name]`` or ``SPECIAL_REGISTERS[name]``."""

    name: str


@dataclass(frozen=True, slots=True)
class Imm:
    """A numeric literal. ``kind`` "int" (signed 64-bit), "uint" (with the U suffix), "f32" (0fXXXXXXXX), "f64"
    (0dXXXXXXXXXXXXXXXX or a decimal literal such as 1.5, which PTX always reads as a double). ``value`` is an int:
    the integer for "int"/"uint" (sign applied), the IEEE bit pattern for "f32"/"f64", so NaN payloads survive."""

    value: int
    text: str
    kind: str

    def as_float(self):
        """The literal as numpy.float32 / numpy.float64 (its exact bits); ValueError for an integer literal."""
        if self.kind == "f32":
            return np.uint32(self.value).view(np.float32)
        if self.kind == "f64":
            return np.uint64(self.value).view(np.float64)
        raise ValueError(f"{self.text} is an integer literal, not a floating-point one")


@dataclass(frozen=True, slots=True)
class Sink:
    """The sink symbol ``_``: a destination (or vector element) whose value is discarded."""


@dataclass(frozen=True, slots=True)
class Sym:
    """A name used as a value: a variable (its address), a kernel / function parameter, a function, a label, or a
    call prototype / call-target / branch-target table. ``offset`` is the byte offset of ``mov.u64 %rd1, arr+8``."""

    name: str
    offset: int = 0


@dataclass(frozen=True, slots=True)
class Vec:
    """A vector operand ``{%r1, %r2, _, %r4}``: Reg, Sink or Imm items."""

    items: tuple


@dataclass(frozen=True, slots=True)
class Addr:
    """A memory operand ``[base+offset]``: base a Reg, a Sym (variable or parameter) or None for an absolute address
    ``[240]``; offset in bytes (``[%rd1+-4]`` is -4); ``unified`` for ``[a].unified``."""

    base: Reg | Sym | None
    offset: int = 0
    unified: bool = False


@dataclass(frozen=True, slots=True)
class AddrTuple:
    """A bracketed operand list of the texture, surface and tensor instructions: ``[tex, sampler, {%f1, %f2}]``,
    ``[tensorMap, {%r1, %r2}]``; items are Reg, Sym and Vec."""

    items: tuple


@dataclass(frozen=True, slots=True)
class Not:
    """A negated predicate operand ``!%p1`` (setp's combining predicate, selp, vote, not.pred, ...). The PTX grammar
    has no negated register of any other kind: ptxas parses ``-%r1`` but rejects it on every instruction, so the
    parser does too and there is no Neg node."""

    reg: Reg


@dataclass(frozen=True, slots=True)
class Pair:
    """A two-destination operand ``%r1|%p1`` (setp, shfl.sync, match.sync, elect.sync); first may be a Sink."""

    first: Reg | Sink
    second: Reg


# -- instructions ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Instruction:
    """One PTX instruction. ``opcode`` is the first dotted component ("mma"), ``mods`` the rest in written order
    (".sync", ".aligned", ".m16n8k16", ".row", ".col", ".f32", ".f16", ".f16", ".f32"); ``pred`` the guard
    ``(register name, negated)`` of ``@%p1`` / ``@!%p1`` or None; ``line`` the 1-based line in the PTX text; ``loc``
    the ``(file index, line, column)`` of the last ``.loc`` before it in its function, or None."""

    opcode: str
    mods: tuple
    operands: tuple
    pred: tuple | None
    line: int
    loc: tuple | None


@dataclass(frozen=True, slots=True)
class Call(Instruction):
    """``call{.uni} (returns), callee, (args){, targets}``. ``callee`` is a Sym naming a function (direct call) or a
    Reg holding a function's address (indirect call, which then names ``targets``: a ``.callprototype`` or
    ``.calltargets`` label, or a call-table variable). ``returns`` and ``args`` are tuples of Sym (``.param``
    variables), Reg or Imm. ``operands`` holds returns, callee, args and targets in that order."""

    returns: tuple
    callee: Sym | Reg
    args: tuple
    targets: Sym | None


# -- declarations ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    """A kernel or function parameter (or return value): ``.param .align 8 .b8 name[48]`` is
    Param("name", ".b8", 8, 48, ".param"). ``count`` is 1 for a scalar; ``space`` is ".param" or ".reg" (device
    functions may pass registers); ``ptr_space`` / ``ptr_align`` the ``.ptr.global.align 16`` attributes of a kernel
    pointer parameter (``ptr_space`` None for a generic ``.ptr``), both None without ``.ptr``; ``vector`` the N of
    ``.vN``."""

    name: str
    type: str
    align: int | None
    count: int
    space: str
    ptr: bool = False
    ptr_space: str | None = None
    ptr_align: int | None = None
    vector: int = 1

    @property
    def size(self) -> int:
        """Bytes the parameter occupies."""
        return TYPE_SIZES.get(self.type, 0) * self.vector * self.count


@dataclass(frozen=True, slots=True)
class Reloc:
    """An address in a variable's initial value: bytes ``offset .. offset+width`` of ``init`` are bytes
    ``byte .. byte+width`` of the little-endian address of ``symbol`` plus ``addend``; ``generic`` for
    ``generic(sym)`` (a generic address) rather than ``sym`` (an address in the symbol's own state space).
    ``{generic(x), sym+8}`` in a .u64 array gives width 8, byte 0; the byte-wise ``0xFF00(generic(x))`` form gives
    width 1, byte 1 (a complete little-endian run of them is merged into one width-8 entry)."""

    offset: int
    symbol: str
    addend: int
    generic: bool
    width: int
    byte: int = 0


@dataclass(frozen=True, slots=True)
class Var:
    """A variable in .global, .const, .shared, .local or .param space, at module or function scope.
    ``count`` is the number of elements (1 for a scalar, the product of ``dims`` for an array, None for an unsized
    ``.extern .shared .b8 smem[]``: dynamic shared memory); ``init`` the initial value as bytes (``size`` of them,
    zero-filled past a short initialiser) with the addresses it holds in ``relocs`` (their bytes in ``init`` are 0),
    or None without an initialiser; ``linkage`` ".visible", ".extern", ".weak", ".common" or None; ``attributes``
    the ``.attribute(...)`` texts (e.g. ".managed")."""

    space: str
    type: str
    name: str
    count: int | None
    align: int | None
    init: bytes | None
    relocs: tuple = ()
    dims: tuple = ()
    vector: int = 1
    linkage: str | None = None
    attributes: tuple = ()
    line: int = 0

    @property
    def size(self) -> int | None:
        """Bytes the variable occupies; None when unsized."""
        return None if self.count is None else TYPE_SIZES[self.type] * self.vector * self.count


@dataclass(frozen=True, slots=True)
class Directive:
    """A directive kept in a function: the performance directives of its header (``.maxntid 128, 1, 1`` is
    Directive(".maxntid", (128, 1, 1), None)) and the ``.pragma "nounroll";`` statements of its body, whose
    ``position`` is the index in ``Function.body`` of the instruction that follows (a marker between instructions,
    not an instruction: it has no semantics to execute). ``args`` are ints or strings."""

    name: str
    args: tuple
    position: int | None


@dataclass(frozen=True, slots=True)
class Prototype:
    """A ``label: .callprototype (returns) _ (params);`` of an indirect call."""

    name: str
    returns: tuple
    params: tuple
    noreturn: bool = False


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A ``.file index "path"{, timestamp, size}`` directive."""

    path: str
    timestamp: int | None = None
    size: int | None = None


@dataclass(frozen=True, slots=True)
class Function:
    """A kernel (``entry`` True) or device function. ``regs`` maps every declared register (``%r<200>`` expanded to
    %r0..%r199, inner-block ones renamed, .reg parameters included) to its type (".b32", ".pred", ".v4.f32"); ``vars``
    the function-scope variables (.local, .shared, call-sequence .param) by (renamed) name; ``body`` the instructions
    in order; ``labels`` each label -> index in ``body`` of the instruction that follows it (len(body) for a label
    at the end); ``directives`` see Directive; ``linkage`` ".visible", ".extern", ".weak" or None;
    ``declaration_only`` True for a prototype never defined in the module (e.g. vprintf); ``prototypes``,
    ``call_targets``, ``branch_targets`` the ``.callprototype`` / ``.calltargets`` / ``.branchtargets`` tables by
    label; ``line`` where its ``.entry`` / ``.func`` stands."""

    name: str
    entry: bool
    params: tuple
    returns: tuple
    regs: dict
    vars: dict
    body: tuple
    labels: dict
    directives: tuple
    linkage: str | None
    declaration_only: bool = False
    prototypes: dict | None = None
    call_targets: dict | None = None
    branch_targets: dict | None = None
    line: int = 0

    def directive(self, name: str) -> Directive | None:
        """The header directive ``name`` (".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ...), or None."""
        for d in self.directives:
            if d.name == name and d.position is None:
                return d
        return None


@dataclass(frozen=True, slots=True)
class Module:
    """A parsed PTX module. ``version`` (major, minor) of ``.version``; ``target`` the architecture of ``.target``
    ("sm_90a") and ``target_options`` the rest ("texmode_independent", "debug", ...); ``address_size`` 32 or 64
    (32 when the directive is absent, as the ISA says); ``vars`` module-scope variables by name; ``functions`` by
    name, in order of first appearance, declarations merged with their definitions; ``files`` the ``.file`` table
    by index; ``text`` the PTX text as given; ``pragmas`` module-scope ``.pragma`` strings; ``aliases`` the
    ``.alias`` pairs (alias -> aliasee)."""

    version: tuple
    target: str
    address_size: int
    vars: dict
    functions: dict
    files: dict
    text: str
    target_options: tuple = ()
    pragmas: tuple = ()
    aliases: dict | None = None

    def entries(self) -> list[str]:
        """The names of the ``.entry`` functions (kernels), in order."""
        return [f.name for f in self.functions.values() if f.entry]
