"""The emulator and the kernel must not drift apart: every GPU capture in tests/data carries the compiled fingerprint
of the build that made it (flashsim.provenance.compiled_fingerprint: sha256 of the PTX that the pinned NVRTC emits
for that kernel, configuration and arch), and this test compiles today's kernel/ to PTX for every captured
configuration and compares. A capture whose PTX changed is stale: the CPU tests that replay it
(test_emulator_silicon, test_mma_silicon, test_layout_silicon, test_sfu) would be checking the emulator against a
kernel that no longer exists. A comment or whitespace edit of kernel/ changes no PTX and so no verdict. Re-capture
on the H200 (tools/device_round.sh captures, then tools/collect_device_round.sh, which stamps the new captures with
tools/stamp_captures.py), never edit a record by hand.

The mechanism is tested without a GPU on a copy of kernel/ and on small capture files made here: a comment leaves
every fingerprint equal, a changed constant changes those of the configurations that compile it, and the drift
report names the stale files and cases. The source record (file hashes and defines) is what the GPU round stores
and what the stamp tool checks against the working tree before it stamps.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import pathlib
import shutil
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest
from tool_modules import load_tool

from flashsim import KernelConfig, provenance
from flashsim.gpu import build

stamp_tool = load_tool("stamp_captures")
DATA = stamp_tool.DATA
needs_nvrtc = pytest.mark.nvrtc


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


def _describe(record) -> str:
    return record.config.describe() if record.config is not None else record.kernel


def nvrtc_mismatch(files) -> str | None:
    """Why the captures ``files`` cannot be checked under the NVRTC loaded here (another release than theirs);
    None when they can."""
    stamped = {r.provenance["compiled"]["nvrtc"] for f in files for r in stamp_tool.records(f) if _stamped(r)}
    have = provenance.nvrtc_version()
    if stamped and stamped != {have}:
        pin = stamp_tool.pinned_nvrtc()
        return (
            f"the captures' compiled fingerprints were made with NVRTC {', '.join(sorted(stamped))}, this process "
            f"loads NVRTC {have}: the PTX of another release may differ, so drift cannot be decided here. Install "
            f"the pinned one: pip install nvidia-cuda-nvrtc=={pin} (or pip install -c .ci/constraints.txt "
            f"nvidia-cuda-nvrtc), as CI does"
        )
    return None


def _stamped(record) -> bool:
    return bool(record.provenance) and bool(record.provenance.get("compiled"))


def drift_report(files, *, root=None) -> list[str]:
    """One paragraph per capture of ``files`` that does not describe today's build (``root``: another kernel/
    folder): which cases, why (the PTX of which source changed), and the command that re-captures the file."""
    per_file = {pathlib.Path(f): stamp_tool.records(f) for f in files}
    builds = [r.build for recs in per_file.values() for r in recs if _stamped(r)]
    current = iter(provenance.compiled_fingerprints(builds, root=root, workers=os.cpu_count() or 1))
    problems = []
    for path, recs in per_file.items():
        groups: dict[str, list] = {}
        for r in recs:
            if not r.provenance:
                reason = "no provenance recorded"
            elif not _stamped(r):
                reason = "no compiled fingerprint recorded: run tools/stamp_captures.py (when its sources are today's)"
            else:
                reason = "; ".join(provenance.compare_compiled(r.provenance["compiled"], next(current)))
            if reason:
                groups.setdefault(reason, []).append(r)
        if not groups:
            continue
        lines = []
        for reason, rs in groups.items():
            if rs[0].case is None:
                lines.append(reason)
                continue
            configs = sorted({_describe(r) for r in rs})
            lines.append(
                f"cases {_ranges([r.case for r in rs])} ({len(rs)} of {len(recs)}; {len(configs)} configuration(s): "
                f"{', '.join(configs[:4])}{', ...' if len(configs) > 4 else ''}): {reason}"
            )
        problems.append(
            f"{path.name} is stale:\n"
            + "".join(f"      {line}\n" for line in lines)
            + f"      re-capture: {stamp_tool.entry(path)[2].format(name=path.name)}"
        )
    return problems


# ---- the captures in tests/data --------------------------------------------------------------------------


def test_every_capture_is_known_and_stamped_with_the_pinned_nvrtc():
    """No NVRTC needed: every data file is a known capture, each record holds the source record the GPU round
    wrote and a compiled fingerprint made with the NVRTC that CI pins (.ci/constraints.txt)."""
    files = stamp_tool.capture_files()
    assert files, "tests/data holds no captures"
    pin = stamp_tool.pinned_nvrtc()
    assert pin, "the NVRTC pin (nvidia-cuda-nvrtc==...) is missing from .ci/constraints.txt"
    problems = []
    for path in files:
        if stamp_tool.entry(path) is None:
            problems.append(
                f"{path.name}: not a known capture: add it to CAPTURES in tools/stamp_captures.py (kernel, where its "
                "provenance is, the command that re-captures it) or to NOT_CAPTURES"
            )
            continue
        for r in stamp_tool.records(path):
            where = f"{path.name}" + (f" c{r.case}" if r.case is not None else "")
            if not r.provenance or not r.provenance.get("fingerprint"):
                problems.append(f"{where}: no source record")
            elif not _stamped(r):
                problems.append(f"{where}: no compiled fingerprint (tools/stamp_captures.py)")
            elif r.provenance["compiled"]["nvrtc"] != pin or r.provenance["compiled"]["arch"] != r.arch:
                problems.append(
                    f"{where}: stamped with NVRTC {r.provenance['compiled']['nvrtc']} for "
                    f"{r.provenance['compiled']['arch']}, not the pinned {pin} for {r.arch}"
                )
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} in all)\nall at once: {stamp_tool.ROUND}"


@needs_nvrtc
@pytest.mark.slow
def test_every_capture_matches_the_compiled_kernel():
    files = [p for p in stamp_tool.capture_files() if stamp_tool.entry(p) is not None]
    why = nvrtc_mismatch(files)
    if why:
        pytest.fail(why, pytrace=False)
    problems = drift_report(files)
    if problems:
        pytest.fail(
            f"{len(problems)} of {len(files)} files in tests/data no longer describe the kernel the GPU would run "
            "(the PTX of their build changed since the capture, or no fingerprint recorded):\n  "
            + "\n  ".join(problems)
            + f"\nall at once: {stamp_tool.ROUND}",
            pytrace=False,
        )


# ---- the compiled fingerprint, on a copy of kernel/ ------------------------------------------------------

# Builds whose PTX covers the kernel's paths: f32 / f16 / f16x2 P@V, masks, softcap, bf16, INT8 and FP8, and the
# four capture kernels.
PATHS = [
    ("flash_fwd", KernelConfig.default("sm_90", head_dim=64)),
    ("flash_fwd", KernelConfig.default("sm_90", head_dim=128, pv_accum="f16", causal=True)),
    ("flash_fwd", KernelConfig.default("sm_90", head_dim=128, softcap=True)),
    ("flash_fwd", KernelConfig.default("sm_90", head_dim=96, dtype="bf16", local=True)),
    ("flash_fwd", KernelConfig.default("sm_90", head_dim=128, quant="int8")),
    ("flash_fwd", KernelConfig.default("sm_90", head_dim=128, quant="int8-fp8", pv_accum="f16x2")),
    ("mma_capture", None),
    ("mma_k32_capture", None),
    ("layout_capture", None),
    ("sfu_capture", None),
]


@pytest.fixture
def kernel_copy(tmp_path):
    """A copy of kernel/ to edit, in a folder of another name and depth than the original."""
    root = tmp_path / "elsewhere" / "kernel"
    shutil.copytree(provenance._kernel_root(), root)
    return root


@pytest.fixture(scope="module")
def path_fingerprints():
    """compiled_fingerprint of PATHS from kernel/ itself, once."""
    return provenance.compiled_fingerprints([(k, c, "sm_90") for k, c in PATHS])


def edit(path: pathlib.Path, old: str, new: str) -> None:
    """Replace the one occurrence of ``old`` in ``path`` (a test of an edit that no longer applies fails here)."""
    text = path.read_text()
    assert text.count(old) == 1, f"{path.name}: {old!r} occurs {text.count(old)} times"
    path.write_text(text.replace(old, new))


@needs_nvrtc
def test_comments_whitespace_and_the_folder_leave_every_fingerprint_equal(kernel_copy, path_fingerprints):
    for src in [kernel_copy / "flash_fwd.cu", kernel_copy / "quantize.cu", *(kernel_copy / "capture").glob("*.cu")]:
        text = src.read_text()
        lines, out = text.split("\n"), []
        for i, line in enumerate(lines):
            inside_macro = i > 0 and lines[i - 1].endswith("\\")
            out.append(line if inside_macro else "    " + line)  # indentation: whitespace only
            if not line.endswith("\\") and i % 25 == 0:
                out += ["// a comment line", "", "/* a block comment", "   over two lines */"]
        src.write_text("// a comment at the top\n" + "\n".join(out) + "\n// and one at the end\n")
    again = provenance.compiled_fingerprints([(k, c, "sm_90") for k, c in PATHS], root=kernel_copy)
    assert again == path_fingerprints
    # the source records do see the edit: the check they made before would have failed here
    for kernel, config in PATHS:
        assert provenance.compare(
            provenance.fingerprint(kernel, config), provenance.fingerprint(kernel, config, root=kernel_copy)
        )[0].startswith("source changed: ")


@needs_nvrtc
def test_a_changed_constant_changes_the_builds_that_compile_it(kernel_copy, path_fingerprints):
    """softcap's tanh is compiled only into softcap builds: a constant changed there changes their PTX alone."""
    edit(kernel_copy / "flash_fwd.cu", "__fsub_rn(1.f, e)", "__fsub_rn(1.5f, e)")
    again = provenance.compiled_fingerprints([(k, c, "sm_90") for k, c in PATHS], root=kernel_copy)
    changed = [PATHS[i] for i, (a, b) in enumerate(zip(path_fingerprints, again)) if a != b]
    assert changed == [("flash_fwd", KernelConfig.default("sm_90", head_dim=128, softcap=True))]
    i = PATHS.index(changed[0])
    assert provenance.compare_compiled(path_fingerprints[i], again[i]) == ["the PTX of kernel/flash_fwd.cu changed"]


