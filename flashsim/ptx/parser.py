"""PTX text -> flashsim.ptx.ir.Module: a strict parser built on compiled regular expressions over the whole text.

``parse(text)`` reads what NVRTC and nvcc emit (inline-asm blocks, call sequences, ``.loc`` / ``.file`` line
information, ``-G`` debug sections) and hand-written PTX, and raises PTXSyntaxError (line, column, the line shown)
for anything it does not accept. Nothing is guessed; the decisions, each checked against ptxas 13.0 where the ISA
text leaves room:

- Registers must be declared before use (ptxas: "Label expected for forward reference"); an undeclared one is an
  error naming it. Labels may be used before they are defined. Labels and variables share one name space per block
  (ptxas: "Duplicate definition"); a declaration in an inner block shadows an outer one and is renamed ``name{k}``
  (see flashsim.ptx.ir), labels of inner blocks likewise (ptxas resolves a branch to the innermost block's label).
  The operands of ``bra`` are always labels.
- Symbols used in initialisers must be declared earlier (ptxas: "Invalid initial value symbol"); other references to
  module-scope variables and functions are checked once the whole module is read.
- Integer initialisers are stored modulo 2**bits (ptxas stores ``.u8 a = 256`` as 0 and ``-129`` as 0x7f;
  measured); a decimal or 0d literal initialising an .f32 is rounded to nearest-even from the double (ptxas: 1e300
  gives +inf); an integer literal in a floating-point initialiser, a float in an integer one and an initialiser on
  .f16 are rejected (ptxas: "Initial value type mismatch", "No initial value is allowed for .f16 type").
- A short initialiser list fills the rest with zeros, only at the outermost level: ptxas packs a short inner list
  (``{{1}, {2, 3}}`` of .u16[2][2] becomes 1, 2, 3, 0, where C would give 1, 0, 2, 3), so a short inner list is an
  error rather than one of the two readings.
- Not accepted although ptxas takes them: constant expressions such as ``(1<<4)`` and array indexing ``arr[1]``
  (write the value, or ``[arr+4]``); the error says so. ``-%r1`` is rejected as ptxas rejects it on every
  instruction; ``-0f3F800000`` is rejected as ptxas does (write 0fBF800000).
- ``.pragma`` in a body is a Directive marker at its position, not an Instruction (see flashsim.ptx.ir.Directive).
- Debug sections (``.section .debug_* { ... }``) are checked line by line for their data-directive shape and skipped.
"""

from __future__ import annotations

import bisect
import re
import struct

import numpy as np

from .errors import PTXSyntaxError
from .ir import (
    INTEGER_TYPES,
    REGISTER_TYPES,
    SPECIAL_REGISTERS,
    TYPE_SIZES,
    Addr,
    AddrTuple,
    Call,
    Directive,
    Function,
    Imm,
    Instruction,
    Module,
    Not,
    Pair,
    Param,
    Prototype,
    Reg,
    Reloc,
    Sink,
    SourceFile,
    Sym,
    Var,
    Vec,
)

# -- the lexical grammar (PTX ISA "Syntax": identifiers, integer and floating-point constants) --------------------

_ID = r"(?:[A-Za-z][A-Za-z0-9_$]*|[_$%][A-Za-z0-9_$]+)"
_INT = r"(?:0[xX][0-9A-Fa-f]+U?|0[bB][01]+U?|[1-9][0-9]*U?|0[0-7]*U?)"
_FLOAT = (
    r"(?:0[fF][0-9A-Fa-f]{8}|0[dD][0-9A-Fa-f]{16}"  # bit patterns of an f32 / f64
    r"|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)"  # decimals, read as doubles
)
_NUM = rf"(?:{_FLOAT}|{_INT})"
_STRING = r'"(?:[^"\\\n]|\\.)*"'
_NOT_ID_CHAR = r"(?![A-Za-z0-9_$])"

# Every instruction of the PTX ISA (9.x) by its first dotted component.
OPCODES = frozenset(
    """
    abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev brkpt brx call
    clusterlaunchcontrol clz cnot copysign cos cp createpolicy cvt cvta discard div dp2a dp4a elect ex2 exit fence
    fma fns getctarank griddepcontrol isspacep istypep ld ldmatrix ldu lg2 lop3 mad mad24 madc mapa match max
    mbarrier membar min mma mov movmatrix mul mul24 multimem nanosleep neg not or pmevent popc prefetch prefetchu
    prmt rcp red redux rem ret rsqrt sad selp set setmaxnreg setp shf shfl shl shr sin slct sqrt st stackrestore
    stacksave stmatrix sub subc suld suq sured sust szext tanh tcgen05 tensormap testp tex tld4 trap txq vabsdiff
    vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax vmax2 vmax4 vmin vmin2 vmin4 vote vset vset2 vset4
    vshl vshr vsub vsub2 vsub4 wgmma wmma xor
    """.split()
)

_COMMENT_OR_STRING = re.compile(rf"{_STRING}|//[^\n]*|/\*.*?\*/|/\*", re.S)
_NEWLINE = re.compile(r"\n")
_NOT_NEWLINE = re.compile(r"[^\n]")

# one statement of a function body, at the position after the previous one
_BODY_STMT = re.compile(
    rf"""\s*(?:
      (?P<close>\}})
    | (?P<open>\{{)
    | (?P<label>{_ID})\s*:(?!:)
    | (?P<dir>\.[A-Za-z_][A-Za-z0-9_]*)
    | (?P<guard>@\s*(?P<neg>!)?\s*(?P<gname>{_ID})\s*)?
      (?P<op>[a-z][a-z0-9_]*)(?P<mods>(?:\.[A-Za-z0-9_:]+)*){_NOT_ID_CHAR}
      (?P<args>[^;{{}}]*(?:\{{[^{{}};]*\}}[^;{{}}]*)*);
    )""",
    re.X,
)
_OPERAND = re.compile(
    rf"""\s*(?:
      (?P<reg>{_ID}|_(?=\s*\|))(?P<comp>\.[xyzwrgba]{_NOT_ID_CHAR})?
        (?:\s*\|\s*(?P<reg2>{_ID}))?
        (?:\s*\+\s*(?P<symoff>[+-]?{_INT}))?
    | !\s*(?P<not>{_ID})
    | (?P<num>[+-]?{_NUM})(?![A-Za-z0-9_$.])
    | \{{(?P<vec>[^{{}}]*)\}}
    | \[(?P<addr>[^\[\]]*)\](?P<unified>\.unified)?
    | (?P<sink>_){_NOT_ID_CHAR}
    )\s*(?P<sep>,|\Z)""",
    re.X,
)
_VEC_ITEM = re.compile(
    rf"\s*(?:(?P<reg>{_ID})(?P<comp>\.[xyzwrgba]{_NOT_ID_CHAR})?|(?P<num>[+-]?{_NUM})(?![A-Za-z0-9_$.])"
    rf"|(?P<sink>_){_NOT_ID_CHAR})\s*(?P<sep>,|\Z)"
)
_ADDR_SIMPLE = re.compile(
    rf"\s*(?:(?P<base>{_ID})(?P<comp>\.[xyzwrgba]{_NOT_ID_CHAR})?(?:\s*\+\s*(?P<off>[+-]?{_INT}))?"
    rf"|(?P<abs>[+-]?{_INT}))\s*\Z"
)
_CALL_ARGS = re.compile(
    rf"\s*(?:\((?P<rets>[^()]*)\)\s*,)?\s*(?P<callee>{_ID})\s*(?:,\s*\((?P<args>[^()]*)\))?"
    rf"\s*(?:,\s*(?P<targets>{_ID}))?\s*\Z"
)
_CALL_ITEM = re.compile(rf"\s*(?:(?P<id>{_ID})|(?P<num>[+-]?{_NUM})(?![A-Za-z0-9_$.]))\s*(?P<sep>,|\Z)")

