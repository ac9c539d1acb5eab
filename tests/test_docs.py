"""The documentation stays true: docs/ builds with ``mkdocs build --strict`` (mkdocs.yml makes a broken link, a
missing anchor or a page left out of the nav a warning, and --strict makes warnings errors), the Python examples of
its pages run, and every repository path the README, the pages and the results name exists (a figure's log above
all: a figure is only as good as the log it points to).
"""

from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest
from test_readme import EXTRA_MARK, GPU_MARK, extra_missing, python_blocks  # tests/test_readme.py: the same rules

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# the files whose paths are checked: the README, the pages, and the index files of results and tools
CITING = [ROOT / "README.md", *PAGES, ROOT / "benchmarks/RESULTS.md", ROOT / "benchmarks/experiments/README.md"]
CITING.append(ROOT / "tools/README.md")
TOP = ("benchmarks", "tests", "tools", "kernel", "proofs", "flashsim", "docs")
# a path: one of the top folders (or logs/, experiments/ under benchmarks/), then name characters and slashes
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP) + r"|logs|experiments)/[\w./-]*)")
PATTERN_NEXT = "*{<"  # a path followed by one of these is a pattern (tests/test_layout_*.py), not a file


def cited_paths(text: str) -> list[str]:
    """Repository paths named in ``text``, trailing punctuation dropped, patterns left out."""
    out = []
    for m in PATH.finditer(text):
        if m.end() < len(text) and text[m.end()] in PATTERN_NEXT:
            continue
        out.append(m.group(1).rstrip(".,:;"))
    return out


def resolve(path: str) -> pathlib.Path:
    """logs/... and experiments/... are short for benchmarks/logs/... and benchmarks/experiments/...."""
    return ROOT / ("benchmarks/" + path if path.startswith(("logs/", "experiments/")) else path)


def test_cited_paths_are_found_and_patterns_left_out():
    text = "see `benchmarks/logs/2026-12-01u/bench.txt`, logs/x/y.txt; tests/test_layout_*.py and logs/<date>/"
    assert cited_paths(text) == ["benchmarks/logs/2026-12-01u/bench.txt", "logs/x/y.txt"]
    assert resolve("logs/x/y.txt") == ROOT / "benchmarks/logs/x/y.txt"


@pytest.mark.parametrize("doc", CITING, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_path_exists(doc):
    missing = sorted({p for p in cited_paths(doc.read_text()) if not resolve(p).exists()})
    assert not missing, f"{doc.relative_to(ROOT)} names paths that do not exist: {missing}"


EXPERIMENTS = ROOT / "benchmarks/experiments"
RELATIVE = re.compile(r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)*\.(?:txt|json|py|sh|patch|csv|gz))(?![\w*])")


def index_rows() -> list[tuple[str, str]]:
    """(folder, rest of the row) of every folder row of benchmarks/experiments/README.md's table."""
    rows = []
    for line in (EXPERIMENTS / "README.md").read_text().splitlines():
        m = re.match(r"\| ([\w-]+)/ \|(.*)", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    return rows


def test_the_experiments_index_names_every_folder_once():
    listed = [folder for folder, _ in index_rows()]
    folders = sorted(p.name for p in EXPERIMENTS.iterdir() if p.is_dir())
    assert sorted(listed) == folders


def test_the_experiments_index_names_logs_that_exist():
    """A row's relative file names are its folder's; a bare name after one with a folder is that folder's too
    (``2026-12-01/a.txt, b.txt``); paths from the repository root are checked by test_every_cited_path_exists."""
    missing = []
    for folder, row in index_rows():
        base = EXPERIMENTS / folder
        last = base
        for m in RELATIVE.finditer(row):
            name = m.group(1)
            if name.startswith(("benchmarks/", "tools/", "tests/")):  # from the root: checked above
                last = (ROOT / name).parent
                continue
            found = [p for p in (base / name, last / name) if p.exists()]
            if not found:
                missing.append(f"{folder}/: {name}")
                continue
            last = found[0].parent
    assert not missing, f"benchmarks/experiments/README.md names files that do not exist: {missing}"


def test_docs_build_strict(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip('mkdocs is not installed (pip install -e ".[docs]")')
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]
    done = subprocess.run(
        [*cmd, "--site-dir", str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()


def _examples():
    out = []
    for page in PAGES:
        for line, code in python_blocks(page.read_text()):
            first = code.splitlines()[0].strip()
            marks = [pytest.mark.gpu] if first == GPU_MARK else []
            m = EXTRA_MARK.match(first)
            why = extra_missing(m[1]) if m else None
            marks += [pytest.mark.skip(reason=f"the example needs flashsim[{m[1]}]: {why}")] if why else []
            out.append(pytest.param(code, id=f"{page.name}:{line}", marks=marks))
    return out


@pytest.mark.parametrize("code", _examples())
def test_docs_example_runs(code, tmp_path):
    script = tmp_path / "docs_example.py"  # a file, as a user saves it: @triton.jit reads its function's source
    script.write_text(code)
    done = subprocess.run([sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
