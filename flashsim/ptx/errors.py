"""Errors of the PTX front half: text that is not PTX, and a kernel name that names no kernel."""

from __future__ import annotations


class PTXSyntaxError(ValueError):
    """PTX text the parser does not accept. Carries ``line`` and ``column`` (1-based), the ``source_line`` and the
    bare ``reason``; its message shows all of them with a caret under the column."""

    def __init__(self, reason: str, line: int, column: int, source_line: str):
        self.reason = reason
        self.line = line
        self.column = column
        self.source_line = source_line
        shown = source_line.expandtabs(1)
        super().__init__(f"PTX line {line}, column {column}: {reason}\n    {shown}\n    {' ' * (column - 1)}^")


class UnknownKernel(ValueError, LookupError):
    """A kernel name that matches no ``.entry`` of a module, or matches several by its demangled name."""