@needs_nvrtc
def test_the_fingerprint_is_the_ptx_code_under_the_runners_name_and_release():
    """The hash is over the PTX without its comment lines; the NVRTC release is read from NVRTC's own header; the
    program name enters the PTX (internal symbols are named after it), so the runner's name is used."""
    cfg = KernelConfig.default("sm_90", head_dim=64)
    defines = provenance.build_defines("flash_fwd", cfg)
    text = (provenance._kernel_root() / "flash_fwd.cu").read_text()
    ptx = build.compile_ptx(text, name="flashsim.cu", defines=defines, arch="sm_90")
    code = provenance.ptx_code(ptx)
    assert ".entry flash_fwd" in code and "//" not in "".join(line.lstrip()[:2] for line in code.splitlines())
    assert provenance.nvrtc_release(ptx) == provenance.nvrtc_version()
    record = provenance.compiled_fingerprint("flash_fwd", cfg)
    assert record["ptx_sha256"] == {"kernel/flash_fwd.cu": hashlib.sha256(code.encode()).hexdigest()}
    assert record["nvrtc"] == provenance.nvrtc_version() and record["arch"] == "sm_90"
    other = build.compile_ptx(text, name="other.cu", defines=defines, arch="sm_90")
    assert provenance.ptx_code(other) != code
    with pytest.raises(build.NvrtcFailed, match="static assertion failed"):
        build.compile_ptx(text, name="flashsim.cu", defines={**defines, "FS_HEAD_DIM": 33}, arch="sm_90")


