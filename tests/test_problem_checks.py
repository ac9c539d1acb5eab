"""Never silently wrong: every dangerous input to flashsim.attention / reference_attention (and, through the shared
flashsim.problem.prepare, flashsim.gpu.attention) is refused with an error naming the argument, or answered
correctly.

The table REFUSED lists inputs that must raise (the exception type and a regular expression the message must
match: it names the argument). ANSWERED lists inputs that look dangerous but have one right answer, each checked
against what that answer must be. Shapes too large to allocate are checked through ``prepare`` on stand-ins that
carry only ``shape`` and ``dtype``; memory refusals use FLASHSIM_MAX_BYTES so that nothing large is allocated.
"""

from __future__ import annotations

import tracemalloc
import types

import ml_dtypes
import numpy as np
import pytest

import flashsim
from flashsim import KernelConfig
from flashsim.emulator import check_emulator_memory, engine_numpy
from flashsim.errors import UnsupportedConfig
from flashsim.problem import memory_limit, prepare, reference_peak_bytes
from flashsim.settings import EngineOptions

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

F16 = np.float16


def z(*shape, dtype=F16):
    return np.zeros(shape, dtype)


def stand_in(*shape, dtype="float16"):
    """An object with only a shape and a dtype: enough for prepare, nothing allocated."""
    return types.SimpleNamespace(shape=shape, dtype=np.dtype(dtype))


Q = z(1, 1, 4, 64)
C64 = KernelConfig(head_dim=64)
TOO_BIG_SMEM = KernelConfig(head_dim=64, warps=16, m_tiles=2, kv_tile=256, stages=3)  # 256 KB > 227 KB

