"""The ``flashsim`` command: one subcommand per module in flashsim.commands.

Each command module defines ``add_arguments(parser)`` and ``run(args) -> int`` (the exit status)
and a module docstring whose first line is the help text. Only commands that exist are listed.

Exit status: 0 success; 1 the command ran and its check failed (a bit mismatch, a configuration that does not fit,
a proof that does not hold); 2 a user error; 130 interrupted. A user error is one line on stderr,
``flashsim <command>: <message>``, never a traceback: a bad argument (argparse's errors and the ValueErrors of
flashsim's checks), a missing or unreadable file, no GPU / driver / cuda-python (flashsim.errors.GPUError), an
optional dependency that is not installed (jax, matplotlib, torch, cuda-python), a problem too large for memory.
Anything else is a bug and keeps its traceback. FLASHSIM_TRACEBACK=1 shows the traceback of user errors too.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import GPUError
from .settings import show_tracebacks

# name -> module; a command is listed here only once its module does real work.
COMMANDS = {
    "emulate": "flashsim.commands.emulate",
    "verify": "flashsim.commands.verify",
    "bench": "flashsim.commands.bench",
    "budget": "flashsim.commands.budget",
    "prove": "flashsim.commands.prove",
    "calibrate": "flashsim.commands.calibrate",
    "ptx": "flashsim.commands.ptx",
    "triton": "flashsim.commands.triton",
}

USER_ERROR = 2
# optional dependencies (top-level module -> what to install); an ImportError of one of these is a user error
OPTIONAL = {
    "jax": "pip install 'flashsim[jax]'",
    "jaxlib": "pip install 'flashsim[jax]'",
    "matplotlib": "pip install 'flashsim[plot]'",
    "cuda": "pip install 'flashsim[gpu]'",
    "torch": "pip install torch",
    "cupy": "pip install cupy",
    "mmasim": "pip install mmasim",
    "triton": "pip install 'flashsim[triton]'",
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``flashsim emulate: argument --nq: invalid int value: 'x' (see --help)``."""

    def error(self, message):
        self.exit(USER_ERROR, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="flashsim", description=__import__("flashsim").__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        doc = (module.__doc__ or name).strip().splitlines()[0]
        p = sub.add_parser(
            name,
            help=doc,
            description=(module.__doc__ or doc).strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(_run=module.run, _parser=p)
    return parser


def _missing_optional(exc: BaseException) -> str | None:
    """The optional dependency whose absence caused ``exc`` (an ImportError, or one raised from it), else None."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ImportError):
            name = (getattr(exc, "name", None) or "").partition(".")[0]
            if name in OPTIONAL:
                return name
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message of a user error, or None if ``exc`` is a bug (which keeps its traceback)."""

    if isinstance(exc, ImportError):
        name = _missing_optional(exc)
        if name is None:
            return None
        text = str(exc)
        if "pip install" not in text:
            text = f"{text}: this needs {name}, which is not installed ({OPTIONAL[name]})"
    elif isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)):
        text = f"{exc.strerror}: {exc.filename}" if exc.filename and exc.strerror else str(exc)
    elif isinstance(exc, MemoryError):
        text = f"out of memory{': ' + str(exc) if str(exc) else ''} (try a smaller problem)"
    elif isinstance(exc, (ValueError, GPUError)):
        text = str(exc) or type(exc).__name__
    else:
        return None
    lines = text.strip().splitlines() or [type(exc).__name__]
    if len(lines) > 1:  # e.g. a compiler log: the first line, and how to see the rest
        return f"{lines[0]} ({len(lines) - 1} more lines: run with FLASHSIM_TRACEBACK=1 to see them)"
    return lines[0]


def main(argv=None) -> int:
    args, extra = build_parser().parse_known_args(argv)
    if extra:  # named by the subcommand's parser: "flashsim budget: unrecognized arguments: ..."
        args._parser.error(f"unrecognized arguments: {' '.join(extra)}")
    prefix = f"flashsim {args.command}: "
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print(f"{prefix}interrupted", file=sys.stderr)
        return 130
    except SystemExit as e:  # a command that exits with a message: the same one-line form
        if e.code is None or isinstance(e.code, int):
            raise
        text = str(e.code).strip().splitlines() or [""]
        print(text[0] if text[0].startswith("flashsim") else prefix + text[0], file=sys.stderr)
        return USER_ERROR
    except Exception as e:
        message = user_error_message(e)
        if message is None or show_tracebacks():
            raise
        print(prefix + message, file=sys.stderr)
        return USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