# ---- stamping and the drift report, on capture files made here ---------------------------------------------


def fake_attention_capture(path: pathlib.Path, configs, root) -> None:
    """An attention capture as ``flashsim verify --save-cases`` writes it (c<i>_o, c<i>_lse, c<i>_meta), with the
    source records of the kernel/ folder ``root``; the arrays are stand-ins for the GPU's output."""
    arrays = {}
    for i, cfg in enumerate(configs):
        arrays[f"c{i}_o"] = np.arange(8 * cfg.head_dim, dtype=np.uint16).reshape(8, cfg.head_dim) + i
        arrays[f"c{i}_lse"] = np.linspace(-1, 1, 8, dtype=np.float32) * (i + 1)
        meta = {"name": f"case {i}", "arch": "sm_90", "config": asdict(cfg)}
        meta["provenance"] = provenance.fingerprint("flash_fwd", cfg, root=root)
        arrays[f"c{i}_meta"] = np.array(json.dumps(meta))
    np.savez_compressed(path, **arrays)


PLAIN = [KernelConfig.default("sm_90", head_dim=64), KernelConfig.default("sm_90", head_dim=128, pv_accum="f16")]
SOFTCAP = [KernelConfig.default("sm_90", head_dim=64), KernelConfig.default("sm_90", head_dim=128, softcap=True)]


@pytest.fixture
def stamped_captures(tmp_path, kernel_copy):
    """Two attention captures of the kernel copy, stamped by tools/stamp_captures.py: attn_sm90_plain.npz (no
    softcap) and attn_sm90_soft.npz (its case c1 softcap)."""
    folder = tmp_path / "data"
    folder.mkdir()
    fake_attention_capture(folder / "attn_sm90_plain.npz", PLAIN, kernel_copy)
    fake_attention_capture(folder / "attn_sm90_soft.npz", SOFTCAP, kernel_copy)
    files = sorted(folder.iterdir())
    report = stamp_tool.stamp(files, root=kernel_copy)
    assert report.stamped == {"attn_sm90_plain.npz": 2, "attn_sm90_soft.npz": 2} and not report.refused
    return files