# (id, keyword arguments for attention(q, k, v, **kw) with q = k = v = Q unless given, exception, message regex)
REFUSED = [
    # the arrays
    ("q float32", dict(q=z(1, 1, 4, 64, dtype=np.float32)), ValueError, r"q must be float16 or bfloat16, got float32"),
    (
        "v bfloat16, q k float16",
        dict(v=z(1, 1, 4, 64, dtype=ml_dtypes.bfloat16)),
        ValueError,
        r"q, k and v must have one dtype, got q float16, k float16, v bfloat16",
    ),
    (
        "bf16 with pv_accum f16",
        dict(
            q=z(1, 1, 4, 64, dtype=ml_dtypes.bfloat16),
            k=z(1, 1, 4, 64, dtype=ml_dtypes.bfloat16),
            v=z(1, 1, 4, 64, dtype=ml_dtypes.bfloat16),
            pv_accum="f16",
        ),
        ValueError,
        r"pv_accum='f16' needs float16 inputs: mma.sync has no bf16 accumulator",
    ),
    (
        "bf16 with pv_accum f16x2",
        dict(
            q=z(1, 1, 4, 64, dtype=ml_dtypes.bfloat16),
            k=z(1, 1, 4, 64, dtype=ml_dtypes.bfloat16),
            v=z(1, 1, 4, 64, dtype=ml_dtypes.bfloat16),
            pv_accum="f16x2",
        ),
        ValueError,
        r"pv_accum='f16x2' needs float16 inputs",
    ),
    (
        "config bf16 vs f16 inputs",
        dict(config=KernelConfig(head_dim=64, dtype="bf16")),
        ValueError,
        r"config\.dtype='bf16' does not match the inputs' dtype float16",
    ),
    ("k big-endian f16", dict(k=z(1, 1, 4, 64, dtype=">f2")), ValueError, r"k is float16 in the other byte order"),
    ("q 3-d", dict(q=z(1, 4, 64)), ValueError, r"q must have 4 dimensions"),
    ("q a list", dict(q=[[[[0.0] * 64] * 4]]), ValueError, r"q must be an array"),
    ("k, v differ", dict(k=z(1, 1, 5, 64)), ValueError, r"k and v must have the same shape"),
    (
        "k's d differs",
        dict(k=z(1, 1, 4, 128), v=z(1, 1, 4, 128)),
        ValueError,
        r"k must be \(B, H, N, d\) with B=1 and d=64",
    ),
    (
        "Hq not a multiple of Hkv",
        dict(q=z(1, 3, 4, 64), k=z(1, 2, 4, 64), v=z(1, 2, 4, 64)),
        ValueError,
        r"query heads Hq=3 must be a multiple of the key/value heads Hkv=2",
    ),
    (
        "more k heads than q heads",
        dict(k=z(1, 2, 4, 64), v=z(1, 2, 4, 64)),
        ValueError,
        r"Hq=1 must be a multiple of the key/value heads Hkv=2",
    ),
    (
        "bnhd: q heads vs k heads",
        dict(layout="bnhd", q=z(1, 4, 3, 64), k=z(1, 4, 2, 64), v=z(1, 4, 2, 64)),
        ValueError,
        r"Hq=3 must be a multiple of the key/value heads Hkv=2",
    ),
    ("layout bshd", dict(layout="bshd"), ValueError, r"layout must be one of \('bhnd', 'bnhd'\)"),
    ("Nq = 0", dict(q=z(1, 1, 0, 64)), ValueError, r"sequence lengths must be >= 1"),
    ("Nk = 0", dict(k=z(1, 1, 0, 64), v=z(1, 1, 0, 64)), ValueError, r"sequence lengths must be >= 1"),
    ("B = 0", dict(q=z(0, 1, 4, 64), k=z(0, 1, 4, 64), v=z(0, 1, 4, 64)), ValueError, r"batch and heads"),
    (
        "d = 48",
        dict(q=z(1, 1, 4, 48), k=z(1, 1, 4, 48), v=z(1, 1, 4, 48)),
        ValueError,
        r"head dim d=48 .* a multiple of 32 from 32 to 256",
    ),
    ("d = 288", dict(q=z(1, 1, 4, 288), k=z(1, 1, 4, 288), v=z(1, 1, 4, 288)), ValueError, r"head dim d=288"),
    ("d = 16", dict(q=z(1, 1, 4, 16), k=z(1, 1, 4, 16), v=z(1, 1, 4, 16)), ValueError, r"head dim d=16"),
    # window_size and softcap
    ("window left -2", dict(window_size=(-2, 4)), ValueError, r"window_size values must be >= -1"),
    ("window right -5", dict(window_size=(3, -5)), ValueError, r"window_size values must be >= -1"),
    ("window of 3", dict(window_size=(1, 2, 3)), ValueError, r"window_size must be a pair of ints"),
    ("window floats", dict(window_size=(1.5, 2)), ValueError, r"window_size must be a pair of ints"),
    ("window a string", dict(window_size="12"), ValueError, r"window_size must be a pair of ints"),
    ("window bools", dict(window_size=(True, False)), ValueError, r"window_size must be a pair of ints"),
    (
        "causal window right 3",
        dict(causal=True, window_size=(8, 3)),
        ValueError,
        r"window_size=\(8, 3\) with causal=True: a causal window's right bound is 0",
    ),
    ("softcap -1", dict(softcap=-1.0), ValueError, r"softcap must be a finite number >= 0"),
    ("softcap nan", dict(softcap=float("nan")), ValueError, r"softcap must be a finite number >= 0"),
    ("softcap inf", dict(softcap=float("inf")), ValueError, r"softcap must be a finite number >= 0"),
    ("softcap a string", dict(softcap="30"), TypeError, r"softcap must be a real number"),
    ("softcap a bool", dict(softcap=True), TypeError, r"softcap must be a real number"),
    (
        "softcap 1e-45 (scale / cap overflows)",
        dict(softcap=1e-45),
        ValueError,
        r"softcap=1e-45|softmax_scale / softcap",
    ),
    (
        "window vs config.local",
        dict(config=C64, window_size=(4, 4)),
        ValueError,
        r"window_size=\(4, 4\) contradicts config\.local=False",
    ),
    ("softcap vs config", dict(config=C64, softcap=5.0), ValueError, r"softcap=5\.0 contradicts config\.softcap=False"),
    # softmax_scale: checked as the float32 the kernel receives
    ("scale 1e-46 (0 in f32)", dict(softmax_scale=1e-46), ValueError, r"softmax_scale .*0\.0 as the kernel's float32"),
    ("scale 1e39 (inf in f32)", dict(softmax_scale=1e39), ValueError, r"softmax_scale .*inf as the kernel's float32"),
    ("scale 3e38 (scale*log2e overflows)", dict(softmax_scale=3e38), ValueError, r"softmax_scale.*overflows float32"),
    ("scale 0", dict(softmax_scale=0.0), ValueError, r"softmax_scale must be a positive finite number"),
    ("scale -1", dict(softmax_scale=-1.0), ValueError, r"softmax_scale must be a positive finite number"),
    ("scale nan", dict(softmax_scale=float("nan")), ValueError, r"softmax_scale must be a positive finite number"),
    ("scale inf", dict(softmax_scale=float("inf")), ValueError, r"softmax_scale must be a positive finite number"),
    ("scale a string", dict(softmax_scale="0.125"), TypeError, r"softmax_scale must be a real number"),
    ("scale a list", dict(softmax_scale=[0.125]), TypeError, r"softmax_scale must be a real number"),
    ("scale a bool", dict(softmax_scale=True), TypeError, r"softmax_scale must be a real number"),
    ("scale complex", dict(softmax_scale=0.1 + 0j), TypeError, r"softmax_scale must be a real number"),
    # causal and pv_accum
    ("causal=1", dict(causal=1), TypeError, r"causal must be a bool, got int"),
    ("causal='yes'", dict(causal="yes"), TypeError, r"causal must be a bool, got str"),
    ("pv_accum bf16", dict(pv_accum="bf16"), ValueError, r"pv_accum must be one of"),
    ("pv_accum 16", dict(pv_accum=16), ValueError, r"pv_accum must be one of"),
    # explicit arguments that contradict the config
    (
        "causal=True vs config",
        dict(config=C64, causal=True),
        ValueError,
        r"causal=True contradicts config\.causal=False",
    ),
    (
        "causal=False vs config",
        dict(config=C64.with_(causal=True), causal=False),
        ValueError,
        r"causal=False contradicts config\.causal=True",
    ),
    (
        "pv_accum=f32 vs config",
        dict(config=C64.with_(pv_accum="f16"), pv_accum="f32"),
        ValueError,
        r"pv_accum='f32' contradicts config\.pv_accum='f16'",
    ),
    (
        "pv_accum=f16 vs config",
        dict(config=C64, pv_accum="f16"),
        ValueError,
        r"pv_accum='f16' contradicts config\.pv_accum='f32'",
    ),
    (
        "config head_dim vs d",
        dict(config=KernelConfig(head_dim=128)),
        ValueError,
        r"config\.head_dim=128 does not match .* d=64",
    ),
    ("config a dict", dict(config={"head_dim": 64}), ValueError, r"config must be a flashsim\.KernelConfig"),
    # what the GPU could not launch is refused by the emulator too
    (
        "smem over sm_90's cap",
        dict(config=TOO_BIG_SMEM),
        UnsupportedConfig,
        r"needs 262192 B of shared memory per block but sm_90 allows at most 232448 B",
    ),  # 256 KB + 48 B barriers
    (
        "smem over sm_120's cap",
        dict(arch="sm_120", config=KernelConfig(head_dim=64, kv_tile=256)),
        UnsupportedConfig,
        r"shared memory .* sm_120 allows at most 101376 B",
    ),
    ("unknown arch", dict(arch="sm_75"), ValueError, r"unknown arch 'sm_75'"),
    ("arch an int", dict(arch=90), ValueError, r"arch must be a string"),
    # engine options
    ("backend torch", dict(backend="torch"), ValueError, r"backend must be one of 'numpy', 'jax'"),
]