_REG_DECL = re.compile(r"\.reg\s*(?:\.v(?P<vec>[248])\s*)?(?P<type>\.[A-Za-z0-9_]+)\s+(?P<names>[^;{}]*);")
_REG_NAME = re.compile(rf"\s*(?P<name>{_ID})\s*(?:<\s*(?P<n>[0-9]+)\s*>)?\s*(?P<sep>,|\Z)")
_VAR_STMT = re.compile(
    r"\.(?P<space>global|const|shared|local|param)(?![A-Za-z0-9_])(?P<rest>[^;{}]*(?:\{[^;]*\})?[^;{}]*);"
)
_DECL_TOKEN = re.compile(
    r"\s*(?:\.align\s+(?P<align>[0-9]+)|\.v(?P<vec>[248])(?![A-Za-z0-9_])"
    r"|\.attribute\s*\((?P<attr>[^()]*(?:\([^()]*\)[^()]*)*)\)|(?P<type>\.[A-Za-z_][A-Za-z0-9_]*))"
)
_DECLARATOR = re.compile(rf"\s*(?P<name>{_ID})(?P<dims>(?:\s*\[\s*[0-9]*\s*\])*)\s*(?:=(?P<init>.*))?\Z", re.S)
_DIM = re.compile(r"\[\s*([0-9]*)\s*\]")
_PARAM = re.compile(
    rf"\s*\.(?P<space>param|reg)(?P<attrs>(?:\s*\.[A-Za-z_][A-Za-z0-9_]*(?:\s+[0-9]+)?)*)\s+(?P<name>{_ID}|_)"
    r"\s*(?:\[\s*(?P<count>[0-9]+)\s*\])?\s*\Z"
)
_PARAM_ATTR = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)(?:\s+([0-9]+))?")
_LOC = re.compile(
    rf"\.loc\s+(?P<file>[0-9]+)\s+(?P<line>[0-9]+)\s+(?P<col>[0-9]+)"
    rf"(?:\s*,\s*function_name\s+{_ID}(?:\s*\+\s*[0-9]+)?)?(?:\s*,\s*inlined_at\s+[0-9]+\s+[0-9]+\s+[0-9]+)?"
)
_PRAGMA = re.compile(rf"\.pragma\s+(?P<strings>{_STRING}(?:\s*,\s*{_STRING})*)\s*;")
_STRING_ITEM = re.compile(_STRING)
_PROTOTYPE = re.compile(
    r"\.callprototype\s*(?:\((?P<rets>[^()]*)\)\s*)?_\s*(?:\((?P<params>[^()]*)\)\s*)?(?P<noret>\.noreturn\s*)?;"
)
_TARGETS = re.compile(rf"\.(?P<kind>calltargets|branchtargets)\s+(?P<list>{_ID}(?:\s*,\s*{_ID})*)\s*;")
_ID_LIST_ITEM = re.compile(_ID)
_NEXT_OPCODE = re.compile(rf"\s*(?:@\s*!?\s*{_ID}\s+)?([a-z][a-z0-9_]*)")

_VERSION = re.compile(r"\.version\s+(?P<major>[0-9]+)\.(?P<minor>[0-9]+)")
_TARGET = re.compile(r"\.target\s+(?P<list>[A-Za-z0-9_]+(?:\s*,\s*[A-Za-z0-9_]+)*)")
_ADDRESS_SIZE = re.compile(r"\.address_size\s+(?P<n>[0-9]+)")
_FILE = re.compile(
    rf"\.file\s+(?P<index>[0-9]+)\s+(?P<path>{_STRING})(?:\s*,\s*(?P<ts>[0-9]+)\s*,\s*(?P<size>[0-9]+))?"
)
_SECTION = re.compile(r"\.section\s+(?P<name>\.debug_[A-Za-z0-9_]+)\s*\{(?P<body>[^{}]*)\}")
_SECTION_LINE = re.compile(
    rf"\s*(?:{_ID}\s*:\s*)?(?:\.b(?:8|16|32|64)\s+[-+A-Za-z0-9_$.]+(?:\s*[-+]\s*[A-Za-z0-9_$.]+)*"
    rf"(?:\s*,\s*[-+A-Za-z0-9_$.]+(?:\s*[-+]\s*[A-Za-z0-9_$.]+)*)*\s*;?)?\s*\Z"
)
_ALIAS = re.compile(rf"\.alias\s+(?P<alias>{_ID})\s*,\s*(?P<target>{_ID})\s*;")
_ENTRY_HEAD = re.compile(rf"\.entry\s+(?P<name>{_ID})\s*(?:\((?P<params>[^()]*)\))?")
_FUNC_HEAD = re.compile(rf"\.func\s*(?:\((?P<rets>[^()]*)\)\s*)?(?P<name>{_ID})\s*(?:\((?P<params>[^()]*)\))?")
_HEADER_DIRECTIVE = re.compile(
    r"\.(?P<name>maxntid|reqntid|reqnctapercluster|minnctapersm|maxnctapersm|maxnreg|maxclusterrank|noreturn"
    r"|explicitcluster|blocksareclusters|abi_preserve_control|abi_preserve)(?![A-Za-z0-9_])"
    r"(?P<args>(?:[ \t]*[0-9]+(?:\s*,\s*[0-9]+)*)?)"
)
_HEADER_ATTRIBUTE = re.compile(r"\.attribute\s*\((?P<attr>[^()]*(?:\([^()]*\)[^()]*)*)\)")
_HEADER_ARITY = {
    "maxntid": (1, 3),
    "reqntid": (1, 3),
    "reqnctapercluster": (1, 3),
    "minnctapersm": (1, 1),
    "maxnctapersm": (1, 1),
    "maxnreg": (1, 1),
    "maxclusterrank": (1, 1),
    "abi_preserve": (1, 1),
    "abi_preserve_control": (1, 1),
    "noreturn": (0, 0),
    "explicitcluster": (0, 0),
    "blocksareclusters": (0, 0),
}
_MODULE_DIRECTIVE = re.compile(r"\s*(?:(?P<dir>\.[A-Za-z_][A-Za-z0-9_]*)|(?P<end>\Z))")
_LINKAGES = frozenset((".visible", ".extern", ".weak", ".common"))
_SPACES = frozenset((".global", ".const", ".shared", ".local", ".param"))

_INIT_TOKEN = re.compile(
    rf"""\s*(?:
      (?P<open>\{{)|(?P<close>\}})|(?P<comma>,)
    | (?P<mask>0[xX][0-9A-Fa-f]+)\s*\(\s*(?:generic\s*\(\s*(?P<mgen>{_ID})\s*\)|(?P<msym>{_ID}))
        (?:\s*\+\s*(?P<madd>{_INT}))?\s*\)
    | generic\s*\(\s*(?P<gen>{_ID})\s*\)(?:\s*\+\s*(?P<gadd>{_INT}))?
    | (?P<num>[+-]?{_NUM})(?![A-Za-z0-9_$.])
    | (?P<sym>{_ID})(?:\s*\+\s*(?P<sadd>{_INT}))?
    | (?P<end>\Z)
    )""",
    re.X,
)
_FLAT_INT_LIST = re.compile(r"\s*\{\s*-?[0-9]+(?:\s*,\s*-?[0-9]+)*\s*\}\s*\Z")


def parse(text: str) -> Module:
    """Parse PTX ``text`` into a Module; PTXSyntaxError (a ValueError) names line and column of what is wrong."""
    if not isinstance(text, str):
        raise TypeError(f"parse() takes the PTX text as a str, got {type(text).__name__}")
    return _ModuleParser(text).run()


# -- literals ---------------------------------------------------------------------------------------------------


def _int_value(body: str) -> tuple[int, bool]:
    """An unsigned integer literal's value and whether it has the U suffix."""
    unsigned = body.endswith("U")
    if unsigned:
        body = body[:-1]
    if body[:2] in ("0x", "0X"):
        return int(body[2:], 16), unsigned
    if body[:2] in ("0b", "0B"):
        return int(body[2:], 2), unsigned
    if len(body) > 1 and body[0] == "0":
        return int(body[1:], 8), unsigned
    return int(body), unsigned