@needs_nvrtc
def test_stamping_changes_the_records_only(tmp_path, kernel_copy, stamped_captures):
    fresh = tmp_path / "fresh.npz"
    fake_attention_capture(fresh, SOFTCAP, kernel_copy)
    with np.load(fresh) as before, np.load(stamped_captures[1]) as after:
        assert before.files == after.files
        for key in before.files:
            a, b = before[key], after[key]
            if key.endswith("_meta"):
                old, new = json.loads(str(a)), json.loads(str(b))
                compiled = new["provenance"].pop("compiled")
                assert old == new and compiled["nvrtc"] == provenance.nvrtc_version()
            else:
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), key
    again = stamp_tool.stamp(stamped_captures, root=kernel_copy)  # stamping twice changes nothing
    assert again.unchanged == [p.name for p in stamped_captures] and not again.stamped


@needs_nvrtc
def test_a_comment_keeps_the_captures_current(kernel_copy, stamped_captures):
    (kernel_copy / "flash_fwd.cu").write_text((kernel_copy / "flash_fwd.cu").read_text() + "\n// edited\n")
    assert drift_report(stamped_captures, root=kernel_copy) == []


@needs_nvrtc
def test_a_changed_constant_names_the_stale_file_and_cases(kernel_copy, stamped_captures):
    edit(kernel_copy / "flash_fwd.cu", "__fsub_rn(1.f, e)", "__fsub_rn(1.5f, e)")
    (problem,) = drift_report(stamped_captures, root=kernel_copy)
    assert problem.startswith("attn_sm90_soft.npz is stale:\n")
    assert "cases c1 (1 of 2; 1 configuration(s): " + SOFTCAP[1].describe() in problem
    assert "the PTX of kernel/flash_fwd.cu changed" in problem
    assert "re-capture: PYTHONPATH=. python3 -m flashsim.cli verify --replay tests/data/attn_sm90_soft.npz" in problem


@needs_nvrtc
def test_a_constant_of_every_build_makes_every_case_stale(kernel_copy, stamped_captures):
    edit(kernel_copy / "flash_fwd.cu", "__fdiv_rn(f, __fadd_rn(2.0f, f))", "__fdiv_rn(f, __fadd_rn(2.5f, f))")
    problems = drift_report(stamped_captures, root=kernel_copy)
    assert [p.split(" ", 1)[0] for p in problems] == ["attn_sm90_plain.npz", "attn_sm90_soft.npz"]
    assert all("cases c0-c1 (2 of 2; 2 configuration(s)" in p for p in problems)


@needs_nvrtc
def test_the_stamp_tool_refuses_a_capture_of_other_sources(kernel_copy, stamped_captures, tmp_path):
    """A capture whose recorded sources are not the working tree's is left as it is: the PTX of this tree would
    not be the PTX of what ran (even when only a comment differs: the tool cannot tell, the PTX can)."""
    fake_attention_capture(tmp_path / "attn_sm90_new.npz", PLAIN, kernel_copy)
    before = (tmp_path / "attn_sm90_new.npz").read_bytes()
    (kernel_copy / "quantize.cu").write_text((kernel_copy / "quantize.cu").read_text() + "\n// edited\n")
    report = stamp_tool.stamp([tmp_path / "attn_sm90_new.npz"], root=kernel_copy)
    assert not report.stamped and list(report.refused) == ["attn_sm90_new.npz"]
    assert report.refused["attn_sm90_new.npz"][:2] == [
        f"case c{i}: source changed: kernel/quantize.cu (edited)" for i in (0, 1)
    ]
    assert (tmp_path / "attn_sm90_new.npz").read_bytes() == before


def test_an_unstamped_capture_is_reported_without_compiling(tmp_path, kernel_copy):
    fake_attention_capture(tmp_path / "attn_sm90_x.npz", PLAIN[:1], kernel_copy)
    (problem,) = drift_report([tmp_path / "attn_sm90_x.npz"], root=kernel_copy)
    assert "no compiled fingerprint recorded" in problem and "re-capture: " in problem


@needs_nvrtc
def test_another_nvrtc_release_is_not_decidable(stamped_captures, monkeypatch):
    monkeypatch.setattr(provenance, "nvrtc_version", lambda: "13.9.1")
    why = nvrtc_mismatch(stamped_captures)
    assert f"made with NVRTC {provenance.compiled_fingerprint('mma_capture')['nvrtc']}" in why
    assert "loads NVRTC 13.9.1" in why and f"nvidia-cuda-nvrtc=={stamp_tool.pinned_nvrtc()}" in why


