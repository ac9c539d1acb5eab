"""FlashAttention's CuTe-DSL Hopper forward (flash-attn 2.8.3.post2's flash_attn/cute, FlashAttentionForwardSm90,
compiled to PTX by nvidia-cutlass-dsl 4.1.0 without a GPU: benchmarks/experiments/fa3_cute/) in flashsim.ptx.

The kernel's tiles start 128 bytes past a 1024-byte boundary with wgmma descriptors of base offset 0, which the H100
reads with the swizzle of the address itself (flashsim.layout.wgmma.descriptor_problem, measured by this capture).
These tests hold O and LSE within bf16's bound of a float64 reference and equal to the H100's bits
(tests/data/thirdparty/fa3_cute_sm90.npz: d = 128 and 64, causal and not, up to 512 keys, two heads and two batches).
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests" / "data" / "thirdparty" / "fa3_cute_sm90.npz"


def _experiment():
    spec = importlib.util.spec_from_file_location("fa3_cute_run", ROOT / "benchmarks/experiments/fa3_cute/run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run = _experiment()
pytestmark = pytest.mark.skipif(
    not all(run.ptx_path(causal, d).exists() for causal in (False, True) for d in run.DIMS),
    reason=f"the kernel's PTX is not staged in {run.PTX_DIR} (it needs nvidia-cutlass-dsl 4.1.0 on Python 3.12 and "
    "flash-attn 2.8.3.post2's sdist: benchmarks/experiments/fa3_cute/compile.py, README.md)",
)


@pytest.mark.parametrize(
    "n, causal, heads, batch, d",
    [
        (128, False, 1, 1, 128),
        (300, True, 1, 1, 128),
        (128, True, 2, 1, 128),
        (300, False, 1, 1, 64),
        (200, True, 1, 2, 64),
    ],
)
def test_forward_matches_the_float64_reference(n, causal, heads, batch, d):
    q, k, v = run.inputs(n, heads, batch, seed=n, d=d)
    o, lse, _ = run.simulate(q, k, v, causal)
    ok, line = run.check(q, k, v, o, lse, causal)
    assert ok, line


def test_scheduler_words_are_the_hosts():
    """SingleTileLPTScheduler's parameters for one head of 1024 rows: 8 blocks, 64 heads per L2 section
    (50 MiB // (1024 rows * 256 * 2 bytes) = 100: the power of two below); FastDivmod(d) = (d, multiplier, shift)."""
    grid, words = run.scheduler(1024, 1, 1, causal=True)
    one = [1, 2**31, 2**32 - 1]  # FastDivmod(1): shift -1, never used (its div returns the dividend)
    assert grid == (8, 1, 1)
    assert words == [8, 8, 2**31, 2, *one, 64, 2**31, 5, 512, 2**31, 8, *one, 0]


@pytest.mark.parametrize("divisor", [2, 3, 5, 7, 8, 9, 100, 127, 1000, 65537])
def test_fast_divmod_divides(divisor):
    """The kernel's quotient, umulhi(x, multiplier) >> shift, is x // divisor over the dividends it meets."""
    d, multiplier, shift = run.fast_divmod(divisor)
    x = np.concatenate([np.arange(0, 1 << 16), np.random.default_rng(divisor).integers(0, 1 << 31, 1 << 16)])
    x = x.astype(np.uint64)
    assert d == divisor
    np.testing.assert_array_equal(((x * np.uint64(multiplier)) >> np.uint64(32)) >> np.uint64(shift), x // divisor)


def test_shared_memory_is_the_hosts():
    """The DSL's SharedStorage sizes as its host IR sets them (compile.py checks each build against this too)."""
    sizes = {(d, c): run.shared_bytes(d, c) for d in (64, 128) for c in (False, True)}
    assert sizes == {(64, False): 114816, (64, True): 82048, (128, False): 229504, (128, True): 163968}


@pytest.mark.skipif(not CAPTURE.exists(), reason=f"no GPU capture yet ({CAPTURE.name}: run.py capture, README.md)")
def test_forward_is_the_gpus_bits():
    """Every captured case (the capture names its cases; they are run.CASES' first ones, in order)."""
    data = np.load(CAPTURE)
    captured = [i for i in range(len(run.CASES)) if f"c{i}_case" in data]
    assert captured == list(range(len(captured))) and captured
    assert {run.CASES[i][4] for i in captured} == {64, 128}, "both head dims captured"
    for i in captured:
        tag = f"c{i}_"
        n, causal, heads, batch, d = run.captured_case(data, i)
        assert (n, causal, heads, batch, d) == run.CASES[i]
        o, lse, _ = run.simulate(*run.captured_inputs(data, i), causal)
        np.testing.assert_array_equal(o, data[tag + "o"], err_msg=f"case {i}: O")
        np.testing.assert_array_equal(lse.view(np.uint32), data[tag + "lse"].view(np.uint32), err_msg=f"case {i}")