@pytest.mark.parametrize("kw, exc, match", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_by_the_emulator(kw, exc, match):
    kw = dict(kw)
    q, k, v = kw.pop("q", Q), kw.pop("k", Q), kw.pop("v", Q)
    with pytest.raises(exc, match=match):
        flashsim.attention(q, k, v, progress=False, **kw)


@pytest.mark.parametrize(
    "kw, exc, match",
    [r[1:] for r in REFUSED if "backend" not in r[1]],
    ids=[r[0] for r in REFUSED if "backend" not in r[1]],
)
def test_refused_by_prepare_the_gpu_runner_s_check_too(kw, exc, match):
    """flashsim.gpu.attention calls the same prepare (with arch = the GPU's): the same inputs are refused."""
    kw = dict(kw)
    q, k, v = kw.pop("q", Q), kw.pop("k", Q), kw.pop("v", Q)
    with pytest.raises(exc, match=match):
        prepare(q, k, v, **kw)


def test_emulator_rejects_non_numpy_arrays():
    class FakeTensor:  # shaped like a device tensor, but not numpy
        shape, dtype = (1, 1, 4, 64), "torch.float16"

    with pytest.raises(ValueError, match="q must be a numpy array"):
        flashsim.attention(FakeTensor(), Q, Q)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(q=stand_in(1, 70000, 4, 64), k=stand_in(1, 70000, 4, 64)), r"heads H=70000 .* <= 65535"),
        (dict(q=stand_in(65536, 1, 4, 64), k=stand_in(65536, 1, 4, 64)), r"batch B=65536 .* <= 65535"),
        (dict(q=stand_in(1, 1, 2**31 - 100, 64), k=stand_in(1, 1, 4, 64)), r"too long: Nq \+ Nk"),
        (dict(q=stand_in(1, 1, 4, 64), k=stand_in(1, 1, 2**31, 64)), r"too long: Nq \+ Nk"),
    ],
)
def test_shapes_the_kernel_cannot_index_are_refused(kw, match):
    """The CUDA grid's y/z limits and the kernel's 32-bit row arithmetic, checked without allocating anything."""
    with pytest.raises(ValueError, match=match):
        prepare(kw["q"], kw["k"], kw["k"])