def _f64_bits(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


class _Ref:
    """A name used inside an inner block that is not a variable there: a label of that block or an outer one, or a
    module symbol. Resolved (to its renamed form) once the block's labels are all known, at the function's end."""

    __slots__ = ("name", "offset", "chain", "pos", "want", "resolved")

    def __init__(self, name, offset, chain, pos, want):
        self.name, self.offset, self.chain, self.pos, self.want = name, offset, chain, pos, want
        self.resolved = None


class _Scope:
    """One block of a function body: its number (0 for the body itself), its variables (name -> Reg / Sym operand,
    renamed) and its labels (name -> (kind, renamed name)); one name space for both, as in ptxas."""

    __slots__ = ("sid", "names", "labels")

    def __init__(self, sid):
        self.sid = sid
        self.names = {}
        self.labels = {}

    def rename(self, name: str) -> str:
        return name if self.sid == 0 else f"{name}{{{self.sid}}}"


class _FunctionState:
    """What the body parser accumulates for one function."""

    def __init__(self, name):
        self.name = name
        self.scopes: list[_Scope] = [_Scope(0)]
        self.all_labels = {0: self.scopes[0].labels}
        self.blocks = 0
        self.regs: dict[str, str] = {}
        self.vars: dict[str, Var] = {}
        self.body: list = []
        self.labels: dict[str, int] = {}
        self.directives: list[Directive] = []
        self.loc = None
        # every name not resolved where it is used: (name, (0,), pos, want) in the body's own block, a _Ref inside
        # an inner one; want is "label" (bra), "function" (a direct call), "targets" (an indirect call) or "any"
        self.refs: list = []
        self.fixups: list[int] = []  # indices in body of instructions holding a _Ref, rebuilt at the end
        self.prototypes: dict[str, Prototype] = {}
        self.call_targets: dict[str, tuple] = {}
        self.branch_targets: dict[str, tuple] = {}
        self.branch_target_refs: list = []  # (table name, [(label, chain, pos)]) resolved at the end
        self.last_label = None  # (scope, name, renamed, pos) of the label statement just read, for a table after it
        self.pending_ref = False  # the instruction being read holds a _Ref


class _ModuleParser:
    def __init__(self, text: str):
        self.original = text
        self.line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        self.text = _COMMENT_OR_STRING.sub(self._blank, text)
        self.vars: dict[str, Var] = {}
        self.functions: dict[str, Function] = {}
        self.files: dict[int, SourceFile] = {}
        self.pragmas: list[str] = []
        self.aliases: dict[str, str] = {}
        self.module_refs: list = []  # (name, pos, want) checked against module symbols at the end
        self.loc_files: dict[int, int] = {}  # file index -> pos of its first .loc
        self.fn: _FunctionState | None = None
        self.mods_cache: dict[str, tuple] = {}
        self.special_cache: dict[str, Reg] = {}
        self.address_size = 32

    # -- errors and positions --------------------------------------------------------------------------------------

    def _blank(self, m) -> str:
        s = m.group()
        if s[0] == '"':
            return s
        if s == "/*":
            self._raise("unterminated /* comment", m.start())
        return _NOT_NEWLINE.sub(" ", s) if s[1] == "*" else " " * len(s)

    def _line(self, pos: int) -> int:
        return bisect.bisect_right(self.line_starts, pos)

    def _raise(self, reason: str, pos: int):
        pos = max(0, min(pos, len(self.original)))
        line = self._line(pos)
        start = self.line_starts[line - 1]
        end = self.original.find("\n", start)
        source = self.original[start : end if end >= 0 else len(self.original)]
        raise PTXSyntaxError(reason, line, pos - start + 1, source)

    def _skip_ws(self, pos: int) -> int:
        n = len(self.text)
        while pos < n and self.text[pos] in " \t\r\n\f\v":
            pos += 1
        return pos

    # -- module scope ----------------------------------------------------------------------------------------------

    def run(self) -> Module:
        text = self.text
        pos = self._skip_ws(0)
        m = _VERSION.match(text, pos)
        if m is None:
            self._raise("a PTX module must begin with .version (e.g. .version 8.8)", pos)
        version = (int(m["major"]), int(m["minor"]))
        pos = self._skip_ws(m.end())
        m = _TARGET.match(text, pos)
        if m is None:
            self._raise(".version must be followed by .target (e.g. .target sm_90)", pos)
        target, target_options = self._target(m)
        pos = m.end()
        linkage, linkage_pos = None, None
        while True:
            m = _MODULE_DIRECTIVE.match(text, pos)
            if m is None:
                start = self._skip_ws(pos)
                what = "unbalanced braces: '}' without '{'" if text[start] == "}" else "expected a directive"
                self._raise(what, start)
            if m["end"] is not None:
                break
            name, start = m["dir"], m.start("dir")
            if linkage is not None and name not in (".entry", ".func", *_SPACES):
                self._raise(f"{linkage} must be followed by .entry, .func or a variable declaration", start)
            if name in _LINKAGES:
                if linkage is not None:
                    self._raise(f"two linkage directives ({linkage} {name})", start)
                linkage, linkage_pos, pos = name, start, m.end()
                continue
            if name == ".entry" or name == ".func":
                pos = self._function(start, linkage)
            elif name in _SPACES:
                pos = self._module_var(start, linkage)
            elif name == ".address_size":
                pos = self._address_size(start)
            elif name == ".file":
                pos = self._file(start)
            elif name == ".section":
                pos = self._section(start)
            elif name == ".pragma":
                pm = _PRAGMA.match(text, start)
                if pm is None:
                    self._raise('.pragma takes one or more strings and a ";"', start)
                self.pragmas.extend(s[1:-1] for s in _STRING_ITEM.findall(pm["strings"]))
                pos = pm.end()
            elif name == ".alias":
                am = _ALIAS.match(text, start)
                if am is None:
                    self._raise(".alias takes two function names: .alias alias, aliasee;", start)
                self.aliases[am["alias"]] = am["target"]
                self.module_refs.append((am["target"], am.start("target"), "function"))
                pos = am.end()
            elif name in (".version", ".target"):
                self._raise(f"{name} may appear only once, at the start of the module", start)
            else:
                self._raise(f"unknown directive {name} at module scope", start)
            linkage = None
        if linkage is not None:
            self._raise(f"{linkage} at the end of the module declares nothing", linkage_pos)
        self._check_module_refs()
        return Module(
            version=version,
            target=target,
            address_size=self.address_size,
            vars=self.vars,
            functions=self.functions,
            files=self.files,
            text=self.original,
            target_options=target_options,
            pragmas=tuple(self.pragmas),
            aliases=self.aliases,
        )

    def _target(self, m) -> tuple[str, tuple]:
        items = [s.strip() for s in m["list"].split(",")]
        archs = [s for s in items if re.fullmatch(r"(?:sm|compute)_[0-9]+[af]?", s)]
        known = {"texmode_unified", "texmode_independent", "debug", "map_f64_to_f32"}
        others = [s for s in items if s not in archs]
        if len(archs) != 1:
            self._raise(
                f".target names {len(archs)} architectures ({', '.join(archs) or 'none'}); it takes one", m.start()
            )
        bad = [s for s in others if s not in known]
        if bad:
            self._raise(f".target: unknown option {bad[0]!r} (known: {', '.join(sorted(known))})", m.start())
        return archs[0], tuple(others)

    def _address_size(self, pos: int) -> int:
        m = _ADDRESS_SIZE.match(self.text, pos)
        if m is None or m["n"] not in ("32", "64"):
            self._raise(".address_size takes 32 or 64", pos)
        self.address_size = int(m["n"])
        return m.end()

    def _file(self, pos: int) -> int:
        m = _FILE.match(self.text, pos)
        if m is None:
            self._raise('.file takes an index and a quoted path, optionally ", timestamp, size"', pos)
        index = int(m["index"])
        if index in self.files:
            self._raise(f".file {index} is declared twice", pos)
        path = m["path"][1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        ts, size = m["ts"], m["size"]
        self.files[index] = SourceFile(path, None if ts is None else int(ts), None if size is None else int(size))
        return m.end()

    def _section(self, pos: int) -> int:
        m = _SECTION.match(self.text, pos)
        if m is None:
            self._raise(".section takes a .debug_* name and a { } block of data directives", pos)
        body_start = m.start("body")
        offset = 0
        for line in m["body"].split("\n"):
            if not _SECTION_LINE.match(line):
                self._raise(
                    f"unexpected text in {m['name']} (labels and .b8/.b16/.b32/.b64 data only)", body_start + offset
                )
            offset += len(line) + 1
        return m.end()

    def _module_var(self, pos: int, linkage: str | None) -> int:
        m = _VAR_STMT.match(self.text, pos)
        if m is None:
            self._raise("a variable declaration ends with ';'", pos)
        for var in self._declare_vars(m, linkage):
            if var.name in self.vars or var.name in self.functions:
                self._raise(f"{var.name!r} is declared twice at module scope", pos)
            self.vars[var.name] = var
        return m.end()

    def _check_module_refs(self):
        for name, pos, want in self.module_refs:
            if want == "function":
                if name not in self.functions:
                    what = "a variable, not a function" if name in self.vars else "not declared"
                    self._raise(f"call of {name!r}: {what} (functions must be declared in the module)", pos)
            elif name not in self.vars and name not in self.functions:
                if name.startswith("%"):
                    self._raise(f"undeclared register {name!r}", pos)
                self._raise(f"undeclared identifier {name!r} (no register, variable, label or function)", pos)
        for index, pos in self.loc_files.items():
            if index not in self.files:
                self._raise(f".loc names file {index}, which no .file directive declares", pos)

    # -- declarations ----------------------------------------------------------------------------------------------

    def _declare_vars(self, m, linkage) -> list[Var]:
        """The variables of one ``.space ... name[dims] = init, ...;`` statement (match of _VAR_STMT)."""
        space = "." + m["space"]
        text = self.text
        pos, end = m.start("rest"), m.end("rest")
        align = vec = vtype = None
        attrs = []
        while vtype is None:
            t = _DECL_TOKEN.match(text, pos, end)
            if t is None:
                self._raise(f"{space} declaration: expected a type", self._skip_ws(pos))
            if t["align"] is not None:
                align = int(t["align"])
                if align <= 0 or align & (align - 1):
                    self._raise(f".align {align} is not a power of two", t.start())
            elif t["vec"] is not None:
                vec = int(t["vec"])
            elif t["attr"] is not None:
                attrs.append(t["attr"].strip())
            else:
                vtype = t["type"]
                if vtype not in TYPE_SIZES or vtype == ".pred":
                    self._raise(f"{space} declaration: {vtype} is not a variable type", t.start("type"))
            pos = t.end()
        if linkage == ".extern" and space not in (".global", ".const", ".shared"):
            self._raise(f".extern {space} is not allowed", m.start())
        out = []
        for s, e in self._split_top(pos, end):
            d = _DECLARATOR.match(text, s, e)
            if d is None:
                self._raise(
                    f"{space} declaration: expected a name, [dimensions] and an optional = initialiser",
                    self._skip_ws(s),
                )
            dims = tuple(None if g == "" else int(g) for g in _DIM.findall(d["dims"]))
            if None in dims[1:]:
                self._raise("only the first dimension of an array may be left empty", d.start("dims"))
            if any(x == 0 for x in dims):
                self._raise("an array dimension must be positive", d.start("dims"))
            init, relocs = None, ()
            if d["init"] is not None:
                if space in (".shared", ".local", ".param"):
                    self._raise(f"{space} variables cannot be initialised", d.start("init"))
                if linkage == ".extern":
                    self._raise(".extern variables cannot be initialised", d.start("init"))
                dims, init, relocs = self._initialiser(vtype, vec or 1, dims, d.start("init"), d.end("init"))
            elif dims and dims[0] is None and linkage != ".extern":
                self._raise(f"{d['name']}[]: an unsized array needs .extern or an initialiser", d.start("dims"))
            count = None if (dims and dims[0] is None) else int(np.prod(dims, dtype=np.int64)) if dims else 1
            out.append(
                Var(
                    space=space,
                    type=vtype,
                    name=d["name"],
                    count=count,
                    align=align,
                    init=init,
                    relocs=relocs,
                    dims=dims,
                    vector=vec or 1,
                    linkage=linkage,
                    attributes=tuple(attrs),
                    line=self._line(d.start("name")),
                )
            )
        return out

    def _split_top(self, start: int, end: int) -> list[tuple[int, int]]:
        """Spans of the comma-separated items of text[start:end] at brace / parenthesis depth 0."""
        spans, depth, s = [], 0, start
        for m in re.finditer(r"[{}(),]", self.text[start:end]):
            c = m.group()
            if c in "{(":
                depth += 1
            elif c in "})":
                depth -= 1
            elif depth == 0:
                spans.append((s, start + m.start()))
                s = start + m.end()
        spans.append((s, end))
        return spans

    def _initialiser(self, vtype, vec, dims, start, end):
        """(dims with an empty first dimension filled in, init bytes, relocations) of ``= ...``."""
        if vtype in (".f16", ".texref", ".samplerref", ".surfref"):
            self._raise(f"no initial value is allowed for {vtype} variables", start)
        text = self.text
        shape = dims + ((vec,) if vec > 1 else ())
        if _FLAT_INT_LIST.match(text, start, end) and len(shape) == 1 and vtype in INTEGER_TYPES:
            values = [int(v) for v in text[start:end].strip()[1:-1].split(",")]
            tree = [("int", v, 0) for v in values]
        else:
            tree = self._init_tree(start, end)
        elements = []
        shape = self._layout(tree, shape, 0, elements, self._skip_ws(start))
        dims = shape[: len(dims)]
        size = TYPE_SIZES[vtype]
        total = int(np.prod(shape, dtype=np.int64)) if shape else 1
        data = bytearray(size * total)
        relocs = []
        if elements and all(e[0] == "int" for e in elements) and vtype in INTEGER_TYPES and size <= 8:
            mask = (1 << (8 * size)) - 1
            arr = np.array([e[1] & mask for e in elements], dtype=f"<u{size}")
            data[: arr.nbytes] = arr.tobytes()
        else:
            for i, e in enumerate(elements):
                self._encode(e, vtype, size, i * size, data, relocs)
        return dims, bytes(data), self._merge_relocs(relocs)

    def _init_tree(self, start, end):
        """The initialiser text as nested lists of element tuples: ("int", value, pos), ("f32"/"f64", bits, pos),
        ("sym", name, addend, generic, pos) and ("mask", byte, name, addend, generic, pos)."""
        stack = [[]]
        pos = start
        expect_item = True
        while True:
            t = _INIT_TOKEN.match(self.text, pos, end)
            if t is None:
                self._raise("bad initialiser element", self._skip_ws(pos))
            if t["end"] is not None:
                break
            at = self._skip_ws(t.start())
            if t["comma"] is not None:
                if expect_item:
                    self._raise("empty initialiser element", at)
                expect_item = True
            elif t["close"] is not None:
                if len(stack) == 1:
                    self._raise("unbalanced '}' in initialiser", at)
                if expect_item:
                    self._raise("empty initialiser element" if stack[-1] else "empty initialiser list", at)
                done = stack.pop()
                stack[-1].append(done)
                expect_item = False
            else:
                if not expect_item:
                    self._raise("initialiser elements must be separated by ','", at)
                if t["open"] is not None:
                    stack.append([])
                    pos = t.end()
                    continue
                stack[-1].append(self._init_element(t))
                expect_item = False
            pos = t.end()
        if len(stack) != 1 or len(stack[0]) != 1:
            self._raise("an initialiser is one value or one { } list", start)
        return stack[0][0]

    def _init_element(self, t):
        at = self._skip_ws(t.start())
        if t["num"] is not None:
            imm = self._imm(t["num"], t.start("num"))
            return (imm.kind if imm.kind in ("f32", "f64") else "int", imm.value, at)
        if t["mask"] is not None:
            mask = int(t["mask"][2:], 16)
            byte = (mask.bit_length() - 1) // 8
            if mask != 0xFF << (8 * byte):
                self._raise(f"byte mask {t['mask']} must be 0xFF shifted by a whole number of bytes", at)
            name = t["mgen"] or t["msym"]
            return ("mask", byte, name, self._int_literal(t["madd"], at), t["mgen"] is not None, at)
        if t["gen"] is not None:
            return ("sym", t["gen"], self._int_literal(t["gadd"], at), True, at)
        return ("sym", t["sym"], self._int_literal(t["sadd"], at), False, at)

    def _int_literal(self, text, pos) -> int:
        if text is None:
            return 0
        return self._imm(text, pos).value

    def _layout(self, tree, shape, depth, out, pos):
        """Flatten the nested initialiser against ``shape`` into ``out``; returns the shape with an empty first
        dimension set from the list's length."""
        if depth == len(shape):
            if isinstance(tree, list):
                self._raise("initialiser has more levels of braces than the variable has dimensions", pos)
            out.append(tree)
            return shape
        if not isinstance(tree, list):
            what = "an array" if depth == 0 and shape else "this level"
            self._raise(f"{what} needs a {{ }} initialiser list", tree[-1])
        n = shape[depth]
        if n is None:
            n = len(tree)
            shape = (n,) + shape[1:]
        if len(tree) > n:
            self._raise(f"{len(tree)} initialiser elements for a dimension of {n}", pos)
        if len(tree) < n and depth > 0:
            self._raise(
                "a short inner initialiser list is ambiguous (C pads each row, ptxas packs the elements): "
                "write every inner element",
                pos,
            )
        for item in tree:
            self._layout(item, shape, depth + 1, out, pos)
        inner = int(np.prod(shape[depth + 1 :], dtype=np.int64)) if shape[depth + 1 :] else 1
        out.extend([("int", 0, pos)] * ((n - len(tree)) * inner))
        return shape

    def _encode(self, e, vtype, size, offset, data, relocs):
        kind, pos = e[0], e[-1]
        if kind == "int":
            if vtype not in INTEGER_TYPES:
                self._raise(f"integer literal initialising a {vtype} variable (write a floating-point literal)", pos)
            data[offset : offset + size] = (e[1] & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        elif kind in ("f32", "f64"):
            bits = e[1]
            if vtype == ".f32" or (vtype == ".b32" and kind == "f32"):
                if kind == "f64":
                    value = np.uint64(bits).view(np.float64)
                    if np.isnan(value):
                        self._raise("a NaN double initialising an .f32 has no single defined payload", pos)
                    with np.errstate(over="ignore"):
                        bits = int(np.float32(value).view(np.uint32))
                data[offset : offset + 4] = bits.to_bytes(4, "little")
            elif vtype == ".f64" or (vtype == ".b64" and kind == "f64"):
                if kind == "f32":
                    value = np.uint32(bits).view(np.float32)
                    if np.isnan(value):
                        self._raise("a NaN float widened to .f64 has no single defined payload", pos)
                    bits = int(np.float64(value).view(np.uint64))
                data[offset : offset + 8] = bits.to_bytes(8, "little")
            else:
                self._raise(f"floating-point literal initialising a {vtype} variable", pos)
        else:
            name = e[2] if kind == "mask" else e[1]
            if name not in self.vars and name not in self.functions:
                local = self.fn is not None and any(name in sc.names for sc in self.fn.scopes)
                if not local:
                    self._raise(f"initialiser names {name!r}, which is not declared before it", pos)
            if kind == "mask":
                if size != 1:
                    self._raise("byte-mask initialisers need an 8-bit element type", pos)
                if e[1] >= self.address_size // 8:
                    self._raise(f"byte {e[1]} of a {self.address_size}-bit address", pos)
                relocs.append(Reloc(offset, name, e[3], e[4], 1, e[1]))
            else:
                if vtype not in INTEGER_TYPES or size not in (4, 8):
                    self._raise(f"an address initialises a 32- or 64-bit integer, not {vtype}", pos)
                relocs.append(Reloc(offset, name, e[2], e[3], size, 0))

    def _merge_relocs(self, relocs) -> tuple:
        """Merge complete little-endian runs of byte relocations into one address-wide relocation."""
        width = self.address_size // 8
        out, i = [], 0
        while i < len(relocs):
            r = relocs[i]
            run = relocs[i : i + width]
            if (
                r.width == 1
                and r.byte == 0
                and len(run) == width
                and all(
                    q.width == 1
                    and q.byte == k
                    and q.offset == r.offset + k
                    and (q.symbol, q.addend, q.generic) == (r.symbol, r.addend, r.generic)
                    for k, q in enumerate(run)
                )
            ):
                out.append(Reloc(r.offset, r.symbol, r.addend, r.generic, width, 0))
                i += width
            else:
                out.append(r)
                i += 1
        return tuple(out)

    def _params(self, start: int, end: int, what: str, allow_reg: bool, allow_sink: bool = False) -> tuple:
        text = self.text
        if not text[start:end].strip():
            return ()
        out, seen = [], set()
        for s, e in self._split_top(start, end):
            m = _PARAM.match(text, s, e)
            if m is None:
                self._raise(
                    f"{what}: expected '.param .type name' (or .reg), with .align / .ptr / [count]", self._skip_ws(s)
                )
            space = "." + m["space"]
            if space == ".reg" and not allow_reg:
                self._raise(f"{what}: .reg parameters are allowed only on .func", m.start())
            align = vtype = ptr_space = ptr_align = None
            ptr, vec = False, 1
            for a in _PARAM_ATTR.finditer(m["attrs"]):
                key, num = "." + a[1], a[2]
                if key == ".align" and num is not None:
                    value = int(num)
                    if value <= 0 or value & (value - 1):
                        self._raise(f".align {value} is not a power of two", m.start("attrs") + a.start())
                    if ptr:
                        ptr_align = value
                    else:
                        align = value
                elif num is not None:
                    self._raise(f"{what}: {key} takes no number", m.start("attrs") + a.start())
                elif key == ".ptr":
                    ptr = True
                elif ptr and key in (".global", ".shared", ".const", ".local"):
                    ptr_space = key
                elif key in (".v2", ".v4", ".v8"):
                    vec = int(key[2:])
                elif vtype is None and (key in TYPE_SIZES or (space == ".reg" and key in REGISTER_TYPES)):
                    vtype = key
                else:
                    self._raise(f"{what}: unexpected {key}", m.start("attrs") + a.start())
            if vtype is None:
                self._raise(f"{what}: parameter {m['name']} has no type", m.start())
            if ptr and vtype not in (".u32", ".u64", ".b32", ".b64", ".s32", ".s64"):
                self._raise(f"{what}: .ptr needs a 32- or 64-bit integer type, not {vtype}", m.start())
            name = m["name"]
            if name == "_" and not allow_sink:
                self._raise(f"{what}: '_' names a parameter only in a .callprototype", m.start("name"))
            if name != "_":
                if name in seen:
                    self._raise(f"{what}: parameter {name!r} declared twice", m.start("name"))
                seen.add(name)
            count = 1 if m["count"] is None else int(m["count"])
            out.append(Param(name, vtype, align, count, space, ptr, ptr_space, ptr_align, vec))
        return tuple(out)

    # -- functions -------------------------------------------------------------------------------------------------

    def _function(self, pos: int, linkage: str | None) -> int:
        text = self.text
        entry = text.startswith(".entry", pos)
        if linkage == ".common":
            self._raise(".common applies to variables, not functions", pos)
        if entry:
            m = _ENTRY_HEAD.match(text, pos)
            if m is None:
                self._raise(".entry needs a name", pos)
            returns = ()
        else:
            m = _FUNC_HEAD.match(text, pos)
            if m is None:
                self._raise(".func needs a name (and optionally (return params) before it)", pos)
            returns = () if m["rets"] is None else self._params(m.start("rets"), m.end("rets"), "return", True)
        name = m["name"]
        params = () if m["params"] is None else self._params(m.start("params"), m.end("params"), name, not entry)
        directives = []
        pos = m.end()
        while True:
            pos = self._skip_ws(pos)
            c = text[pos : pos + 1]
            if c == "{" or c == ";":
                break
            d = _HEADER_DIRECTIVE.match(text, pos)
            if d is not None:
                args = tuple(int(x) for x in re.findall(r"[0-9]+", d["args"]))
                lo, hi = _HEADER_ARITY[d["name"]]
                if not lo <= len(args) <= hi:
                    self._raise(f".{d['name']} takes {lo}..{hi} numbers, got {len(args)}", pos)
                if d["name"] == "noreturn" and entry:
                    self._raise(".noreturn applies to .func, not .entry", pos)
                directives.append(Directive("." + d["name"], args, None))
                pos = d.end()
                continue
            p = _PRAGMA.match(text, pos)
            if p is not None:
                directives.append(
                    Directive(".pragma", tuple(s[1:-1] for s in _STRING_ITEM.findall(p["strings"])), None)
                )
                pos = p.end()
                continue
            a = _HEADER_ATTRIBUTE.match(text, pos)
            if a is not None and not entry:
                directives.append(Directive(".attribute", (a["attr"].strip(),), None))
                pos = a.end()
                continue
            if c == "":
                self._raise(f"function {name!r} has neither a body nor a ';'", pos)
            word = re.match(r"\S+", text[pos:])
            self._raise(f"unknown directive {word.group() if word else c!r} in the header of {name!r}", pos)
        line = self._line(m.start())
        if c == ";":
            fn = Function(
                name, entry, params, returns, {}, {}, (), {}, tuple(directives), linkage, True, {}, {}, {}, line
            )
            self._add_function(fn, m.start())
            return pos + 1
        if linkage == ".extern":
            self._raise(f".extern function {name!r} cannot have a body", m.start())
        state = _FunctionState(name)
        self.fn = state
        top = state.scopes[0]
        for p in (*returns, *params):
            if p.space == ".reg":
                top.names[p.name] = Reg(p.name)
                state.regs[p.name] = p.type if p.vector == 1 else f".v{p.vector}{p.type}"
            else:
                top.names[p.name] = Sym(p.name)
        end = self._body(pos + 1)
        fn = self._finish_function(state, entry, params, returns, directives, linkage, line)
        self.fn = None
        self._add_function(fn, m.start())
        return end

    def _add_function(self, fn: Function, pos: int):
        old = self.functions.get(fn.name)
        if fn.name in self.vars:
            self._raise(f"{fn.name!r} is already a variable", pos)
        if old is None:
            self.functions[fn.name] = fn
            return

        def sig(f):
            return tuple((p.type, p.count, p.space, p.vector) for p in f.params), tuple(
                (p.type, p.count, p.space, p.vector) for p in f.returns
            )

        if old.entry != fn.entry or sig(old) != sig(fn):
            self._raise(f"{fn.name!r} does not match its earlier declaration at line {old.line}", pos)
        if not old.declaration_only and not fn.declaration_only:
            self._raise(f"{fn.name!r} is defined twice (first at line {old.line})", pos)
        if not fn.declaration_only:
            self.functions[fn.name] = fn

    def _finish_function(self, st: _FunctionState, entry, params, returns, directives, linkage, line) -> Function:
        # labels: resolve every reference through its chain of blocks, innermost first
        for ref in st.refs:
            name, chain, pos, want = ref if isinstance(ref, tuple) else (ref.name, ref.chain, ref.pos, ref.want)
            found = None
            for sid in chain:
                hit = st.all_labels[sid].get(name)
                if hit is not None:
                    found = hit
                    break
            if found is not None:
                kind, renamed = found
                if want == "label" and kind != "label":
                    self._raise(f"branch target {name!r} is a {kind} table, not a label", pos)
                if want == "function":
                    self._raise(f"call of {name!r}: a label, not a function", pos)
                if want == "targets" and kind not in ("prototype", "calltargets"):
                    self._raise(f"{name!r} is a {kind}, not a .callprototype or .calltargets label", pos)
                if not isinstance(ref, tuple):
                    ref.resolved = renamed
            else:
                if want == "label":
                    self._raise(f"branch target {name!r} is not a label of function {st.name!r}", pos)
                if name.startswith("%") and want != "function":
                    self._raise(f"undeclared register {name!r}", pos)
                self.module_refs.append((name, pos, want))
                if not isinstance(ref, tuple):
                    ref.resolved = name
        for i in st.fixups:
            st.body[i] = self._rebuild(st.body[i])
        for table, refs in st.branch_target_refs:
            labels = []
            for name, chain, pos in refs:
                hit = next((st.all_labels[sid][name] for sid in chain if name in st.all_labels[sid]), None)
                if hit is None or hit[0] != "label":
                    self._raise(f".branchtargets {table!r}: {name!r} is not a label of function {st.name!r}", pos)
                labels.append(hit[1])
            st.branch_targets[table] = tuple(labels)
        return Function(
            name=st.name,
            entry=entry,
            params=params,
            returns=returns,
            regs=st.regs,
            vars=st.vars,
            body=tuple(st.body),
            labels=st.labels,
            directives=tuple(directives) + tuple(st.directives),
            linkage=linkage,
            declaration_only=False,
            prototypes=st.prototypes,
            call_targets=st.call_targets,
            branch_targets=st.branch_targets,
            line=line,
        )

    def _rebuild(self, ins: Instruction) -> Instruction:
        fix = self._fix
        if isinstance(ins, Call):
            returns = tuple(fix(x) for x in ins.returns)
            callee = fix(ins.callee)
            args = tuple(fix(x) for x in ins.args)
            targets = None if ins.targets is None else fix(ins.targets)
            ops = returns + (callee,) + args + (() if targets is None else (targets,))
            return Call(ins.opcode, ins.mods, ops, ins.pred, ins.line, ins.loc, returns, callee, args, targets)
        return Instruction(ins.opcode, ins.mods, tuple(fix(x) for x in ins.operands), ins.pred, ins.line, ins.loc)

    def _fix(self, op):
        if isinstance(op, _Ref):
            return Sym(op.resolved, op.offset)
        if isinstance(op, Addr) and isinstance(op.base, _Ref):
            return Addr(Sym(op.base.resolved), op.offset, op.unified)
        if isinstance(op, AddrTuple):
            return AddrTuple(tuple(self._fix(x) for x in op.items))
        return op

    # -- function bodies -------------------------------------------------------------------------------------------

    def _body(self, pos: int) -> int:
        """Parse statements from just after the body's '{' to its matching '}'; returns the position after it."""
        text = self.text
        st = self.fn
        match = _BODY_STMT.match
        open_pos = [pos - 1]
        while True:
            m = match(text, pos)
            if m is None:
                self._body_error(pos, open_pos)
            if m.start("op") >= 0:
                st.last_label = None
                self._instruction(m)
            elif m.start("close") >= 0:
                st.last_label = None
                st.scopes.pop()
                open_pos.pop()
                if not st.scopes:
                    return m.end()
            elif m.start("open") >= 0:
                st.last_label = None
                st.blocks += 1
                scope = _Scope(st.blocks)
                st.scopes.append(scope)
                st.all_labels[scope.sid] = scope.labels
                open_pos.append(m.start("open"))
            elif m.start("label") >= 0:
                self._label(m["label"], m.start("label"))
            else:
                pos = self._body_directive(m["dir"], m.start("dir"))
                continue
            pos = m.end()

    def _body_error(self, pos: int, open_pos: list):
        text = self.text
        at = self._skip_ws(pos)
        if at >= len(text):
            self._raise(
                f"unbalanced braces: the '{{' of function {self.fn.name!r} is never closed", open_pos[0]
            ) if len(open_pos) == 1 else self._raise("unbalanced braces: this '{' is never closed", open_pos[-1])
        word = re.match(r"@?\s*!?\s*[^\s;{}]*", text[at:]).group()
        op = re.match(r"(?:@\s*!?\s*\S+\s+)?([a-z][a-z0-9_]*)", text[at:])
        if op and op.group(1) in OPCODES:
            self._raise(f"instruction {op.group(1)!r} is not terminated by ';'", at)
        self._raise(f"unexpected {word or text[at]!r} in the body of {self.fn.name!r}", at)

    def _label(self, name: str, pos: int):
        st = self.fn
        scope = st.scopes[-1]
        if name in scope.labels:
            self._raise(f"duplicate label {name!r}", pos)
        if name in scope.names:
            self._raise(f"label {name!r} has the name of a variable of the same block", pos)
        renamed = scope.rename(name)
        scope.labels[name] = ("label", renamed)
        st.labels[renamed] = len(st.body)
        st.last_label = (scope, name, renamed, pos)

    def _body_directive(self, name: str, pos: int) -> int:
        text = self.text
        st = self.fn
        last_label, st.last_label = st.last_label, None
        if name == ".loc":
            m = _LOC.match(text, pos)
            if m is None:
                self._raise(".loc takes a file index, a line and a column", pos)
            file = int(m["file"])
            st.loc = (file, int(m["line"]), int(m["col"]))
            self.loc_files.setdefault(file, pos)
            return m.end()
        if name == ".reg":
            m = _REG_DECL.match(text, pos)
            if m is None:
                self._raise(".reg declaration: expected '.reg .type name, name<N>;'", pos)
            self._declare_regs(m)
            return m.end()
        if name in _SPACES:
            m = _VAR_STMT.match(text, pos)
            if m is None:
                self._raise(f"{name} declaration must end with ';'", pos)
            scope = st.scopes[-1]
            for var in self._declare_vars(m, None):
                self._check_new_name(scope, var.name, pos)
                renamed = scope.rename(var.name)
                scope.names[var.name] = Sym(renamed)
                st.vars[renamed] = Var(
                    var.space,
                    var.type,
                    renamed,
                    var.count,
                    var.align,
                    var.init,
                    var.relocs,
                    var.dims,
                    var.vector,
                    var.linkage,
                    var.attributes,
                    var.line,
                )
            return m.end()
        if name == ".pragma":
            m = _PRAGMA.match(text, pos)
            if m is None:
                self._raise('.pragma takes one or more strings and a ";"', pos)
            strings = tuple(s[1:-1] for s in _STRING_ITEM.findall(m["strings"]))
            st.directives.append(Directive(".pragma", strings, len(st.body)))
            return m.end()
        if name in (".callprototype", ".calltargets", ".branchtargets"):
            if last_label is None:
                self._raise(f"{name} must be labelled (label: {name} ...)", pos)
            scope, lname, renamed, lpos = last_label
            del st.labels[renamed]
            if name == ".callprototype":
                m = _PROTOTYPE.match(text, pos)
                if m is None:
                    self._raise(".callprototype: expected '(.param .type _) _ (.param .type _, ...);'", pos)
                rets = () if m["rets"] is None else self._params(m.start("rets"), m.end("rets"), lname, True, True)
                params = (
                    () if m["params"] is None else self._params(m.start("params"), m.end("params"), lname, True, True)
                )
                st.prototypes[renamed] = Prototype(renamed, rets, params, m["noret"] is not None)
                scope.labels[lname] = ("prototype", renamed)
                return m.end()
            m = _TARGETS.match(text, pos)
            if m is None or m["kind"] != name[1:]:
                self._raise(f"{name} takes a comma-separated list of names", pos)
            names = _ID_LIST_ITEM.findall(m["list"])
            if name == ".calltargets":
                for fname in names:
                    self.module_refs.append((fname, m.start("list"), "function"))
                st.call_targets[renamed] = tuple(names)
                scope.labels[lname] = ("calltargets", renamed)
            else:
                chain = tuple(sc.sid for sc in reversed(st.scopes))
                st.branch_target_refs.append((renamed, [(n, chain, m.start("list")) for n in names]))
                scope.labels[lname] = ("branchtargets", renamed)
            return m.end()
        self._raise(f"unknown directive {name} in a function body", pos)

    def _check_new_name(self, scope: _Scope, name: str, pos: int):
        if name in scope.names:
            self._raise(f"{name!r} is declared twice in the same block", pos)
        if name in scope.labels:
            self._raise(f"{name!r} is already a label of the same block", pos)

    def _declare_regs(self, m):
        st = self.fn
        scope = st.scopes[-1]
        rtype = m["type"]
        if rtype not in REGISTER_TYPES:
            self._raise(f".reg {rtype}: not a register type", m.start("type"))
        if m["vec"] is not None:
            if rtype == ".pred":
                self._raise("vector registers cannot be .pred", m.start("type"))
            rtype = f".v{m['vec']}{rtype}"
        text = self.text
        pos, end = m.start("names"), m.end("names")
        names, regs = scope.names, st.regs
        while True:
            n = _REG_NAME.match(text, pos, end)
            if n is None:
                self._raise(".reg declaration: expected a register name or name<N>", self._skip_ws(pos))
            base = n["name"]
            count = n["n"]
            declared = [base] if count is None else [f"{base}{i}" for i in range(int(count))]
            for name in declared:
                if name in names or name in scope.labels:
                    self._raise(f"register {name!r} is declared twice in the same block", n.start("name"))
                renamed = name if scope.sid == 0 else f"{name}{{{scope.sid}}}"
                names[name] = Reg(renamed)
                regs[renamed] = rtype
            if n["sep"] == "":
                return
            pos = n.end()

    # -- instructions ----------------------------------------------------------------------------------------------

    def _instruction(self, m):
        st = self.fn
        op = m["op"]
        if op not in OPCODES:
            self._raise(f"unknown instruction {op!r}", m.start("op"))
        mods_text = m["mods"]
        mods = self.mods_cache.get(mods_text)
        if mods is None:
            mods = tuple("." + x for x in mods_text[1:].split(".")) if mods_text else ()
            self.mods_cache[mods_text] = mods
        pred = None
        if m.start("guard") >= 0:
            reg = self._lookup(m["gname"])
            gpos = m.start("gname")
            if not isinstance(reg, Reg):
                if reg is None and not m["gname"].startswith("%"):
                    self._raise(f"guard @{m['gname']}: undeclared predicate register", gpos)
                self._raise(f"guard @{m['gname']}: not a declared predicate register", gpos)
            if self._reg_type(reg) != ".pred":
                self._raise(f"guard @{m['gname']} is a {self._reg_type(reg)} register, not .pred", gpos)
            pred = (reg.name, m["neg"] is not None)
        line = bisect.bisect_right(self.line_starts, m.start("op") if pred is None else m.start("guard"))
        st.pending_ref = False
        if op == "call":
            ins = self._call(m, mods, pred, line)
        else:
            ops = self._operands(m.start("args"), m.end("args"), op == "bra")
            ins = Instruction(op, mods, ops, pred, line, st.loc)
        if st.pending_ref:
            st.fixups.append(len(st.body))
        st.body.append(ins)

    def _lookup(self, name: str):
        scopes = self.fn.scopes
        if len(scopes) == 1:
            return scopes[0].names.get(name)
        for sc in reversed(scopes):
            hit = sc.names.get(name)
            if hit is not None:
                return hit
        return None

    def _reg_type(self, reg: Reg) -> str:
        t = self.fn.regs.get(reg.name)
        return t if t is not None else SPECIAL_REGISTERS.get(reg.name, ".v?")

    def _operands(self, start: int, end: int, labels_only: bool) -> tuple:
        text = self.text
        m = _OPERAND.match(text, start, end)
        if m is None:
            if not text[start:end].strip():
                return ()
            self._bad_operand(start, end)
        ops = []
        while True:
            ops.append(self._operand(m, labels_only))
            if not m["sep"]:
                return tuple(ops)
            pos = m.end()
            m = _OPERAND.match(text, pos, end)
            if m is None:
                self._bad_operand(pos, end)

    def _bad_operand(self, pos: int, end: int):
        text = self.text
        at = self._skip_ws(pos)
        item = text[at:end].split(",")[0].strip() if at < end else ""
        if not item:
            self._raise("missing operand (a ',' with nothing after it)", at)
        newline = text.find("\n", at, end)
        following = _NEXT_OPCODE.match(text, newline, end) if newline >= 0 else None
        if following is not None and following[1] in OPCODES:
            stop = newline
            while stop > at and text[stop - 1] in " \t\r":
                stop -= 1
            self._raise("expected ';' at the end of the instruction", stop)
        if re.match(rf"-\s*{_ID}", item):
            self._raise(f"operand {item!r}: PTX has no negated register operand (ptxas rejects it)", at)
        if re.match(r"-\s*0[fFdD]", item):
            self._raise(f"operand {item!r}: a hexadecimal float literal takes no sign (flip its sign bit)", at)
        if re.match(rf"{_ID}\s*\[", item):
            self._raise(f"operand {item!r}: array indexing is not supported; write [name+byte offset]", at)
        if item.startswith("(") or re.search(r"[<>*/&|^~]|[0-9A-Za-z_)]\s*[-+]\s*\(", item):
            self._raise(f"operand {item!r}: constant expressions are not supported; write the value", at)
        self._raise(f"bad operand {item!r}", at)

    def _operand(self, m, labels_only: bool):
        name = m["reg"]
        if name is not None:
            at = m.start("reg")
            if name == "_":
                first = Sink()
            elif labels_only:
                if m["comp"] or m["reg2"] or m["symoff"]:
                    self._raise(f"branch target {m.group().strip(', ')!r} must be a label", at)
                return self._symref(name, 0, at, "label")
            else:
                first = self._value(name, m["comp"], at)
            if m["reg2"] is not None:
                second = self._lookup(m["reg2"])
                if not isinstance(second, Reg):
                    self._raise(f"{m['reg2']!r} after '|' is not a declared register", m.start("reg2"))
                if not isinstance(first, (Reg, Sink)):
                    self._raise(f"{name!r} before '|' is not a register", at)
                return Pair(first, second)
            if m["symoff"] is not None:
                offset = self._imm(m["symoff"], m.start("symoff")).value
                if isinstance(first, Sym):
                    return Sym(first.name, offset)
                if isinstance(first, _Ref):
                    first.offset = offset
                    return first
                self._raise(f"'{name}+offset' is not an operand for a register (use add)", at)
            return first
        if m["num"] is not None:
            return self._imm(m["num"], m.start("num"))
        if m["addr"] is not None:
            return self._address(m.start("addr"), m.end("addr"), m["unified"] is not None)
        if m["vec"] is not None:
            return self._vector(m.start("vec"), m.end("vec"))
        if m["not"] is not None:
            reg = self._lookup(m["not"])
            if not isinstance(reg, Reg) or self._reg_type(reg) != ".pred":
                self._raise(f"'!' applies to a declared predicate register, not {m['not']!r}", m.start("not"))
            return Not(reg)
        return Sink()

    def _value(self, name: str, comp: str | None, pos: int):
        """A name used as an operand: its Reg / Sym if declared in a block in reach, a special register, or an
        unresolved reference (label or module symbol)."""
        hit = self._lookup(name)
        if hit is not None:
            if comp is None:
                return hit
            if isinstance(hit, Reg) and self.fn.regs[hit.name].startswith(".v"):
                return Reg(hit.name + comp)
            self._raise(f"{name}{comp}: {name} is not a vector register", pos)
        if name[0] == "%":
            full = name if comp is None else name + comp
            special = self.special_cache.get(full)
            if special is None and full in SPECIAL_REGISTERS:
                special = self.special_cache[full] = Reg(full)
            if special is not None:
                return special
        if comp is not None:
            self._raise(f"undeclared register {name + comp!r}", pos)
        return self._symref(name, 0, pos, "any")

    def _symref(self, name: str, offset: int, pos: int, want: str):
        st = self.fn
        if len(st.scopes) == 1:
            st.refs.append((name, (0,), pos, want))
            return Sym(name, offset)
        ref = _Ref(name, offset, tuple(sc.sid for sc in reversed(st.scopes)), pos, want)
        st.refs.append(ref)
        st.pending_ref = True
        return ref

    def _imm(self, text: str, pos: int) -> Imm:
        sign = text[0] if text[0] in "+-" else ""
        body = text[1:] if sign else text
        head = body[:2]
        if head in ("0f", "0F", "0d", "0D"):
            if sign:
                self._raise(f"{text}: a hexadecimal float literal takes no sign (flip its sign bit)", pos)
            return Imm(int(body[2:], 16), text, "f32" if head in ("0f", "0F") else "f64")
        if head not in ("0x", "0X", "0b", "0B") and ("." in body or "e" in body or "E" in body):
            value = -float(body) if sign == "-" else float(body)
            return Imm(_f64_bits(value), text, "f64")
        value, unsigned = _int_value(body)
        if sign == "-":
            if unsigned:
                self._raise(f"{text}: a negative literal cannot be unsigned", pos)
            value = -value
        if not -(1 << 63) <= value < (1 << 64):
            self._raise(f"{text}: integer literal out of the 64-bit range", pos)
        return Imm(value, text, "uint" if unsigned else "int")

    def _vector(self, start: int, end: int) -> Vec:
        text = self.text
        items, pos = [], start
        while True:
            m = _VEC_ITEM.match(text, pos, end)
            if m is None:
                at = self._skip_ws(pos)
                self._raise(f"bad vector element {text[at:end].split(',')[0].strip()!r}", at)
            if m["reg"] is not None:
                item = self._value(m["reg"], m["comp"], m.start("reg"))
                if not isinstance(item, Reg):
                    self._raise(f"vector element {m['reg']!r} is not a declared register", m.start("reg"))
            elif m["num"] is not None:
                item = self._imm(m["num"], m.start("num"))
            else:
                item = Sink()
            items.append(item)
            if not m["sep"]:
                return Vec(tuple(items))
            pos = m.end()

    def _address(self, start: int, end: int, unified: bool):
        text = self.text
        m = _ADDR_SIMPLE.match(text, start, end)
        if m is None:
            if "," in text[start:end]:
                return self._address_tuple(start, end)
            self._raise(
                f"bad address [{text[start:end].strip()}] (forms: [reg], [reg+imm], [var+imm], [imm])", start - 1
            )
        if m["abs"] is not None:
            return Addr(None, self._imm(m["abs"], m.start("abs")).value, unified)
        offset = 0 if m["off"] is None else self._imm(m["off"], m.start("off")).value
        return Addr(self._value(m["base"], m["comp"], m.start("base")), offset, unified)

    def _address_tuple(self, start: int, end: int) -> AddrTuple:
        items = []
        for s, e in self._split_top(start, end):
            sub = self._operands(s, e, False)
            if len(sub) != 1 or not isinstance(sub[0], (Reg, Sym, _Ref, Vec)):
                self._raise("a bracketed operand list holds names and { } vectors", self._skip_ws(s))
            items.append(sub[0])
        return AddrTuple(tuple(items))

    def _call(self, m, mods, pred, line) -> Call:
        text = self.text
        start, end = m.start("args"), m.end("args")
        c = _CALL_ARGS.match(text, start, end)
        if c is None:
            self._raise(
                "call: expected 'call (ret), func, (args);' or 'call (ret), %fptr, (args), prototype;'",
                self._skip_ws(start),
            )
        returns = () if c["rets"] is None else self._call_items(c.start("rets"), c.end("rets"))
        args = () if c["args"] is None else self._call_items(c.start("args"), c.end("args"))
        callee_name = c["callee"]
        hit = self._lookup(callee_name)
        if isinstance(hit, Reg):
            callee = hit
            if c["targets"] is None:
                self._raise("an indirect call names a .callprototype, .calltargets or call table", c.start("callee"))
        elif hit is not None:
            self._raise(f"call of {callee_name!r}: a variable, not a function", c.start("callee"))
        else:
            callee = self._symref(callee_name, 0, c.start("callee"), "function")
            if c["targets"] is not None:
                self._raise("a direct call takes no prototype or call-target list", c.start("targets"))
        targets = None
        if c["targets"] is not None:
            targets = self._symref(c["targets"], 0, c.start("targets"), "targets")
        ops = returns + (callee,) + args + (() if targets is None else (targets,))
        return Call("call", mods, ops, pred, line, self.fn.loc, returns, callee, args, targets)

    def _call_items(self, start: int, end: int) -> tuple:
        text = self.text
        if not text[start:end].strip():
            return ()
        items, pos = [], start
        while True:
            m = _CALL_ITEM.match(text, pos, end)
            if m is None:
                at = self._skip_ws(pos)
                self._raise(f"bad call argument {text[at:end].split(',')[0].strip()!r}", at)
            if m["id"] is not None:
                item = self._lookup(m["id"])
                if item is None:
                    if m["id"].startswith("%"):
                        self._raise(f"undeclared register {m['id']!r}", m.start("id"))
                    self._raise(
                        f"call argument {m['id']!r} is not a declared .param variable or register", m.start("id")
                    )
            else:
                item = self._imm(m["num"], m.start("num"))
            items.append(item)
            if not m["sep"]:
                return tuple(items)
            pos = m.end()
