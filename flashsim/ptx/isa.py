"""The instruction table: which opcode is built by which semantics function, and the vocabulary of modifiers.

As MMA-Sim keeps its instruction catalogue apart from its arithmetic, this module only knows names: every
semantics module (flashsim/ptx/semantics/) registers the opcodes it implements with ``@implements``; the builder it
registers receives one decoded instruction and returns an ``Op`` (flashsim.ptx.program), or raises
``Unsupported`` for a form it does not implement, which the decoder turns into UnsupportedInstruction naming the
opcode, the line and the kernel. An opcode no module registers is unsupported too. Nothing is guessed: a modifier a
builder does not know is an error, never ignored.

Which architectures accept which forms is part of the same table: a semantics module registers the arch-restricted
forms it knows with ``requires`` (an opcode, or the forms of it that carry some modifiers, or a form a builder names
itself, e.g. the three-input min), with the archs that accept it and the rule's source (the PTX ISA's Target ISA
Notes, as ptxas 13.0 enforces them). The decoder refuses a restricted form on any other arch before a builder sees
it (``check_target``); a builder checks a named form with ``require``. ``forms(arch)`` lists what an arch accepts
(every registered opcode, and each restricted form on the archs that accept it), built from this table alone.
flashsim's arch names stand for their arch-specific targets: "sm_90" is sm_90a, "sm_100" sm_100a, "sm_120" sm_120a
(the targets a kernel using wgmma, tcgen05 or the FP4 mma is built for). A form with no entry is accepted on every
arch flashsim models (sm_80 and later).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..arch import ARCHS, get_arch

__all__ = [
    "implements",
    "implements_form",
    "requires",
    "require",
    "check_target",
    "since",
    "forms",
    "Requirement",
    "builder",
    "opcodes",
    "Unsupported",
    "Mods",
    "TYPES",
    "ROUNDINGS",
    "INTEGER",
    "FLOAT",
    "ANY",
]

_BUILDERS: dict[str, dict] = {}  # opcode -> {family: builder}
_FORMS: dict[str, dict] = {}  # opcode -> {modifier: builder}: forms another family's module builds (st.async)

INTEGER, FLOAT, ANY = "integer", "float", "any"  # families: by the instruction's first type modifier


class Unsupported(Exception):
    """Raised by a builder for a form it does not implement; the message says what (the decoder adds where)."""


def implements(*names: str, family: str = ANY):
    """Register the decorated builder for the opcodes ``names`` ("add", "sub", ...). ``family`` INTEGER or FLOAT:
    the builder takes the opcode's forms whose first type modifier is an integer / bit (.b, .u, .s, .pred) or a
    floating-point one (.f16, .bf16x2, .f32, .f64, ...); ANY: every form (the only builder of the opcode)."""

    def register(fn):
        for name in names:
            table = _BUILDERS.setdefault(name, {})
            if family in table or (family == ANY and table) or ANY in table:
                raise RuntimeError(f"opcode {name!r} ({family}) registered twice ({fn.__module__})")
            table[family] = fn
        return fn

    return register


def implements_form(name: str, modifier: str):
    """Register the decorated builder for the forms of opcode ``name`` that carry ``modifier`` (``st.async`` is a
    cluster instruction, not a plain store): they go to it whatever the opcode's other builders are."""

    def register(fn):
        table = _FORMS.setdefault(name, {})
        if modifier in table:
            raise RuntimeError(f"{name}{modifier} registered twice ({fn.__module__})")
        table[modifier] = fn
        return fn

    return register


def family_of(mods: tuple) -> str:
    """INTEGER or FLOAT, by the first type modifier of ``mods`` (INTEGER when there is none)."""
    for m in mods:
        if m in TYPES:
            return FLOAT if TYPES[m][0] == "f" else INTEGER
    return INTEGER


def builder(opcode: str, mods: tuple = ()) -> Callable | None:
    """The builder registered for ``opcode`` in the family of ``mods`` (or for a form ``mods`` names), or None."""
    forms = _FORMS.get(opcode)
    if forms:
        for m in mods:
            if m in forms:
                return forms[m]
    table = _BUILDERS.get(opcode)
    if not table:
        return None
    return table.get(ANY) or table.get(family_of(mods))