# ---- answered correctly ----------------------------------------------------------------------------------------


def _inputs(nq=40, nk=70, d=64, seed=3, h=2):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((1, h, n, d)).astype(F16) for n in (nq, nk, nk))


def _same_bits(a, b):
    return np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


def test_left_out_causal_and_pv_accum_take_the_config_s():
    q, k, v = _inputs()
    cfg = C64.with_(causal=True, pv_accum="f16")
    o1, l1 = flashsim.attention(q, k, v, config=cfg, progress=False)
    o2, l2 = flashsim.attention(q, k, v, config=cfg, causal=True, pv_accum="f16", progress=False)
    assert _same_bits(o1, o2) and _same_bits(l1, l2)
    assert prepare(q, k, v).config.causal is False and prepare(q, k, v).config.pv_accum == "f32"
    assert prepare(q, k, v, causal=np.bool_(True)).config.causal is True  # numpy's bool is a bool


@pytest.mark.parametrize("layout", ["transposed view", "fortran order", "negative strides", "read-only"])
def test_any_memory_layout_gives_the_bits_of_the_contiguous_array(layout):
    q, k, v = _inputs()
    want = flashsim.attention(q, k, v, progress=False)
    if layout == "transposed view":  # (B, N, H, d) storage seen as (B, H, N, d)
        q2, k2, v2 = (np.ascontiguousarray(x.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3) for x in (q, k, v))
    elif layout == "fortran order":
        q2, k2, v2 = (np.asfortranarray(x) for x in (q, k, v))
    elif layout == "negative strides":
        q2, k2, v2 = (np.ascontiguousarray(x[..., ::-1])[..., ::-1] for x in (q, k, v))
    else:
        q2, k2, v2 = (x.copy() for x in (q, k, v))
        for x in (q2, k2, v2):
            x.setflags(write=False)
    got = flashsim.attention(q2, k2, v2, progress=False)
    assert _same_bits(got[0], want[0]) and _same_bits(got[1], want[1])


