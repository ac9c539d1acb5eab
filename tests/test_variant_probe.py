"""benchmarks/experiments/kernel_variant_probe.py builds its variant with the switch it is given, whatever main()
does afterwards: until 2026-11-30 the switch's name was a variable that main's timing loop reused, so every timed
"variant" was the patched source with the switch off (found and fixed in commit 5cb28bf). No GPU: the builder is
run on a stand-in for flashsim.gpu.launch.build_kernel that records what it is asked to build."""

from __future__ import annotations

import pytest
from tool_modules import ROOT, load_tool

probe = load_tool("kernel_variant_probe", ROOT / "benchmarks" / "experiments")


def recorder():
    calls = []

    def build_kernel(config, arch, *, source=None, extra_defines=None, extra_options=()):
        calls.append(dict(config=config, arch=arch, source=source, extra_defines=dict(extra_defines or {})))
        return len(calls)

    return build_kernel, calls


def test_the_variant_is_built_from_its_source_with_its_switch():
    build_kernel, calls = recorder()
    build = probe.variant_builder("// patched", "FS_PERSIST=264", build_kernel)
    for config in ("a", "b"):
        build(config, "sm_90")
    assert [c["extra_defines"] for c in calls] == [{"FS_PERSIST": 264}] * 2
    assert all(c["source"] == "// patched" for c in calls)
    assert [c["config"] for c in calls] == ["a", "b"]


@pytest.mark.parametrize("define", ["FS_X", "FS_X=", "=3", "FS_X=three"])
def test_a_switch_must_be_name_equals_integer(define):
    with pytest.raises(ValueError, match="NAME=INTEGER"):
        probe.variant_builder("", define, recorder()[0])