def opcodes() -> list[str]:
    """Every registered opcode (with its families), sorted: the simulator's instruction set."""
    plain = [f"{name}" + ("" if ANY in t else f" ({', '.join(sorted(t))})") for name, t in _BUILDERS.items()]
    return sorted(plain + [f"{name}{m}" for name, t in _FORMS.items() for m in t])


# ---- which archs accept which forms ------------------------------------------------------------------------------


def since(cc: int) -> frozenset[str]:
    """The modelled archs of compute capability ``cc`` (e.g. 90) and later."""
    return frozenset(name for name, a in ARCHS.items() if a.compute_capability >= divmod(cc, 10))


@dataclass(frozen=True)
class Requirement:
    """An arch-restricted form: ``opcode`` with every modifier of ``modifiers`` (none: every form of the opcode), or
    the form a builder names ``name``; accepted on ``archs`` (flashsim arch names, arch-specific targets); ``source``
    the rule (the PTX ISA's target notes, ptxas's message)."""

    opcode: str
    modifiers: tuple[str, ...]
    name: str | None
    archs: frozenset[str]
    source: str

    @property
    def form(self) -> str:
        return self.opcode + ("".join(self.modifiers) if self.name is None else f" ({self.name})")

    def accepts(self, arch: str) -> bool:
        return get_arch(arch).name in self.archs


_REQUIRES: dict[str, list[Requirement]] = {}  # opcode -> its restricted forms


def requires(opcode: str, *modifiers: str, archs, source: str, name: str | None = None) -> Requirement:
    """Register that ``opcode`` (with all of ``modifiers``, or the form ``name`` a builder checks with ``require``)
    is accepted on ``archs`` alone (arch names or a ``since`` set)."""
    archs = frozenset(get_arch(a).name for a in archs)
    req = Requirement(opcode, tuple(modifiers), name, archs, source)
    table = _REQUIRES.setdefault(opcode, [])
    if any((r.modifiers, r.name) == (req.modifiers, req.name) for r in table):
        raise RuntimeError(f"requirement {req.form} registered twice")
    table.append(req)
    return req


def _refusal(req: Requirement, arch: str) -> Unsupported:
    where = ", ".join(sorted(req.archs, key=lambda a: get_arch(a).compute_capability)) or "no modelled arch"
    return Unsupported(f"{req.form} is refused on {get_arch(arch).name} (accepted on {where}: {req.source})")


def check_target(opcode: str, mods: tuple, arch: str) -> None:
    """Raise Unsupported when the form ``opcode`` + ``mods`` is restricted to archs other than ``arch``."""
    present = set(mods)
    for req in _REQUIRES.get(opcode, ()):
        if req.name is None and present.issuperset(req.modifiers) and not req.accepts(arch):
            raise _refusal(req, arch)


def require(opcode: str, name: str, arch: str) -> None:
    """Raise Unsupported when the form ``name`` of ``opcode`` (registered with ``requires(..., name=name)``) is not
    accepted on ``arch``."""
    for req in _REQUIRES.get(opcode, ()):
        if req.name == name:
            if not req.accepts(arch):
                raise _refusal(req, arch)
            return
    raise RuntimeError(f"no requirement {opcode} ({name}) registered")


def _listed_refused(entry: str, arch: str, whole_refused: set) -> bool:
    """Whether an entry of ``opcodes()`` ("add (float, integer)", "cp.bulk") is refused on ``arch``: its opcode as a
    whole, or (a form another module builds) a restricted form carrying its modifier."""
    opcode, _, modifier = entry.split(" ")[0].partition(".")
    if opcode in whole_refused:
        return True
    return bool(modifier) and any(
        "." + modifier in r.modifiers and not r.accepts(arch) for r in _REQUIRES.get(opcode, ())
    )