def test_one_key_returns_v_exactly():
    """softmax over one key is 1: O = v bit for bit, for any q (the tensor cores multiply by 1.0 exactly)."""
    q, k, v = _inputs(nq=5, nk=1)
    for acc in ("f32", "f16"):
        o, lse = flashsim.attention(q, k, v, pv_accum=acc, progress=False)
        assert _same_bits(o, np.broadcast_to(v, o.shape))


def test_rows_that_see_no_key_get_zero_and_plus_inf():
    """Causal with Nq > Nk: the first Nq - Nk rows see no key (bottom-right alignment): O = 0, LSE = +inf, in the
    emulator and the reference alike."""
    q, k, v = _inputs(nq=50, nk=20)
    o, lse = flashsim.attention(q, k, v, causal=True, progress=False)
    o_ref, lse_ref = flashsim.reference_attention(q, k, v, causal=True)
    assert np.all(o[:, :, :30] == 0) and np.all(np.isposinf(lse[:, :, :30]))
    assert np.all(o_ref[:, :, :30] == 0) and np.all(np.isposinf(lse_ref[:, :, :30]))
    assert np.all(np.isfinite(lse[:, :, 30:]))


def test_nan_and_inf_in_one_query_row_stay_in_that_row():
    """Rows are independent in the kernel: a NaN (or inf) in q's row 3 makes that row NaN and leaves every other
    row's bits unchanged."""
    q, k, v = _inputs()
    clean = flashsim.attention(q, k, v, progress=False)
    for bad in (np.nan, np.inf):
        q2 = q.copy()
        q2[0, 1, 3, 7] = bad
        o, lse = flashsim.attention(q2, k, v, progress=False)
        assert np.all(np.isnan(o[0, 1, 3]))
        keep = np.ones(o.shape[:3], bool)
        keep[0, 1, 3] = False
        assert _same_bits(o[keep], clean[0][keep]) and _same_bits(lse[keep], clean[1][keep])


def test_tiny_valid_scale_is_used_not_flushed():
    """A subnormal float32 scale is a valid scale (the kernel's FMA does not flush): scores ~ 0, so O is the mean of
    v over the keys, as the reference says."""
    q, k, v = _inputs(nq=8, nk=32)
    o, _ = flashsim.attention(q, k, v, softmax_scale=1e-40, progress=False)
    o_ref, _ = flashsim.reference_attention(q, k, v, softmax_scale=1e-40)
    assert np.allclose(o_ref, v.astype(np.float64).mean(axis=2, keepdims=True), atol=1e-6)
    assert np.max(np.abs(o.astype(np.float64) - o_ref)) < 2e-3


def test_scale_types_that_are_numbers_are_accepted():
    for s in (0.125, 1, np.float32(0.125), np.float16(0.125), np.array(0.125), np.int64(2)):
        assert prepare(Q, Q, Q, softmax_scale=s).softmax_scale == np.float32(float(s))


# ---- memory ----------------------------------------------------------------------------------------------------


def test_a_problem_larger_than_memory_is_refused_before_allocating(monkeypatch):
    """With FLASHSIM_MAX_BYTES at 1 MB a small problem is refused, by the emulator and the reference alike, with
    the estimate in one line; nothing is computed."""
    q, k, v = _inputs(nq=256, nk=256, d=128, h=4)
    monkeypatch.setenv("FLASHSIM_MAX_BYTES", "1000000")
    for call, what in (
        (flashsim.attention, "emulating 1x4x256x256x128"),
        (flashsim.reference_attention, "the float64 reference of 1x4x256x256x128"),
    ):
        with pytest.raises(
            ValueError,
            match=rf"{what}.* would need about .* MiB of memory \(\d+ B, estimated\) "
            r"but max_bytes \(EngineOptions / FLASHSIM_MAX_BYTES\) is 1\.0 MiB",
        ) as info:
            call(q, k, v)
        assert "\n" not in str(info.value)


