"""The scripts of tools/ (not a package) as modules, for the tests of their pure parts."""
from __future__ import annotations

import importlib.util
import pathlib

TOOLS = pathlib.Path(__file__).resolve().parent.parent / "tools"


def load_tool(name: str):
    """The module tools/<name>.py, imported from its file."""
    spec = importlib.util.spec_from_file_location(name, TOOLS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
