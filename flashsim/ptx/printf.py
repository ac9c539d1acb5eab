"""The device runtime's ``vprintf(format, args)``: CUDA's ``printf`` as the simulator runs it.

NVCC lowers ``printf(fmt, ...)`` to a call of ``vprintf`` with two generic pointers: the format string (usually in
the module's .global data) and a buffer in the thread's local memory holding the arguments, each at an offset
aligned to its size (a float is promoted to double, 8 bytes; ``%s`` and ``%p`` take an 8-byte pointer). The
simulator reads both through the launch's memory (so a bad pointer is a memory error like any other), formats the
line as C's printf would and appends it to ``Report.printf``, lanes in thread order. ``vprintf`` returns the
number of arguments it consumed, as the CUDA runtime documents, or -1 for a format it cannot parse (an unknown
conversion), written to the call's return value.
"""

from __future__ import annotations

import re

import numpy as np

__all__ = ["vprintf", "format_line"]

MAX_STRING = 4096  # a %s or a format string longer than this is an error, not an endless read
_SPEC = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGaAcspn%])")


def _read_u64(mem, space, addr: int, thread: int) -> int:
    raw = mem.load(space, np.array([addr], np.uint64), 8, np.array([thread]))
    return int(raw.view(np.uint64)[0, 0])


def _read_string(mem, addr: int, thread: int) -> str:
    """The NUL-terminated string at generic ``addr`` (read in 16-byte steps where aligned, byte by byte before)."""
    out = bytearray()
    threads = np.array([thread])
    while len(out) < MAX_STRING:
        step = 1 if (addr + len(out)) % 16 else 16
        try:
            chunk = mem.load(None, np.array([addr + len(out)], np.uint64), step, threads)[0].tobytes()
        except Exception:
            if step == 1:
                raise
            step = 1
            chunk = mem.load(None, np.array([addr + len(out)], np.uint64), 1, threads)[0].tobytes()
        end = chunk.find(b"\0")
        if end >= 0:
            out += chunk[:end]
            return out.decode("utf-8", errors="replace")
        out += chunk
    raise ValueError(f"a printf string of more than {MAX_STRING} bytes (no terminating NUL)")


def format_line(fmt: str, fetch) -> tuple[str, int]:
    """``fmt`` formatted with the arguments ``fetch(size, kind)`` returns in order (kind "int", "uint", "float",
    "str", "ptr", "char"); (text, arguments consumed), or (text so far, -1) at a conversion C's printf lacks."""
    out, pos, used = [], 0, 0
    for m in _SPEC.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        flags, width, prec, length, conv = m.groups()
        if conv == "%":
            out.append("%")
            continue
        if width == "*":
            width, used = str(fetch(4, "int")), used + 1
        if prec == "*":
            prec, used = str(fetch(4, "int")), used + 1
        spec = "%" + flags + (width or "") + (f".{prec}" if prec is not None else "")
        wide = length in ("l", "ll", "z", "j", "t")
        if conv in "di":
            value = fetch(8 if wide else 4, "int")
            if length == "h":
                value = np.int16(value & 0xFFFF).item()
            elif length == "hh":
                value = np.int8(value & 0xFF).item()
            out.append((spec + "d") % value)
        elif conv in "ouxX":
            value = fetch(8 if wide else 4, "uint")
            if length == "h":
                value &= 0xFFFF
            elif length == "hh":
                value &= 0xFF
            out.append((spec + conv) % value)
        elif conv in "eEfFgG":
            out.append(_format_float(spec, conv, fetch(8, "float")))
        elif conv in "aA":
            text = float(fetch(8, "float")).hex()
            out.append(text.upper() if conv == "A" else text)
        elif conv == "c":
            out.append((spec + "c") % chr(fetch(4, "uint") & 0xFF))
        elif conv == "s":
            out.append((spec + "s") % fetch(8, "str"))
        elif conv == "p":
            out.append((spec + "s") % hex(fetch(8, "ptr")))
        else:  # %n: writes through a pointer, which CUDA's printf does not support either
            return "".join(out), -1
        used += 1
    out.append(fmt[pos:])
    return "".join(out), used


def _format_float(spec: str, conv: str, value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):  # C prints nan / inf (lower case for e f g)
        text = "nan" if value != value else ("inf" if value > 0 else "-inf")
        if conv.isupper():
            text = text.upper()
        width = re.match(r"%[-+ #0]*(\d*)", spec).group(1)
        if "+" in spec and not text.startswith("-"):
            text = "+" + text
        return text.rjust(int(width)) if width and "-" not in spec else text.ljust(int(width or 0))
    return (spec + conv) % value


def vprintf(g, fmt_slot_offset: int, args_slot_offset: int, ret_offset: int | None) -> None:
    """Run vprintf for the lanes of group ``g``: the frame offsets of its two pointer arguments and of its return
    value (None when the call discards it)."""
    m = g.m
    mem = m.mem
    lines = m.state.setdefault("printf", [])
    results = []
    for t in g.lanes().tolist():  # output is per lane by nature: one line each, in thread order
        fmt_ptr = int(mem.frame[t, fmt_slot_offset : fmt_slot_offset + 8].view(np.uint64)[0])
        arg_ptr = int(mem.frame[t, args_slot_offset : args_slot_offset + 8].view(np.uint64)[0])
        cursor = [arg_ptr]

        def fetch(size, kind, t=t, cursor=cursor):
            at = -(-cursor[0] // size) * size
            raw = mem.load(None, np.array([at], np.uint64), size, np.array([t]))[0]
            cursor[0] = at + size
            if kind == "float":
                return float(raw.view(np.float64)[0])
            bits = int.from_bytes(raw.tobytes(), "little")
            if kind == "int" and bits >= 1 << (8 * size - 1):
                bits -= 1 << (8 * size)
            if kind == "str":
                return _read_string(mem, bits, t)
            return bits

        text, used = format_line(_read_string(mem, fmt_ptr, t), fetch)
        lines.append(text)
        results.append(used)
    if ret_offset is not None:
        values = np.array(results, np.int32).view(np.uint8).reshape(-1, 4)
        mem.frame[g.lanes(), ret_offset : ret_offset + 4] = values
    m.progress += 1
