"""The emulator and the kernel must not drift apart: every GPU capture in tests/data records the fingerprint of the
build that made it (flashsim.provenance: sha256 of the kernel source and of every file it includes from kernel/,
and the complete define set of the build), and this test recomputes it from the current sources and the build's
own define function. A capture made from another source or with other defines, or with no record at all, is stale:
the CPU tests that replay it (test_emulator_silicon, test_mma_silicon, test_layout_silicon, test_sfu) would be
checking the emulator against a kernel that no longer exists. Re-capture on the H200 (tools/device_round.sh
captures, then tools/collect_device_round.sh), never edit the record by hand.

No GPU and no compile needed for the drift check itself; the build-equality tests compile with NVRTC where it is
installed (the test extras) and mock the GPU.
"""

from __future__ import annotations

import importlib
import json
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from flashsim import KernelConfig, provenance

DATA = pathlib.Path(__file__).parent / "data"
ROUND = "OUT=<dir> tools/device_round.sh captures on the H200, then tools/collect_device_round.sh <dir> here"

# capture file (glob under tests/data) -> (kernel, where the record is, how to re-capture that file alone on the H200)
CAPTURES = {
    "attn_sm90_*.npz": (
        "flash_fwd",
        "per case",
        "PYTHONPATH=. python3 -m flashsim.cli verify --replay tests/data/{name} --save-cases tests/data/{name}",
    ),
    "mma_sm90.npz": ("mma_capture", "npz", "PYTHONPATH=. python3 -m flashsim.gpu.capture.mma --out tests/data"),
    "mma_k32_sm90.npz": (
        "mma_k32_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.mma_k32 --out tests/data",
    ),
    "mma_sm90_summary.json": (
        "mma_capture",
        "json",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.mma --out tests/data",
    ),
    "layout_sm90.npz": (
        "layout_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.layout --out tests/data",
    ),
    "sfu_sample_sm90.npz": (
        "sfu_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.sfu --out /tmp/sfu && "
        "cp /tmp/sfu/sfu_sample_sm90.npz tests/data/",
    ),
}
NOT_CAPTURES: tuple[str, ...] = ()  # data files in tests/data that no GPU made (none today)


def _entry(path: pathlib.Path):
    for pattern, entry in CAPTURES.items():
        if path.match(pattern):
            return entry
    return None


def _load(text):
    try:
        return json.loads(text) if text else None
    except (TypeError, ValueError):
        return None


def _ranges(indices: list[int]) -> str:
    """[0, 1, 2, 5] -> "c0-c2, c5"."""
    out, start = [], None
    for i, x in enumerate(indices):
        if start is None:
            start = x
        if i + 1 == len(indices) or indices[i + 1] != x + 1:
            out.append(f"c{start}" if start == x else f"c{start}-c{x}")
            start = None
    return ", ".join(out)


def staleness(path: pathlib.Path) -> list[str]:
    """Why the capture ``path`` is stale, one line per reason (per group of cases for attention files); []: current."""
    kernel, where, _ = _entry(path)
    if where == "json":
        return [
            f"{r}"
            for r in provenance.compare(json.loads(path.read_text()).get("provenance"), provenance.fingerprint(kernel))
        ]
    with np.load(path, allow_pickle=False) as z:
        if where == "npz":
            stored = _load(str(z["provenance"])) if "provenance" in z.files else None
            return provenance.compare(stored, provenance.fingerprint(kernel))
        metas = {int(k[1:-5]): json.loads(str(z[k])) for k in z.files if k.endswith("_meta")}
    if not metas:
        return ["no cases in the file"]
    groups: dict[str, list[int]] = {}
    current: dict[str, dict] = {}
    for i in sorted(metas):
        cfg = KernelConfig(**metas[i]["config"])
        key = json.dumps(metas[i]["config"], sort_keys=True)
        if key not in current:
            current[key] = provenance.fingerprint(kernel, cfg)
        for reason in provenance.compare(metas[i].get("provenance"), current[key]):
            groups.setdefault(reason, []).append(i)
    return [f"cases {_ranges(ids)} ({len(ids)} of {len(metas)}): {reason}" for reason, ids in groups.items()]


