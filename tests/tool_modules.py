"""The scripts of tools/ and benchmarks/ (not packages) as modules, for the tests of their pure parts."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"


def load_tool(name: str, folder: pathlib.Path = TOOLS):
    """The module <folder>/<name>.py (default tools/), imported from its file."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod
