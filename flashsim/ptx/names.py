"""Finding a kernel of a PTX module by the name a person knows it by.

A kernel's PTX name is its ``extern "C"`` name or its Itanium-ABI mangled name (``_Z9flash_fwdPK6__halfS1_i``,
``_ZN5flash6kernelILi128EEEvPKf``). ``find_kernel`` takes the exact PTX name, or the C++ name without template
arguments and parameters (``flash_fwd``, ``kernel`` or ``flash::kernel``) when exactly one kernel has it.

``demangle`` reads only what that needs: the (nested) name of the function, its namespaces and classes, and whether
it is a template instance. Template arguments are skipped by their grammar (types, literals, packs), not printed;
parameter types are not read. A name outside that subset (an operator, a local entity, an expression argument)
gives None, and such a kernel is found by its exact PTX name only.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import UnknownKernel
from .ir import Function, Module

_BUILTIN_TYPES = frozenset("vwbcahstijlmxynofdegz")
_QUALIFIERS = frozenset("PRKVrOCG")
_ANONYMOUS_NAMESPACE = "_GLOBAL__N_"


@dataclass(frozen=True, slots=True)
class DemangledName:
    """``qualified`` "flash::kernel", ``base`` "kernel", ``template`` True for a template instance."""

    qualified: str
    base: str
    template: bool

    def __str__(self) -> str:
        return self.qualified + ("<...>" if self.template else "")


class _Unsupported(Exception):
    """A mangled construct outside the subset read here."""


def demangle(mangled: str) -> DemangledName | None:
    """The name part of an Itanium-mangled function name, or None when ``mangled`` is not one this reads."""
    if not mangled.startswith("_Z"):
        return None
    try:
        parts, template, _ = _name(mangled, 2)
    except (_Unsupported, IndexError, ValueError):
        return None
    return DemangledName("::".join(parts), parts[-1], template)


def _name(s: str, i: int, skipping: bool = False) -> tuple[list[str], bool, int]:
    """(components, is a template instance, index after the name) of the <name> at s[i]. ``skipping``: the name
    is part of a template argument, whose text is not needed, so substitutions and template parameters may stand
    for components (their text would need the substitution table, which is not kept)."""
    if s[i] == "L":  # internal linkage
        i += 1
    if s[i] == "N":
        i += 1
        while s[i] in "rVKRO":  # cv- and ref-qualifiers of a member function
            i += 1
        parts, template = [], False
        while s[i] != "E":
            if s[i] == "I":
                if not parts:
                    raise _Unsupported("template arguments before a name")
                i = _skip_template_args(s, i)
                template = True
                continue
            if s[i : i + 2] == "St":
                parts.append("std")
                i += 2
                continue
            if skipping and s[i] in "ST":
                i = _skip_type(s, i)
                parts.append("?")
                continue
            if s[i] in "CD" and s[i + 1 : i + 2].isdigit():
                raise _Unsupported("constructor or destructor")
            component, i = _source_name(s, i)
            parts.append(component)
            template = False
        return parts, template, i + 1
    if s[i : i + 2] == "St":
        i += 2
        component, i = _source_name(s, i)
        parts = ["std", component]
    elif s[i].isdigit():
        component, i = _source_name(s, i)
        parts = [component]
    else:
        raise _Unsupported(f"name starting with {s[i]!r}")
    template = False
    if i < len(s) and s[i] == "I":
        i = _skip_template_args(s, i)
        template = True
    return parts, template, i


def _source_name(s: str, i: int) -> tuple[str, int]:
    j = i
    while s[j].isdigit():
        j += 1
    if j == i:
        raise _Unsupported(f"expected a <source-name> at {i}")
    n = int(s[i:j])
    name = s[j : j + n]
    if len(name) != n:
        raise _Unsupported("source name runs past the end")
    if name.startswith(_ANONYMOUS_NAMESPACE):
        name = "(anonymous namespace)"
    return name, j + n


def _skip_template_args(s: str, i: int) -> int:
    """Index after the <template-args> ``I ... E`` at s[i]."""
    i += 1
    while s[i] != "E":
        i = _skip_template_arg(s, i)
    return i + 1


def _skip_template_arg(s: str, i: int) -> int:
    c = s[i]
    if c == "L":  # a literal: L <type> <value> E
        if s[i + 1 : i + 3] == "_Z":
            raise _Unsupported("external name as a template argument")
        i = _skip_type(s, i + 1)
        while s[i] != "E":
            if not (s[i].isalnum() or s[i] in "._"):
                raise _Unsupported("bad literal")
            i += 1
        return i + 1
    if c == "J":  # an argument pack
        i += 1
        while s[i] != "E":
            i = _skip_template_arg(s, i)
        return i + 1
    if c == "X":
        raise _Unsupported("expression template argument")
    return _skip_type(s, i)


def _skip_type(s: str, i: int) -> int:
    c = s[i]
    if c in _BUILTIN_TYPES:
        return i + 1
    if c in _QUALIFIERS:
        return _skip_type(s, i + 1)
    if c == "u":
        _, i = _source_name(s, i + 1)
        return i
    if c == "D":
        d = s[i + 1]
        if d in "dfehisuacn":
            return i + 2
        if d == "F":  # _FloatN: DF <number> _ (DF16_), or DF16b (std::bfloat16_t)
            j = i + 2
            while s[j].isdigit():
                j += 1
            if s[j] == "_" or s[j] == "b":
                return j + 1
            raise _Unsupported("bad DF type")
        if d == "p":  # pack expansion
            return _skip_type(s, i + 2)
        if d == "v":  # vector type: Dv <number> _ <type>
            j = i + 2
            while s[j].isdigit():
                j += 1
            if s[j] != "_":
                raise _Unsupported("bad vector type")
            return _skip_type(s, j + 1)
        raise _Unsupported(f"type D{d}")
    if c == "N":
        _, _, i = _name(s, i, skipping=True)
        return i
    if c.isdigit():
        _, i = _source_name(s, i)
        return _skip_template_args(s, i) if s[i] == "I" else i
    if c == "S":
        if s[i + 1] == "t":
            _, i = _source_name(s, i + 2)
        elif s[i + 1] in "absiod":
            i += 2
        else:
            j = i + 1
            while s[j] != "_":
                if not (s[j].isdigit() or s[j].isupper()):
                    raise _Unsupported("bad substitution")
                j += 1
            i = j + 1
        return _skip_template_args(s, i) if i < len(s) and s[i] == "I" else i
    if c == "T":
        j = i + 1
        while s[j] != "_":
            if not s[j].isdigit():
                raise _Unsupported("bad template parameter")
            j += 1
        i = j + 1
        return _skip_template_args(s, i) if i < len(s) and s[i] == "I" else i
    if c == "F":
        i += 1
        if s[i] == "Y":
            i += 1
        while s[i] != "E":
            if s[i] in "RO" and s[i + 1] == "E":
                i += 1
                continue
            i = _skip_type(s, i)
        return i + 1
    if c == "A":
        j = i + 1
        while s[j].isdigit():
            j += 1
        if s[j] != "_":
            raise _Unsupported("array bound expression")
        return _skip_type(s, j + 1)
    if c == "M":
        return _skip_type(s, _skip_type(s, i + 1))
    raise _Unsupported(f"type starting with {c!r}")


def _listing(module: Module) -> str:
    rows = []
    for name in module.entries():
        d = demangle(name)
        rows.append(f"  {name}" + (f"  ({d})" if d is not None else ""))
    return "\n".join(rows) if rows else "  (none: the module has no .entry)"


def find_kernel(module: Module, name: str) -> Function:
    """The ``.entry`` of ``module`` named ``name``: its exact PTX name, or the C++ name (without template arguments
    or parameters, with or without its namespaces) of exactly one mangled entry. UnknownKernel otherwise, listing
    the entries (and their demangled names), or the candidates when the C++ name is ambiguous."""
    if not isinstance(name, str) or not name:
        raise UnknownKernel(f"a kernel name must be a non-empty string, got {name!r}")
    fn = module.functions.get(name)
    if fn is not None and fn.entry:
        return fn
    if fn is not None:
        raise UnknownKernel(f"{name!r} is a .func, not a kernel (.entry); the kernels are:\n{_listing(module)}")
    matches = []
    for entry in module.entries():
        d = demangle(entry)
        if d is not None and name in (d.qualified, d.base):
            matches.append((entry, d))
    if len(matches) == 1:
        return module.functions[matches[0][0]]
    if matches:
        listed = "\n".join(f"  {entry}  ({d})" for entry, d in matches)
        raise UnknownKernel(f"{name!r} names {len(matches)} kernels; pass the mangled name of one:\n{listed}")
    hint = (
        " (template arguments and parameter types are not matched: pass the mangled name)"
        if "<" in name or "(" in name
        else ""
    )
    raise UnknownKernel(f"no kernel {name!r} in this module{hint}; the kernels are:\n{_listing(module)}")