def test_every_capture_matches_the_current_kernel_sources_and_defines():
    files = sorted(p for p in DATA.iterdir() if p.suffix in (".npz", ".json") and p.name not in NOT_CAPTURES)
    assert files, "tests/data holds no captures"
    problems = []
    for path in files:
        entry = _entry(path)
        if entry is None:
            problems.append(
                f"{path.name}: not a known capture: add it to CAPTURES in tests/test_drift.py (kernel, "
                "where its provenance is, the command that re-captures it) or to NOT_CAPTURES"
            )
            continue
        reasons = staleness(path)
        if reasons:
            problems.append(
                f"{path.name} is stale:\n"
                + "".join(f"      {r}\n" for r in reasons)
                + f"      re-capture: {entry[2].format(name=path.name)}"
            )
    if problems:
        pytest.fail(
            f"{len(problems)} of {len(files)} files in tests/data no longer describe the current kernel build "
            "(source or defines changed since the capture, or no provenance recorded):\n  "
            + "\n  ".join(problems)
            + f"\nall at once: {ROUND}",
            pytrace=False,
        )


# ---- the fingerprint ----------------------------------------------------------------------------


@pytest.fixture
def kernel_copy(tmp_path):
    """A copy of kernel/ to edit."""
    from flashsim.gpu.build import kernel_dir

    root = tmp_path / "kernel"
    shutil.copytree(kernel_dir(), root)
    return root


def test_a_new_define_in_the_source_makes_the_fingerprint_stale(kernel_copy):
    cfg = KernelConfig.default("sm_90")
    before = provenance.fingerprint("flash_fwd", cfg, root=kernel_copy)
    assert before == provenance.fingerprint("flash_fwd", cfg)  # the copy hashes as the original
    src = kernel_copy / "flash_fwd.cu"
    src.write_bytes(src.read_bytes() + b"#define FS_SOMETHING 1\n")
    after = provenance.fingerprint("flash_fwd", cfg, root=kernel_copy)
    assert after["fingerprint"] != before["fingerprint"] and after["defines"] == before["defines"]
    assert provenance.compare(before, after) == ["source changed: kernel/flash_fwd.cu (edited)"]


def test_defines_enter_the_fingerprint():
    a = provenance.fingerprint("flash_fwd", KernelConfig.default("sm_90", head_dim=64))
    b = provenance.fingerprint("flash_fwd", KernelConfig.default("sm_90", head_dim=128))
    assert a["source_sha256"] == b["source_sha256"] and a["fingerprint"] != b["fingerprint"]
    assert provenance.compare(a, b)[0].startswith("defines changed: FS_EXPECTED_SMEM ")
    extra = provenance.source_fingerprint("flash_fwd", {**a["defines"], "FS_NEW": 1})
    assert provenance.compare(a, extra) == ["defines changed: +FS_NEW=1"]
    assert provenance.compare(None, a) == ["no provenance recorded (captured before provenance existed)"]
    assert set(a["defines"]) >= {"FS_HEAD_DIM", "FS_EXPECTED_SMEM", "FS_LOG_LN2"}


def test_included_files_are_part_of_the_source_hash(kernel_copy):
    src = kernel_copy / "capture" / "mma.cu"
    (kernel_copy / "common.cuh").write_text('#pragma once\n#include "capture/helpers.cuh"\n')
    (kernel_copy / "capture" / "helpers.cuh").write_text("// helpers\n")
    src.write_text(
        '#include "../common.cuh"\n#include <cuda_fp16.h>\n// #include "commented_out.cuh"\n' + src.read_text()
    )
    rec = provenance.fingerprint("mma_capture", root=kernel_copy)
    assert list(rec["files"]) == ["kernel/capture/helpers.cuh", "kernel/capture/mma.cu", "kernel/common.cuh"]
    (kernel_copy / "capture" / "helpers.cuh").write_text("// helpers, edited\n")
    again = provenance.fingerprint("mma_capture", root=kernel_copy)
    assert provenance.compare(rec, again) == ["source changed: kernel/capture/helpers.cuh (edited)"]


def test_kernel_names_and_paths():
    assert provenance.fingerprint("kernel/capture/sfu.cu")["kernel"] == "kernel/capture/sfu.cu"
    assert provenance.fingerprint("capture/layout.cu")["defines"] == provenance.build_defines("layout_capture")
    with pytest.raises(ValueError, match="unknown kernel"):
        provenance.build_defines("nope.cu")
    with pytest.raises(ValueError, match="needs the KernelConfig"):
        provenance.build_defines("flash_fwd")