# ---- the source record ---------------------------------------------------------------------------------


def test_a_new_define_in_the_source_makes_the_source_record_differ(kernel_copy):
    cfg = KernelConfig.default("sm_90")
    before = provenance.fingerprint("flash_fwd", cfg, root=kernel_copy)
    assert before == provenance.fingerprint("flash_fwd", cfg)  # the copy hashes as the original
    src = kernel_copy / "flash_fwd.cu"
    src.write_bytes(src.read_bytes() + b"#define FS_SOMETHING 1\n")
    after = provenance.fingerprint("flash_fwd", cfg, root=kernel_copy)
    assert after["fingerprint"] != before["fingerprint"] and after["defines"] == before["defines"]
    assert provenance.compare(before, after) == ["source changed: kernel/flash_fwd.cu (edited)"]


def test_defines_enter_the_source_record():
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


def test_the_source_record_needs_no_cuda_python():
    code = (
        "import sys, flashsim.provenance as p, flashsim\n"
        "for k in p.KERNELS: p.fingerprint(k, flashsim.KernelConfig() if k in p.NEEDS_CONFIG else None)\n"
        "bad = sorted(m for m in sys.modules if m == 'cuda' or m.startswith('cuda.'))\n"
        "assert not bad, bad\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_an_attention_record_covers_the_quantization_pass(kernel_copy):
    """flash_fwd's source record lists kernel/quantize.cu (quant="int8" results come from both), and its compiled
    record holds quantize.cu's PTX for INT8 builds (flashsim.gpu.launch runs the pass only then)."""
    cfg = KernelConfig.default("sm_90", head_dim=128, quant="int8")
    before = provenance.fingerprint("flash_fwd", cfg, root=kernel_copy)
    assert "kernel/quantize.cu" in before["files"]
    assert provenance.build_defines("quantize", cfg).items() <= before["defines"].items()
    (kernel_copy / "quantize.cu").write_text((kernel_copy / "quantize.cu").read_text() + "\n// edited\n")
    why = provenance.compare(before, provenance.fingerprint("flash_fwd", cfg, root=kernel_copy))
    assert why == ["source changed: kernel/quantize.cu (edited)"]
    assert provenance.compiled_builds("flash_fwd", cfg) == ["flash_fwd", "quantize"]
    assert provenance.compiled_builds("flash_fwd", cfg.with_(quant="none")) == ["flash_fwd"]


# ---- the builds pass exactly the fingerprinted defines, under the fingerprinted name ---------------------


def _launch_module():
    return importlib.import_module("flashsim.gpu.launch")


class _Device:
    name = "mock"

    class properties:
        multiprocessor_count = 1


@pytest.mark.parametrize("kernel", list(provenance.KERNELS))
def test_every_build_passes_the_fingerprinted_defines(kernel, monkeypatch):
    """The NVRTC call of each build (flash_fwd and the four capture tools, GPU mocked, compile intercepted) gets
    exactly provenance.build_defines, under provenance.PROGRAM_NAMES' name, with no other option: the fingerprints
    describe what the kernel was built with."""
    from flashsim.gpu import build
    from flashsim.gpu import runtime as rt
    from flashsim.gpu.capture import layout, mma, mma_k32, sfu, sfu_approx, wgmma

    launch = _launch_module()  # imported before compile_cuda is patched (it binds the name at import)
    default_name = inspect.signature(build.compile_cuda).parameters["name"].default
    seen = []

    def fake_compile(source, **kw):
        seen.append((dict(kw.get("defines") or {}), kw.get("name", default_name), tuple(kw.get("extra_options") or ())))
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
            "sfu_approx_capture": sfu_approx.GpuDevice,
            "mma_k32_capture": mma_k32.GpuRunner,
            "wgmma_capture": wgmma.GpuRunner,
        }[kernel]()
        want = provenance.build_defines(kernel)
    assert seen == [(want, provenance.PROGRAM_NAMES[kernel], ())]


@needs_nvrtc
def test_the_compiled_flash_fwd_records_the_fingerprinted_defines():
    """The real NVRTC build (no GPU needed) of one configuration: Build.defines are the fingerprint's defines."""
    cfg = KernelConfig.default("sm_90", head_dim=64)
    b = _launch_module().build_kernel(cfg, "sm_90")
    assert dict(b.defines) == provenance.fingerprint("flash_fwd", cfg)["defines"]
