"""Which candidate mul / add pairs ptxas fused, read from the SASS it makes of the module's own PTX.

``fused_pairs(module, candidates)`` returns the subset of ``candidates`` ({(function, add index): mul index},
flashsim.ptx.contraction) that ptxas contracted into one fused multiply-add for ``module.arch``.

Method
    annotate   The PTX is rewritten so that every instruction of every function carries its own ``.loc``: the
               existing ``.loc`` / ``.file`` directives, ``.section .debug_*`` blocks and the ``debug`` of
               ``.target`` are dropped, one ``.file 1 "flashsim-ptx-ids"`` is declared after ``.address_size``
               (or ``.target``), and
               ``.loc 1 ID 0`` goes before each instruction (before its guard), ID numbering the instructions of
               the module in order from 1. The place of each instruction is found on the PTX line the parser gives
               it: the k-th statement start on that line (after ``;``, a brace, a label or the line's start) that
               spells its opcode and guard; an instruction that cannot be placed so is an error, never a guess.
    assemble   ptxas ``-lineinfo`` for the module's arch assembles the annotated text, and plain ptxas (what
               flashsim.gpu.capture.isa runs on the GPU) the original; both in parallel.
    read       ``nvdisasm -c -g`` prints the annotated cubin's SASS with ``//## File "flashsim-ptx-ids", line ID``
               before each run of instructions of one ID: each SASS instruction belongs to the PTX instruction ID.
    verify     Line information must not change code generation: the two cubins' SASS (per function: opcodes and
               operands, without addresses and comments) must be identical (machine code sections that are equal
               byte for byte are; only others are disassembled and compared), else LineInfoChangedCode names the
               first difference and nothing is decided (the method cannot be trusted for that module). This is
               what -G PTX (``.target sm_90, debug``) gives: plain ptxas builds it as a debug build, the
               annotated text (its debug sections gone) as an optimised one.
    decide     Each SASS instruction of the float families is a multiply (FMUL, HMUL2, DMUL, and an FMA whose
               addend is RZ), an add (FADD, HADD2, DADD, and an FMA with a multiplicand of 1 or -1), a fused
               multiply-add (FFMA, HFMA2, HFMA2.BF16_V2, DFMA, in any form: negated operands, .FTZ, .SAT, .MMA,
               32I immediates, FFMA2) or a move (an FMA with a zero multiplicand: ``HFMA2.MMA R, -RZ, RZ, ...``). A
               candidate (add a, product m) is
                   fused      when an FMA belongs to a (or to m, where m pairs with no other add), no multiply
                              belongs to m and no add to a;
                   not fused  when a multiply belongs to m and an add to a and no FMA to a;
               An approximate division (``div.approx.f32`` / ``div.full.f32``, flashsim.ptx.contraction) pairs as a
               product: its multiplies by an immediate (the range scalings, ``FMUL R, R, 0.25`` / ``16777216``) are
               set aside, and its multiply of dividend and reciprocal decides as a mul's would;
               and anything else (ptxas removed, folded or merged them in a way neither rule covers, or a copy of
               one was fused and another not) raises ContractionUndecided naming the PTX lines and the SASS seen,
               with the caller's way out: load the PTX with contraction="none" or "all" (flashsim.ptx.contraction).
               An FMA that belongs to an unrounded mul / add / sub of no candidate pair (ptxas fused through a copy
               or a negation flashsim does not pair) raises the same error: the table would be wrong otherwise.

What ptxas 13.0 does (tests/test_ptx_contraction.py and the probes of flashsim.ptx.probes.contraction hold each
case): it fuses a pair in one block, across a ``bar.sync``, every add reader of a product (repeating the product),
the first operand's product of ``a*b + c*d``, and f64, f16, f16x2, bf16 and bf16x2 pairs alike; it keeps apart a
product that has another reader (a store), a product whose add sits in a block a branch may skip or after a loop,
and the plain C++ product added in another block. It folds ``x * 1.0`` away (undecided: an error), and it fuses a
product through a ``mov`` or ``neg`` (an error: no candidate models it).

Caching: the verdict of the SASS on every unrounded mul / add / sub (the multiplies, adds and FMAs that belong to
it) is kept in-process and on disk (``<flashsim cache root>/ptxas-sass/<key>.json``, flashsim.calibration's cache
root), keyed by the sha256 of the PTX, the arch, the ptxas and nvdisasm versions and the format of the record; a
record that cannot be read is rebuilt, and one is written atomically.

Where unrounded pairs come from (NVRTC / nvcc 13.0, default ``--fmad=true``, no -G): NVVM contracts ``a * b + c``
of float or double within one basic block itself (``fma.rn``), but a product computed in one block and added in
another (``p = a * b; if (n) s = x[i]; y = p + s``) stays ``mul.f32`` + ``add.f32`` (``.f64`` likewise) for ptxas
to decide; ``--fmad=false`` or ``__fmul_rn`` / ``__fadd_rn`` give ``mul.rn`` / ``add.rn`` instead. The half and
bfloat16 arithmetic of cuda_fp16.hpp / cuda_bf16.hpp (``__hmul``, ``__hadd``, ``__hsub``, their ``2`` forms and the
``__half`` / ``__nv_bfloat16`` operators) is inline asm of unrounded ``mul`` / ``add`` / ``sub`` (``.f16``,
``.f16x2``, ``.bf16``, ``.bf16x2``), even under ``--fmad=false``: every such product added in the same function is a
candidate (``__hmul_rn`` / ``__hadd_rn`` are the rounded forms). Hand-written PTX and inline asm give them at will.
kernel/flash_fwd.cu writes every rounding explicitly and has none.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import struct
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from ..calibration import cache_root
from ..errors import CompileError
from ..gpu.build import assemble_ptx, assembler_for, cuda_tools, tool_release, tool_version
from .quotients import approximate_division

__all__ = [
    "fused_pairs",
    "ContractionUndecided",
    "MissingTools",
    "LineInfoChangedCode",
    "annotate",
    "classify",
    "code_sections",
    "sass_verdicts",
]

ID_FILE = "flashsim-ptx-ids"
_FORMAT = 3  # bump when the record below changes meaning (2: approximate divisions watched too; 3: .f32x2)
_WATCHED = ("mul", "add", "sub")  # of a float type: flashsim.ptx.contraction's, which imports this module
# .f32x2 is watched but never paired (flashsim.ptx.contraction): an FMA ptxas made of one raises
_FLOAT_TYPES = (".f32", ".f64", ".f16", ".f16x2", ".bf16", ".bf16x2", ".f32x2")


class MissingTools(FileNotFoundError):
    """No ptxas that reads the PTX's .version, or no nvdisasm: contraction="sass" cannot run (the message names the
    ``ptx`` extra)."""


class ContractionUndecided(RuntimeError):
    """The SASS shows neither that ptxas fused a candidate pair nor that it kept both instructions."""


class LineInfoChangedCode(RuntimeError):
    """ptxas made different code of the annotated PTX than of the original: the line-info reading is void."""


# -- annotate ----------------------------------------------------------------------------------------------------

_MASK = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"', re.S)
_DROP = re.compile(
    r"\.loc\s+\d+\s+\d+\s+\d+(?:\s*,\s*function_name\s+[\w$.%]+(?:\s*\+\s*\d+)?)?"
    r"(?:\s*,\s*inlined_at\s+\d+\s+\d+\s+\d+)?"
    r'|\.file\s+\d+\s+"[^"\n]*"(?:\s*,\s*\d+\s*,\s*\d+)?'
    r"|\.section\s+\.debug_\w+\s*\{[^{}]*\}"
)
_DEBUG_TARGET = re.compile(r"\.target\b[^\n]*?(\s*,\s*debug\b)")
_HEADER_END = re.compile(r"(?m)^[ \t]*\.address_size\b[^\n]*|^[ \t]*\.target\b[^\n]*")
_STATEMENT = re.compile(
    r"(?:^|(?<=[;{}])|(?<=[^:]:))[ \t]*(?P<at>(?P<guard>@!?[%\w$]+[ \t]+)?(?P<op>[a-z][a-z0-9_]*))(?=[.\s;])"
)


def _masked(text: str) -> str:
    """``text`` with comments and the insides of strings blanked (same length, same line breaks)."""

    def blank(m):
        s = m.group()
        inner = re.sub(r"[^\n]", " ", s[1:-1] if s[0] == '"' else s)
        return f'"{inner}"' if s[0] == '"' else inner

    return _MASK.sub(blank, text)


def _instructions(ir):
    """(function name, index, instruction) of every instruction of the module, in id order (ids from 1)."""
    for fn in ir.functions.values():
        for i, ins in enumerate(fn.body):
            yield fn.name, i, ins


def annotate(ptx: str, ir) -> str:
    """``ptx`` (parsed as ``ir``) with its line information replaced by one ``.loc`` per instruction (the module
    docstring); ValueError where an instruction cannot be placed on its line."""
    masked = _masked(ptx)
    starts = [0] + [m.end() for m in re.finditer(r"\n", masked)]
    edits = [(m.start(), m.end(), "") for m in _DROP.finditer(masked)]
    edits += [(m.start(1), m.end(1), "") for m in _DEBUG_TARGET.finditer(masked)]  # no debug sections left
    heads = list(_HEADER_END.finditer(masked))
    if not heads:
        raise ValueError("the PTX has no .target directive")
    head = next((m for m in heads if m.group().lstrip().startswith(".address_size")), heads[0])
    edits.append((head.end(), head.end(), f'\n.file 1 "{ID_FILE}"'))
    by_line: dict[int, list] = {}
    for ident, (fn, _i, ins) in enumerate(_instructions(ir), 1):
        by_line.setdefault(ins.line, []).append((ident, fn, ins))
    for line, wanted in by_line.items():
        text = masked[starts[line - 1] : starts[line] if line < len(starts) else len(masked)]
        found = iter(_STATEMENT.finditer(text))
        for ident, fn, ins in wanted:
            m = next((m for m in found if m["op"] == ins.opcode and bool(m["guard"]) == (ins.pred is not None)), None)
            if m is None:
                raise ValueError(f"{fn}: PTX line {line}: cannot find the start of its {ins.opcode} instruction")
            at = starts[line - 1] + m.start("at")
            edits.append((at, at, f"\n.loc 1 {ident} 0\n"))
    out, pos = [], 0
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1])):
        if start < pos:
            continue  # inside a dropped span
        out += [ptx[pos:start], new]
        pos = end
    out.append(ptx[pos:])
    return "".join(out)


# -- assemble and read -------------------------------------------------------------------------------------------

_LINE = re.compile(r'//## File "(?P<file>[^"]*)", line (?P<line>\d+)')
_SASS = re.compile(r"^\s*/\*[0-9a-f]+\*/\s*(?P<text>[^;]*?)\s*;")
_SECTION = re.compile(r"^\s*\.section\s+\.text\.(?P<name>[^,\s]+)")


@lru_cache(maxsize=1)
def _nvdisasm() -> tuple[str, str]:
    """(path, version line) of the newest nvdisasm found (it must know the newest architecture a cubin may be for)."""
    found = cuda_tools("nvdisasm")
    if not found:
        raise FileNotFoundError(
            "nvdisasm was not found on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin or a pip wheel: "
            "pip install 'flashsim[ptx]' (brings nvdisasm 13.5)"
        )
    exe = max(found, key=tool_release)
    return exe, tool_version(exe)


def _assembler(ptx: str, arch: str) -> tuple[str, str]:
    """(ptxas path, the architecture to assemble for): flashsim.gpu.build.assembler_for (the PTX's own target, or a
    later GPU's; the ptxas of its .version), so that the SASS read is the one the kernel's GPU runs."""
    return assembler_for(ptx, arch)


def _disassemble(cubin: bytes, line_info: bool) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp, "m.cubin")
        path.write_bytes(cubin)
        cmd = [_nvdisasm()[0], "-c", *(["-g"] if line_info else []), str(path)]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {done.stderr.strip()}")
    return done.stdout


def code_sections(cubin: bytes) -> dict:
    """{section name: bytes} of the ``.text.*`` sections of an ELF64 cubin (the functions' machine code)."""
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", cubin, shoff + k * entsize) for k in range(count)]
    names_at = headers[names_index][4]

    def name(offset):
        end = cubin.index(b"\0", names_at + offset)
        return cubin[names_at + offset : end].decode()

    return {name(h[0]): cubin[h[4] : h[4] + h[5]] for h in headers if name(h[0]).startswith(".text.")}


def _read(sass: str) -> tuple[dict, list]:
    """({function: [instruction text]}, [(PTX id or None, instruction text)]) of nvdisasm's output."""
    functions: dict[str, list] = {}
    owned, current, ident = [], None, None
    for raw in sass.splitlines():
        if m := _SECTION.match(raw):
            current, ident = functions.setdefault(m["name"].strip('"'), []), None
        elif m := _LINE.search(raw):
            ident = int(m["line"]) if m["file"] == ID_FILE else None
        elif (m := _SASS.match(raw)) and current is not None:
            text = " ".join(m["text"].split())
            current.append(text)
            owned.append((ident, text))
    return functions, owned


def _compare(original: dict, annotated: dict, module):
    """LineInfoChangedCode unless both builds have the same functions with the same instructions."""
    debug = _DEBUG_TARGET.search(_masked(module.ptx)) is not None
    why = (
        " (its .target says debug: plain ptxas builds it as a debug build, the annotated text, without the debug "
        "sections, as an optimised one)"
        if debug
        else ""
    )

    def fail(what):
        raise LineInfoChangedCode(
            f"{module.arch}: ptxas made other code of the PTX annotated with one .loc per instruction than of the "
            f"PTX itself{why}, so its line information cannot say which pairs it fused: {what} (load with "
            "contraction='none' or 'all' to choose)"
        )

    if sorted(original) != sorted(annotated):
        fail(f"other functions: {sorted(annotated)} against {sorted(original)}")
    for name, ops in original.items():
        other = annotated[name]
        for k in range(max(len(ops), len(other))):
            a = ops[k] if k < len(ops) else "(end)"
            b = other[k] if k < len(other) else "(end)"
            if a != b:
                fail(f"function {name}, SASS instruction {k}: {a!r} against {b!r}")


# -- classify ----------------------------------------------------------------------------------------------------

_MULTIPLIES = {"FMUL", "FMUL32I", "FMUL2", "HMUL2", "HMUL2_32I", "DMUL"}
_ADDS = {"FADD", "FADD32I", "FADD2", "HADD2", "HADD2_32I", "DADD"}
_FMAS = {"FFMA", "FFMA32I", "FFMA2", "HFMA2", "HFMA2_32I", "DFMA"}
_REGISTER = re.compile(r"^[-|!~]*(?:R\d+|RZ|UR\d+|URZ|c\[)")


def _split(text: str) -> tuple[str, list[str]]:
    """(opcode, operands) of a SASS instruction (guard dropped); an H* immediate's two halves are one operand."""
    words = text.split(None, 1)
    if words[0].startswith("@"):
        words = words[1].split(None, 1)
    opcode = words[0]
    items = [x.strip() for x in words[1].split(",")] if len(words) > 1 else []
    if not opcode.startswith("H"):
        return opcode, items
    out, k = [], 0
    while k < len(items):
        if k + 1 < len(items) and not _REGISTER.match(items[k]) and not _REGISTER.match(items[k + 1]):
            out.append(f"{items[k]},{items[k + 1]}")
            k += 2
        else:
            out.append(items[k])
            k += 1
    return opcode, out


def _scaling(text: str) -> bool:
    """A multiply by an immediate (``FMUL R8, R21, 0.25``, ``@!P0 FMUL R7, R7, 16777216``): one of the range scalings
    of an approximate division, not the multiply of dividend and reciprocal that ptxas may fuse."""
    opcode, ops = _split(text)
    return classify(text) == "mul" and any(not _REGISTER.match(op) for op in ops[1:3])


def classify(text: str) -> str | None:
    """ "mul", "add", "fma", "move" for an instruction of the float multiply / add families, else None."""
    opcode, ops = _split(text)
    root = opcode.split(".")[0]
    if root in _MULTIPLIES:
        return "mul"
    if root in _ADDS:
        return "add"
    if root not in _FMAS:
        return None
    if len(ops) < 4:
        return "fma"
    a, b, c = ops[1], ops[2], ops[3]
    zero = {"RZ", "-RZ", "URZ", "-URZ"}
    if a.split(".")[0] in zero or b.split(".")[0] in zero:
        return "move"
    if c.split(".")[0] in zero:
        return "mul"
    if {a, b} & {"1", "-1", "1,1", "-1,-1"}:
        return "add"
    return "fma"


# -- the verdicts, cached ----------------------------------------------------------------------------------------

_VERDICTS: dict[str, dict] = {}


def _key(ptx: str, arch: str) -> str:
    ptxas, target = _assembler(ptx, arch)
    parts = (hashlib.sha256(ptx.encode()).hexdigest(), arch, target, tool_version(ptxas), _nvdisasm()[1], str(_FORMAT))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _disk_path(key: str) -> pathlib.Path:
    return cache_root() / "ptxas-sass" / f"{key}.json"


def _load_disk(key: str) -> dict | None:
    try:
        record = json.loads(_disk_path(key).read_text())
        return {int(k): [tuple(x) for x in v] for k, v in record["verdicts"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _store_disk(key: str, verdicts: dict):
    path = _disk_path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"format": _FORMAT, "verdicts": {str(k): v for k, v in verdicts.items()}}, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written costs time, never a result


def _watched_ids(ir) -> set:
    return {
        ident
        for ident, (_fn, _i, ins) in enumerate(_instructions(ir), 1)
        if (ins.opcode in _WATCHED and any(m in _FLOAT_TYPES for m in ins.mods)) or approximate_division(ins)
    }


def sass_verdicts(module) -> dict:
    """{PTX instruction id: [(class, SASS text)]} for every float mul / add / sub of ``module`` (the SASS
    instructions of the multiply, add and FMA families that belong to it, in program order), ptxas's for
    ``module.arch``, verified as the module docstring says; cached."""
    try:
        key = _key(module.ptx, module.arch)
    except (FileNotFoundError, ValueError) as exc:
        raise MissingTools(
            f"contraction='sass' reads ptxas's SASS with ptxas and nvdisasm: {exc} (or load the PTX with "
            "contraction='none' or 'all')"
        ) from exc
    verdicts = _VERDICTS.get(key)
    if verdicts is None:
        verdicts = _load_disk(key)
        if verdicts is None:
            verdicts = _build(module)
            _store_disk(key, verdicts)
        _VERDICTS[key] = verdicts
    return verdicts


def _build(module) -> dict:
    try:
        annotated = annotate(module.ptx, module.ir)
    except ValueError as exc:
        raise ContractionUndecided(
            f"cannot annotate this PTX with one .loc per instruction: {exc} (load with contraction='none' or 'all')"
        ) from exc
    ptxas, target = _assembler(module.ptx, module.arch)
    with ThreadPoolExecutor(2) as pool:
        plain = pool.submit(assemble_ptx, module.ptx, target, (), ptxas)
        lined = pool.submit(assemble_ptx, annotated, target, ("-lineinfo",), ptxas)
        try:
            plain_cubin = plain.result()
        except CompileError as exc:
            raise CompileError(
                f"ptxas ({tool_version(ptxas)}) rejects this PTX for {target}, so contraction='sass' cannot read which "
                f"mul / add pairs it fuses (fix the PTX, or load it with contraction='none' or 'all'):\n{exc}"
            ) from exc
        try:
            lined_cubin = lined.result()
        except CompileError as exc:
            raise CompileError(f"ptxas rejects the PTX annotated with one .loc per instruction:\n{exc}") from exc
        annotated_fns, owned = _read(_disassemble(lined_cubin, True))
    if code_sections(plain_cubin) != code_sections(lined_cubin):  # the same bytes are the same instructions
        _compare(_read(_disassemble(plain_cubin, False))[0], annotated_fns, module)
    watched = _watched_ids(module.ir)
    verdicts: dict[int, list] = {}
    for ident, text in owned:
        kind = classify(text)
        if ident in watched and kind is not None:
            verdicts.setdefault(ident, []).append((kind, text))
    return verdicts


# -- decide ------------------------------------------------------------------------------------------------------


def fused_pairs(module, candidates: dict) -> dict:
    """The subset of ``candidates`` ({(function, add index): mul index}) that ptxas fused for ``module.arch``
    (the module docstring); ContractionUndecided where the SASS decides neither way, or shows an FMA of an
    unrounded mul / add / sub outside every candidate pair."""
    ids = {(fn, i): ident for ident, (fn, i, _ins) in enumerate(_instructions(module.ir), 1)}
    verdicts = sass_verdicts(module)
    adds_of: dict[tuple, int] = {}
    for (fn, _add), mul in candidates.items():
        adds_of[(fn, mul)] = adds_of.get((fn, mul), 0) + 1
    fused, problems = {}, []
    for (fn, add), mul in candidates.items():
        at_add = verdicts.get(ids[(fn, add)], [])
        at_mul = verdicts.get(ids[(fn, mul)], [])
        if approximate_division(module.ir.functions[fn].body[mul]):
            at_mul = [(k, t) for k, t in at_mul if not _scaling(t)]
        kinds_add = {k for k, _ in at_add}
        kinds_mul = {k for k, _ in at_mul}
        fma = "fma" in kinds_add or ("fma" in kinds_mul and adds_of[(fn, mul)] == 1)
        if fma and "mul" not in kinds_mul and "add" not in kinds_add:
            fused[(fn, add)] = mul
        elif not ("mul" in kinds_mul and "add" in kinds_add and "fma" not in kinds_add):
            problems.append(_describe(module, fn, mul, add, at_mul, at_add))
    paired = {ids[(fn, i)] for (fn, add), mul in candidates.items() for i in (add, mul)}
    for ident, seen in verdicts.items():
        if ident not in paired and any(k == "fma" for k, _ in seen):
            fn, i, ins = _by_id(module.ir, ident)
            if approximate_division(ins):
                continue  # a division's own sequence, not a fused add
            problems.append(
                f"{fn}: the {ins.opcode} at PTX line {ins.line} is in no candidate pair, yet ptxas made an FMA of it "
                "(a product that reaches its add through a mov / neg or another copy, which flashsim does not model): "
                + "; ".join(t for _, t in seen)
            )
    if problems:
        raise ContractionUndecided(
            f"the SASS ptxas makes for {module.arch} does not say how {len(problems)} unrounded mul / add pair(s) "
            "were contracted (load the PTX with contraction='none' to fuse no pair or 'all' to fuse every candidate, "
            "if you know which holds):\n  " + "\n  ".join(problems[:20]) + ("\n  ..." if len(problems) > 20 else "")
        )
    return fused


def _by_id(ir, ident: int):
    for k, item in enumerate(_instructions(ir), 1):
        if k == ident:
            return item
    raise KeyError(ident)


def _describe(module, fn, mul, add, at_mul, at_add) -> str:
    body = module.ir.functions[fn].body

    def seen(xs):
        return "; ".join(t for _, t in xs) or "nothing"

    return (
        f"{fn}: mul at PTX line {body[mul].line}, {body[add].opcode} at PTX line {body[add].line}: "
        f"SASS of the mul: {seen(at_mul)}; of the {body[add].opcode}: {seen(at_add)}"
    )