def test_a_huge_problem_is_refused_with_the_machine_s_memory(monkeypatch):
    """No override: B=16, H=256, N=65536, d=128 needs terabytes; the limit is this machine's memory."""
    monkeypatch.delenv("FLASHSIM_MAX_BYTES", raising=False)
    limit, source = memory_limit()
    assert limit and limit > 2**28 and source in ("this machine's memory", "the container's memory limit")
    prob = prepare(*[stand_in(16, 256, 65536, 128)] * 3)
    assert engine_numpy.peak_bytes(prob) > 2**37 and reference_peak_bytes(prob) > 2**46
    with pytest.raises(ValueError, match=r"would need about \d+\.\d GiB .* this machine's memory|container"):
        check_emulator_memory(prob)


@pytest.mark.parametrize(
    "var, bad", [("FLASHSIM_MAX_BYTES", "lots"), ("FLASHSIM_MAX_BYTES", "-5"), ("FLASHSIM_MAX_BYTES", "0")]
)
def test_a_bad_environment_variable_is_named(monkeypatch, var, bad):
    monkeypatch.setenv(var, bad)
    with pytest.raises(ValueError, match=var):
        flashsim.attention(Q, Q, Q)


def test_the_memory_limit_is_an_option_of_the_call(monkeypatch):
    """EngineOptions.max_bytes refuses the problem whatever the environment says; the environment only sets the
    default."""
    monkeypatch.setenv("FLASHSIM_MAX_BYTES", str(1 << 40))
    q, k, v = _inputs(nq=256, nk=256, d=128, h=4)
    with pytest.raises(ValueError, match=r"but max_bytes .* is 1\.0 MiB"):
        flashsim.attention(q, k, v, engine=EngineOptions(max_bytes=1 << 20))
    prob = prepare(q, k, v)
    check_emulator_memory(prob, "numpy", EngineOptions())  # fits: the machine's memory
    with pytest.raises(ValueError, match="engine must be a flashsim.EngineOptions"):
        flashsim.attention(q, k, v, engine={"max_bytes": 1})


@pytest.mark.parametrize(
    "cfg, shape, max_tile_elems",
    [
        (KernelConfig.default("sm_90", head_dim=128), (1, 8, 512, 128, 128), 1 << 14),  # small chunks: the epilogue
        (KernelConfig.default("sm_90", head_dim=64), (1, 32, 512, 128, 64), 1 << 20),  # a KV step's peak
        (KernelConfig.default("sm_90", head_dim=64), (1, 32, 512, 128, 64), 1 << 19),  # several chunks
    ],
    ids=["epilogue", "kv-step", "kv-step-chunks"],
)
def test_the_memory_estimate_covers_the_measured_peak(cfg, shape, max_tile_elems):
    """The numpy engine's peak (tracemalloc: numpy's allocations) is below the estimate and not far below it."""
    b, h, nq, nk, d = shape
    q, k, v = _inputs(nq=nq, nk=nk, d=d, h=h)
    warm = prepare(Q, Q, Q)
    engine_numpy.run(Q, Q, Q, warm, progress=False)  # load the SFU tables and caches outside the measure
    prob = prepare(q, k, v, config=cfg)
    tracemalloc.start()
    try:
        engine_numpy.run(q, k, v, prob, progress=False, max_tile_elems=max_tile_elems)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    estimate = engine_numpy.peak_bytes(prob, max_tile_elems) - 2 * (q.size + k.size + v.size)  # the caller's inputs
    assert peak <= estimate <= 3 * peak, (peak, estimate)
