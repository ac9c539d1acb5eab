"""The package's structure as the design states it: an import graph without a cycle (every import counted, those
inside functions too: a lazy import is still a dependency), flashsim's own environment variables read in
flashsim/settings.py alone, and the folders a reader looks for present."""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "flashsim"


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """The flashsim modules ``name`` imports (a ``from pkg import x`` counts x where x is a module, else pkg)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in MODULES else target)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in MODULES and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_parents(name: str) -> set[str]:
    """A module's enclosing packages: importing it runs their __init__, an edge the graph must not count as a cycle
    through the package's own re-exports."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def test_the_import_graph_has_no_cycle():
    graph = {m: _imports(m, p) - _package_parents(m) for m, p in MODULES.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _env_names(path: pathlib.Path) -> list[str]:
    """String constants naming a FLASHSIM_ variable outside docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and id(n) not in docstrings
        and n.value.startswith("FLASHSIM_")
    ]


def test_only_settings_reads_flashsim_variables():
    readers = {m: _env_names(p) for m, p in MODULES.items() if m != "flashsim.settings"}
    assert {m: v for m, v in readers.items() if v} == {}
    assert _env_names(MODULES["flashsim.settings"])  # the check sees the names where they are


@pytest.mark.parametrize(
    "module",
    [
        "flashsim.numerics.tensorcore",  # the tensor-core model
        "flashsim.numerics.sfu",  # the SFU models
        "flashsim.layout",  # the fragment and ldmatrix layouts
        "flashsim.emulator.kernel_program",  # the emulated program
        "flashsim.ptx.parser",  # the PTX simulator: parser,
        "flashsim.ptx.isa",  # instruction table,
        "flashsim.ptx.machine",  # machine,
        "flashsim.ptx.launch",  # front-end
        "flashsim.prove",  # the budget and softmax proofs
        "flashsim.gpu.runtime",  # the GPU runner
    ],
)
def test_the_architecture_is_where_a_reader_looks(module):
    assert module in MODULES
