"""The ``flashsim`` command: one subcommand per module in flashsim.commands.

Each command module defines ``add_arguments(parser)`` and ``run(args) -> int`` (the exit status)
and a module docstring whose first line is the help text. Only commands that exist are listed.
A command that needs a GPU or the gpu extra and finds none (flashsim.gpu.errors.GPUError) ends with the
reason as a one-line error, no traceback, and exit status 1.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> module; a command is listed here only once its module does real work.
COMMANDS = {
    "emulate": "flashsim.commands.emulate",
    "verify": "flashsim.commands.verify",
    "bench": "flashsim.commands.bench",
    "budget": "flashsim.commands.budget",
    "prove": "flashsim.commands.prove",
    "calibrate": "flashsim.commands.calibrate",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flashsim", description=__import__("flashsim").__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        doc = (module.__doc__ or name).strip().splitlines()[0]
        p = sub.add_parser(name, help=doc, description=(module.__doc__ or doc).strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv=None) -> int:
    from .gpu.errors import GPUError
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except GPUError as e:  # no GPU, no driver, no cuda-python, a failed build: the reason, not a traceback
        print(f"flashsim {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