def test_the_fingerprint_needs_no_cuda_python():
    code = (
        "import sys, flashsim.provenance as p, flashsim\n"
        "for k in p.KERNELS: p.fingerprint(k, flashsim.KernelConfig() if k in p.NEEDS_CONFIG else None)\n"
        "bad = sorted(m for m in sys.modules if m == 'cuda' or m.startswith('cuda.'))\n"
        "assert not bad, bad\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_the_sfu_capture_records_its_provenance(tmp_path):
    """The SFU tool (numpy stand-in for the GPU) writes the provenance into the sample file, and into the tables'
    metadata through its summary (the layout and mma tools: tests/test_layout_silicon.py, tests/test_mma_silicon.py)."""
    from flashsim.gpu.capture import sfu as cap
    from flashsim.numerics import sfu

    assert cap.main(["--out", str(tmp_path), "--fake", "--random-scale", "0.005"]) == 0
    current = provenance.fingerprint(cap.PROVENANCE_NAME)
    with np.load(tmp_path / "sfu_sample_sm90.npz") as z:
        assert json.loads(str(z["provenance"])) == current == json.loads(str(z["summary"]))["provenance"]
    assert sfu.read_tables(tmp_path / "sfu_tables_sm90.npz").meta["provenance"] == current


# ---- the builds pass exactly the fingerprinted defines -------------------------------------------


def _launch_module():
    for name in ("flashsim.gpu.launch", "flashsim.gpu.attention"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "build_kernel"):
            return mod
    pytest.fail("neither flashsim.gpu.launch nor flashsim.gpu.attention has build_kernel")


class _Device:
    name = "mock"

    class properties:
        multiprocessor_count = 1


@pytest.mark.parametrize("kernel", list(provenance.KERNELS))
def test_every_build_passes_the_fingerprinted_defines(kernel, monkeypatch):
    """The NVRTC call of each build (flash_fwd and the four capture tools, GPU mocked, compile intercepted) gets
    exactly provenance.build_defines: the fingerprint hashes what the kernel was built with."""
    from flashsim.gpu import build
    from flashsim.gpu import runtime as rt
    from flashsim.gpu.capture import layout, mma, mma_k32, sfu

    launch = _launch_module()  # imported before compile_cuda is patched (it binds the name at import)
    seen = []

    def fake_compile(source, **kw):
        seen.append(dict(kw.get("defines") or {}))
        return object()

    monkeypatch.setattr(build, "compile_cuda", fake_compile)
    monkeypatch.setattr(rt, "require_gpu", lambda: _Device())
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "load", lambda b, name: name)
    cfg = KernelConfig.default("sm_90", head_dim=64, pv_accum="f16", causal=True)
    if kernel in ("flash_fwd", "quantize"):
        monkeypatch.setattr(launch, "compile_cuda", fake_compile)
        if kernel == "quantize":
            cfg = cfg.with_(quant="int8", dtype="bf16", pv_accum="f32", head_dim=96)
        (launch.build_kernel if kernel == "flash_fwd" else launch.build_quantize)(cfg, "sm_90")
        want = provenance.build_defines(kernel, cfg)
    else:
        {
            "mma_capture": mma.GpuRunner,
            "layout_capture": layout.GpuDevice,
            "sfu_capture": sfu.GpuDevice,
            "mma_k32_capture": mma_k32.GpuRunner,
        }[kernel]()
        want = provenance.build_defines(kernel)
    assert seen == [want]


def test_an_attention_record_covers_the_quantization_pass(tmp_path):
    """flash_fwd's record lists kernel/quantize.cu (quant="int8" results come from both), so an edit of the
    quantization pass makes every attention capture stale; its build defines are a subset of flash_fwd's."""
    import shutil as sh

    root = tmp_path / "kernel"
    sh.copytree(provenance._kernel_root(), root)
    cfg = KernelConfig.default("sm_90", head_dim=128, quant="int8")
    before = provenance.fingerprint("flash_fwd", cfg, root=root)
    assert "kernel/quantize.cu" in before["files"]
    assert provenance.build_defines("quantize", cfg).items() <= before["defines"].items()
    (root / "quantize.cu").write_text((root / "quantize.cu").read_text() + "\n// edited\n")
    why = provenance.compare(before, provenance.fingerprint("flash_fwd", cfg, root=root))
    assert why == ["source changed: kernel/quantize.cu (edited)"]


def test_the_compiled_flash_fwd_records_the_fingerprinted_defines():
    """The real NVRTC build (no GPU needed) of one configuration: Build.defines are the fingerprint's defines."""
    from flashsim.errors import CompileError, GPUError

    cfg = KernelConfig.default("sm_90", head_dim=64)
    try:
        b = _launch_module().build_kernel(cfg, "sm_90")
    except GPUError as exc:
        if isinstance(exc, CompileError):
            raise
        pytest.skip(f"NVRTC not available: {exc}")
    assert dict(b.defines) == provenance.fingerprint("flash_fwd", cfg)["defines"]
