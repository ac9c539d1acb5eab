"""The README's Python examples run as they stand: every ```python block of README.md, saved as a file, in a fresh
interpreter.

A block whose first line is ``# needs a GPU`` carries the ``gpu`` mark, so tests/conftest.py skips it, with the
reason, wherever flashsim.gpu.runtime.gpu_available() says no CUDA GPU with cuda-python can be used (and
``pytest -m gpu`` runs it on the GPU machine). A block whose first line names an extra (``# needs flashsim[ptx]``,
``# needs flashsim[triton]``) is skipped, with the reason, where that extra is not installed: NVRTC, ptxas and
nvdisasm for ``ptx``; those and Triton for ``triton``. Each block runs in a temporary directory, so nothing it
writes lands in the checkout.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
GPU_MARK = "# needs a GPU"
EXTRA_MARK = re.compile(r"^# needs flashsim\[(\w+)\]")
FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TIMEOUT_S = 600  # a GPU block compiles kernels (and torch.compile's graph) on its first call


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number of the opening fence, code) of every ```python block of ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in FENCE.finditer(text)]


def extra_missing(extra: str) -> str | None:
    """Why the ``extra`` of pyproject.toml is not installed here, or None where it is."""
    import importlib.util

    from conftest import nvrtc_status  # tests/conftest.py

    from flashsim.gpu.build import cuda_tools

    ok, reason = nvrtc_status()
    if not ok:
        return reason
    for tool in ("ptxas", "nvdisasm"):
        if not cuda_tools(tool):
            return f"needs {tool}"
    if extra == "triton" and importlib.util.find_spec("triton") is None:
        return "needs triton"
    return None


def _params():
    out = []
    for line, code in python_blocks(README.read_text()):
        first = code.splitlines()[0].strip()
        marks = [pytest.mark.gpu] if first == GPU_MARK else []
        m = EXTRA_MARK.match(first)
        if m:
            why = extra_missing(m[1])
            marks += [pytest.mark.skip(reason=f"the README block needs flashsim[{m[1]}]: {why}")] if why else []
        out.append(pytest.param(code, id=f"line{line}", marks=marks))
    return out


@pytest.mark.parametrize("code", _params())
def test_readme_example_runs(code, tmp_path):
    script = tmp_path / "readme_example.py"  # a file, as a user saves it: @triton.jit reads its function's source
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    assert done.returncode == 0, f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def test_python_blocks_are_found_with_their_marks():
    text = "intro\n```python\nprint(1)\n```\n\n```\nnot python\n```\n```python\n# needs a GPU\nprint(2)\n```\n"
    blocks = python_blocks(text)
    assert blocks == [(2, "print(1)\n"), (9, "# needs a GPU\nprint(2)\n")]
    assert [code.splitlines()[0] == GPU_MARK for _, code in blocks] == [False, True]


def test_the_readme_has_an_example_for_each_job():
    """Emulate against the reference, budget for sm_120, prove, verify on a GPU, the torch op: each in a block."""
    blocks = [code for _, code in python_blocks(README.read_text())]
    wanted = {
        "emulate and diff": ("flashsim.attention(", "flashsim.reference_attention("),
        "budget for sm_120": ("flashsim.budget(", "flashsim.KernelConfig", '"sm_120"'),
        "prove": ("flashsim.prove",),
        "verify on a GPU": (GPU_MARK, "flashsim.gpu.attention(", "flashsim.attention("),
        "the torch op": (GPU_MARK, "torch.ops.flashsim.attention(", "torch.compile("),
    }
    for job, needles in wanted.items():
        assert any(all(n in code for n in needles) for code in blocks), f"no README example for: {job}"


def test_the_readme_starts_with_the_two_commands():
    first = README.read_text().split("```", 2)[1]
    assert first == (
        '\npip install -e . && flashsim emulate\npip install -e ".[test]" && python -m pytest -n auto --dist loadfile\n'
    )