def forms(arch: str) -> dict[str, dict[str, list[str]]]:
    """What ``arch`` accepts, from the registered table: {"accepted": opcodes (with their families) the arch runs
    and the restricted forms it accepts, "refused": the restricted forms it refuses, each with its rule}. An
    opcode refused as a whole is listed under "refused" alone; restricted forms of opcodes no builder implements
    (tcgen05) are listed under "refused" only where refused, as "not simulated" elsewhere is the decoder's word."""
    name = get_arch(arch).name
    accepted, refused = [], []
    registered = set(_BUILDERS) | set(_FORMS)
    whole_refused = {
        op for op, reqs in _REQUIRES.items() for r in reqs if not r.modifiers and r.name is None and not r.accepts(name)
    }
    for entry in opcodes():
        if not _listed_refused(entry, name, whole_refused):
            accepted.append(entry)
    for op, reqs in sorted(_REQUIRES.items()):
        for r in reqs:
            if r.accepts(name):
                if op in registered and (r.modifiers or r.name):
                    accepted.append(f"{r.form}  [{r.source}]")
            else:
                refused.append(f"{r.form}  [{r.source}]")
    return {"accepted": sorted(accepted), "refused": sorted(refused)}


# Fundamental types: name -> (kind, bits); kind "b" raw bits, "u" unsigned, "s" signed, "f" floating point,
# "p" predicate. Packed pairs have bits of the whole register.
TYPES = {
    ".pred": ("p", 1),
    ".b8": ("b", 8),
    ".u8": ("u", 8),
    ".s8": ("s", 8),
    ".b16": ("b", 16),
    ".u16": ("u", 16),
    ".s16": ("s", 16),
    ".f16": ("f", 16),
    ".bf16": ("f", 16),
    ".e4m3": ("f", 8),
    ".e5m2": ("f", 8),
    ".b32": ("b", 32),
    ".u32": ("u", 32),
    ".s32": ("s", 32),
    ".f32": ("f", 32),
    ".tf32": ("f", 32),
    ".f16x2": ("f", 32),
    ".bf16x2": ("f", 32),
    ".e4m3x2": ("f", 16),
    ".e5m2x2": ("f", 16),
    ".b64": ("b", 64),
    ".f32x2": ("f", 64),
    ".u64": ("u", 64),
    ".s64": ("s", 64),
    ".f64": ("f", 64),
    ".b128": ("b", 128),
}
ROUNDINGS = (".rn", ".rz", ".rm", ".rp", ".rni", ".rzi", ".rmi", ".rpi", ".rna", ".rs")


class Mods:
    """The modifiers of one instruction, consumed by the builder: ``take(*choices)`` removes and returns the one of
    ``choices`` present (None if none; Unsupported if several), ``flag(name)`` whether ``name`` is present,
    ``types()`` the type modifiers in order. ``done()`` raises Unsupported naming whatever the builder did not
    consume: no modifier is ever ignored."""

    def __init__(self, mods: tuple):
        self.left = list(mods)

    def take(self, *choices):
        found = [m for m in self.left if m in choices]
        if len(found) > 1:
            raise Unsupported(f"contradictory modifiers {' '.join(found)}")
        if found:
            self.left.remove(found[0])
            return found[0]
        return None

    def flag(self, name: str) -> bool:
        return self.take(name) is not None

    def types(self) -> list[str]:
        """Remove and return every type modifier, in order."""
        found = [m for m in self.left if m in TYPES]
        for m in found:
            self.left.remove(m)
        return found

    def type(self) -> str:
        """Remove and return the one type modifier (Unsupported unless exactly one)."""
        found = self.types()
        if len(found) != 1:
            raise Unsupported(f"expected one type, got {' '.join(found) or 'none'}")
        return found[0]

    def prefixed(self, prefix: str) -> str | None:
        """Remove and return the one modifier starting with ``prefix`` (e.g. ".L2::"), or None."""
        found = [m for m in self.left if m.startswith(prefix)]
        if len(found) > 1:
            raise Unsupported(f"contradictory modifiers {' '.join(found)}")
        if found:
            self.left.remove(found[0])
            return found[0]
        return None

    def done(self) -> None:
        if self.left:
            raise Unsupported(f"modifier{'s' if len(self.left) > 1 else ''} {' '.join(self.left)} not implemented")
