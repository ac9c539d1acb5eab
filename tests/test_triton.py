"""flashsim.triton: Triton kernels (tests/triton_kernels.py, of the kinds Triton's tutorials teach) compiled by
Triton's own compiler and run on the CPU with Triton's argument conventions.

Each result is held to a float64 reference computed here, within a bound derived in the test from the kernel's
arithmetic (f32 roundings, the SFU's error, tensor-core truncation, the output format); the GPU's own bits are held
in test_the_gpu_bits_of_triton_s_own_cubins (tests/data/triton_cubins/triton_gpu.npz, written on the GPU by
tools/triton_capture.py). Targets: "sm_80" (Triton's A100 build) on the A100 (``arch="sm_80"``) and on the H200
(the default ``arch``: the driver compiles its PTX for the H200, the combination this project's GPU can check),
"sm_90" (its sm_90a build), "sm_120" (sm_120a). Kernels whose SFU approximations have no captured model for an arch
(ex2 / lg2 off sm_90) or whose instructions the simulator does not run yet (sm_90a's wgmma, TMA) are skipped with
the simulator's own reason. Skipped entirely where Triton is not installed (``pip install 'flashsim[triton]'``).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

triton = pytest.importorskip("triton", reason="needs Triton: pip install 'flashsim[triton]'")
ml_dtypes = pytest.importorskip("ml_dtypes")

import flashsim.triton as ft  # noqa: E402
from flashsim.ptx import MemcheckError, UnsupportedInstruction  # noqa: E402
from flashsim.ptx.sass import MissingTools  # noqa: E402

try:
    ft.support.import_triton()
except ft.TritonUnavailable as exc:  # pragma: no cover - another Triton release
    pytest.skip(str(exc), allow_module_level=True)

import triton_kernels as K  # noqa: E402 - tests/triton_kernels.py

U = 2.0**-24  # the unit roundoff of f32
RNG = np.random.default_rng(20261206)
DATA = pathlib.Path(__file__).parent / "data" / "triton_cubins" / "triton_gpu.npz"

# (target, arch): the build and the GPU whose numerics run it (None: the default, the H200 but for sm_120a)
RUNS = [("sm_80", "sm_80"), ("sm_80", None), ("sm_90", None), ("sm_120", None)]
RUN_IDS = ["sm_80-on-A100", "sm_80-on-H200", "sm_90", "sm_120"]


def run(kernel, grid, *args, target, arch=None, **meta):
    """ft.launch, skipping (with the simulator's reason) where this simulator cannot run the build yet."""
    try:
        return ft.launch(kernel, grid, *args, target=target, arch=arch, **meta)
    except UnsupportedInstruction as exc:
        pytest.skip(f"{target} build on {arch or target}: {exc}")
    except MissingTools as exc:
        pytest.skip(str(exc))


# -- vector add: one rounding, so the bits are numpy's --------------------------------------------------------------


@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90", "sm_120"])
def test_vector_add_is_numpy_s_f32_add(target):
    """The default GPU: the H200 (sm_90) for every build it runs, sm_120 for the sm_120a build."""
    n = 1000
    x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    report = run(K.add, lambda m: (triton.cdiv(n, m["BLOCK"]),), x, y, out, n, BLOCK=256, target=target)
    assert np.array_equal(out.view(np.uint32), (x + y).view(np.uint32))
    assert report.block == (128, 1, 1) and report.grid == (4, 1, 1)
    assert report.compiled.arch == ("sm_120" if target == "sm_120" else "sm_90")


def test_jit_spelling_and_the_cache():
    n = 300
    x, y, out = np.ones(n, np.float32), np.full(n, 2.0, np.float32), np.zeros(n, np.float32)
    launcher = ft.jit(K.add, target="sm_80")
    first = launcher[(3,)](x, y, out, n, BLOCK=128)
    out[:] = 0
    second = launcher[(3,)](x, y, out, n, BLOCK=128)
    assert np.all(out == 3) and second.compiled is first.compiled  # the compiled kernel and its program reused


# -- fused softmax ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target,arch", RUNS, ids=RUN_IDS)
def test_fused_softmax_within_its_bound(target, arch):
    rows, cols = 6, 100
    x = (RNG.standard_normal((rows, cols)) * 3).astype(np.float32)
    y = np.zeros_like(x)
    run(K.softmax, (4,), y, x, cols, cols, rows, cols, BLOCK=128, target=target, arch=arch)
    z = x.astype(np.float64) - x.max(1, keepdims=True)
    e = np.exp(z)
    ref = e / e.sum(1, keepdims=True)
    # e = ex2(z * log2e): z exact (Sterbenz: x and the max are within a factor 2, or z rounds relatively by u),
    # the product rounds by u relative to |z log2 e| (an absolute error of |z| u in the exponent after ln 2), ex2's
    # error is at most 2.05 ulp (the H200's measured SFU, docs/numerics), so each e is within (|z| + 2 + 4.1) u;
    # the f32 sum of `cols` of them within (cols - 1) u; the division (div.full: MUFU.RCP and a multiply) within
    # 4 u. Twice the e bound (numerator and sum) plus the rest, relative to the result:
    bound = (2 * (np.abs(z).max() + 6.1) + cols + 4) * U
    assert np.all(np.abs(y - ref) <= bound * ref + 1e-45)


# -- matmul ----------------------------------------------------------------------------------------------------------

MATMUL_TYPES = {
    "f16": (np.float16, np.float16),
    "bf16": (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
    "fp8": (ml_dtypes.float8_e4m3fn, np.float16),
}


def matmul(a, b, c, target, arch=None, BM=32, BN=32, BK=32):
    M, K_ = a.shape
    N = b.shape[1]
    grid = lambda m: (triton.cdiv(M, m["BM"]) * triton.cdiv(N, m["BN"]),)  # noqa: E731
    return run(
        K.matmul, grid, a, b, c, M, N, K_, K_, 1, N, 1, N, 1, BM=BM, BN=BN, BK=BK, GROUP=2, target=target, arch=arch
    )


@pytest.mark.parametrize("kind", list(MATMUL_TYPES))
@pytest.mark.parametrize("target,arch", RUNS, ids=RUN_IDS)
def test_matmul_within_its_bound(kind, target, arch):
    if kind == "fp8" and target == "sm_80":
        pytest.skip("Triton has no fp8e4nv dot on sm_80 (test_a_target_triton_cannot_build_is_one_error)")
    inputs, out_type = MATMUL_TYPES[kind]
    M, N, K_ = 48, 40, 96  # partial tiles in M and N, three K steps
    a = (RNG.standard_normal((M, K_)) * 2).astype(inputs)
    b = RNG.standard_normal((K_, N)).astype(inputs)
    c = np.zeros((M, N), out_type)
    matmul(a, b, c, target, arch)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    scale = np.abs(a64) @ np.abs(b64)
    # Every product is exact in the tensor core; a fused block of at most 16 products and the accumulator truncates
    # each term to at least 23 fraction bits below the block's largest exponent (at most twice the block's share of
    # `scale`) and rounds the sum toward zero: at most (17 * 2 + 1) * 2^-23 of `scale` per block, K / 8 blocks at most
    # (sm_80's blocks of 8). Then one rounding to the output type (half an ulp: 2^-11 for f16, 2^-8 for bf16).
    blocks = K_ // 8
    out_u = {np.float16: 2.0**-11, ml_dtypes.bfloat16: 2.0**-8}[out_type]
    bound = blocks * 35 * 2.0**-23 * scale + out_u * np.abs(ref) + 2.0**-24
    assert np.all(np.abs(c.astype(np.float64) - ref) <= bound)


# -- layer norm ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fusion", [True, False], ids=["fp-fusion", "no-fp-fusion"])
@pytest.mark.parametrize("target,arch", RUNS, ids=RUN_IDS)
def test_layer_norm_forward_within_its_bound(target, arch, fusion):
    rows, n = 4, 200
    x = (RNG.standard_normal((rows, n)) * 2 + 1).astype(np.float16)
    w = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    y, mean, rstd = np.zeros_like(x), np.zeros(rows, np.float32), np.zeros(rows, np.float32)
    # with Triton's fp fusion (3.9's default) ptxas fuses the multiply of the variance's div.full into the add of
    # eps; without it (3.10's default) nothing is fused
    args = (x, y, w, b, mean, rstd, n, n, 1e-5)
    run(K.layer_norm, (rows,), *args, BLOCK=64, enable_fp_fusion=fusion, target=target, arch=arch)
    x64 = x.astype(np.float64)
    mu = x64.mean(1)
    r = 1 / np.sqrt(x64.var(1) + 1e-5)
    xhat = (x64 - mu[:, None]) * r[:, None]
    ref = xhat * w + b
    # mean and variance: f32 sums of n terms (n u relative to the sum of magnitudes), a div.full (4 u); rstd adds
    # sqrt.approx and div.full (4 u each, relative); so x_hat is within e = (2 n + 16) u of |x_hat| + rstd |mean
    # error|, the affine map adds 3 u of its magnitude, and y rounds once to f16 (2^-11 relative).
    e = (2 * n + 16) * U
    mean_err = n * U * np.abs(x64).mean(1)
    assert np.all(np.abs(mean - mu) <= mean_err + 4 * U * np.abs(mu))
    assert np.all(np.abs(rstd - r) <= e * r)
    xhat_err = e * np.abs(xhat) + (r * mean_err)[:, None]
    bound = np.abs(w) * xhat_err + 3 * U * (np.abs(w * xhat) + np.abs(b)) + 2.0**-11 * np.abs(ref) + 2.0**-25
    assert np.all(np.abs(y.astype(np.float64) - ref) <= bound)


# -- fused attention -------------------------------------------------------------------------------------------------


def attention(q, k, v, causal, target, arch=None):
    H, N, D = q.shape
    o, lse = np.zeros_like(q), np.zeros((H, N), np.float32)
    run(K.attention, (triton.cdiv(N, 64), H), q, k, v, o, lse, 0.125, N, N * D, D, CAUSAL=causal, D=D, BM=64, BN=32,
        target=target, arch=arch)  # fmt: skip
    return o, lse


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("target,arch", RUNS, ids=RUN_IDS)
def test_fused_attention_forward_within_its_bound(causal, target, arch):
    H, N, D = 2, 96, 64
    q, k, v = (RNG.standard_normal((H, N, D)).astype(np.float16) for _ in range(3))
    o, lse = attention(q, k, v, causal, target, arch)
    s = np.einsum("hnd,hmd->hnm", q.astype(np.float64), k.astype(np.float64)) * 0.125
    if causal:
        s = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    ref = np.einsum("hnm,hmd->hnd", p / p.sum(-1, keepdims=True), v.astype(np.float64))
    ref_lse = (m[..., 0] + np.log(p.sum(-1))).astype(np.float64)
    vmax = np.abs(v.astype(np.float64)).max()
    # P is rounded to f16 for P @ V (2^-11 relative per p, so 2^-11 max|v| after the division by l, which sums the
    # unrounded p); the exponentials' arguments |s log2 e| <= 16 here carry f32 and SFU errors of (16 + 6) u relative
    # per p; the score dot and the P @ V accumulation add tensor-core truncation (35 * 2^-23 of the magnitudes per
    # block, 8 blocks); O rounds once to f16.
    bound = (2.0**-11 + 2 * 22 * U + 8 * 35 * 2.0**-23) * vmax + 2.0**-11 * np.abs(ref)
    assert np.all(np.abs(o.astype(np.float64) - ref) <= bound)
    # LSE = (m + log2 l) ln 2 in f32: lg2.approx is within 2^-22 absolute, the rest a few u of |LSE|
    assert np.all(np.abs(lse - ref_lse) <= 2.0**-21 + 64 * U * np.abs(ref_lse))


# -- Triton's conventions --------------------------------------------------------------------------------------------


def test_scalars_are_specialized_as_triton_s_jit_does():
    x = np.zeros(64, np.float32)
    cases = {
        "1 becomes a constant": (1, "constexpr", None),
        "16 an i32 with the divisibility hint": (16, "i32", True),
        "7 a plain i32": (7, "i32", False),
        "2^40 an i64": (2**40, "i64", True),
    }
    for what, (n, ty, hint) in cases.items():
        c = ft.prepare(K.add, (1,), x, x, x, n, BLOCK=64, target="sm_80").compiled
        assert c.signature["n"] == ty, what
        if hint is not None:
            assert (c.attrs.get((3,)) == [["tt.divisibility", 16]]) == hint, what
    offset = ft.prepare(K.add, (1,), x[1:], x, x, 7, BLOCK=64, target="sm_80").compiled
    aligned = ft.prepare(K.add, (1,), x, x, x, 7, BLOCK=64, target="sm_80").compiled
    hint = [["tt.divisibility", 16]]
    assert aligned.attrs[(0,)] == hint and offset.attrs.get((0,)) != hint  # a pointer 4 bytes in: no hint
    assert offset.signature["x_ptr"] == "*fp32"


def test_the_hidden_scratch_pointers_close_the_parameter_list():
    x, y = np.zeros((64, 128), np.float16), np.zeros((64, 128), np.float16)
    p = ft.prepare(K.copy_tiles_device, (2, 2), x, y, 64, 128, BM=32, BN=64, target="sm_90")
    meta, values = p.compiled.metadata, p.arguments()
    assert len(values) == len(p.compiled.kernel.params)
    scratch = values[-2]
    assert meta.global_scratch_size > 0 and scratch.nbytes == 4 * meta.global_scratch_size
    assert ft.launch.__module__ and __import__("flashsim").ptx.address(scratch) % meta.global_scratch_align == 0
    assert values[-1] == 0  # no profile scratch asked: NULL


@pytest.mark.parametrize("target", ["sm_80", "sm_90"], ids=["pointers", "tma"])
@pytest.mark.parametrize("through", ["numpy", "torch"])
def test_host_tensor_descriptors(through, target):
    """sm_80: Triton rewrites a host descriptor to pointer, shape, strides; sm_90: a tensor map (TMA)."""
    if target == "sm_90" and not hasattr(__import__("flashsim").ptx, "tensor_map_tiled"):
        pytest.skip("this flashsim.ptx has no tensor_map_tiled (TMA) yet")
    x = (np.arange(64 * 128) % 97).astype(np.float16).reshape(64, 128)
    if through == "numpy":
        y = np.zeros_like(x)
        desc = ft.tensor_descriptor(x, [32, 64])
    else:
        torch = pytest.importorskip("torch")
        from triton.tools.tensor_descriptor import TensorDescriptor

        x, y = torch.from_numpy(x), torch.zeros(64, 128, dtype=torch.float16)
        desc = TensorDescriptor.from_tensor(x, [32, 64])
    run(K.copy_tiles, (2, 2), desc, y, 128, BM=32, BN=64, target=target)
    assert np.array_equal(np.asarray(y), np.asarray(x) * 2)


def test_device_side_descriptors_on_a_target_without_tma():
    x = (np.arange(64 * 128) % 89).astype(np.float16).reshape(64, 128)
    y = np.zeros_like(x)
    ft.launch(K.copy_tiles_device, (2, 2), x, y, 64, 128, BM=32, BN=64, target="sm_80")
    assert np.array_equal(y, x * 2)


def test_cpu_torch_tensors_are_written_in_place():
    torch = pytest.importorskip("torch")
    base = torch.arange(40, dtype=torch.float32)
    x, out = base[8:], torch.zeros(40)  # a view 32 bytes into its storage
    ft.launch(K.add, (1,), x, x, out[4:], 32, BLOCK=32, target="sm_80")
    assert torch.equal(out[4:36], 2 * base[8:40]) and torch.all(out[:4] == 0) and torch.all(out[36:] == 0)


def test_memcheck_names_the_triton_source_line():
    n = 100
    x, out = np.ones(n, np.float32), np.zeros(n, np.float32)
    with pytest.raises(MemcheckError) as err:  # n says 100, BLOCK reads 128 from a buffer of 100: past the end
        ft.launch(K.add, (1,), x, x, out, 128, BLOCK=128, target="sm_80", check="memcheck")
    line = next(
        i for i, t in enumerate(pathlib.Path(K.__file__).read_text().splitlines(), 1) if "x = tl.load(x_ptr" in t
    )
    # the file as Triton first compiled it (its disk cache is keyed by the source, not the path)
    assert err.value.source.endswith(f"/{pathlib.Path(K.__file__).name}:{line}"), err.value


# -- against Triton's interpreter ------------------------------------------------------------------------------------


def test_compare_names_what_the_interpreter_gets_wrong():
    pytest.importorskip("torch")
    M = N = K_ = 32
    a = RNG.standard_normal((M, K_)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((K_, N)).astype(ml_dtypes.bfloat16)
    c = np.zeros((M, N), ml_dtypes.bfloat16)
    before = c.copy()
    got = ft.compare(K.matmul, (1,), a, b, c, M, N, K_, K_, 1, N, 1, N, 1, BM=32, BN=32, BK=32, GROUP=1, target="sm_80")
    assert np.array_equal(c.view(np.uint16), before.view(np.uint16))  # the arguments are left alone
    assert list(got.outputs) == ["c_ptr"] and set(got.seconds) == {"flashsim", "interpreter"}
    sim, interp = got.results["c_ptr"]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    d = got.outputs["c_ptr"]
    assert d.total - d.equal == np.count_nonzero(sim.view(np.uint16) != interp.view(np.uint16)) > 0
    # flashsim's bf16 matmul is within the tensor core's bound; where the interpreter differs, it is the farther one
    assert np.abs(sim.astype(np.float64) - ref).max() <= 2.0**-8 * np.abs(ref).max() + 2.0**-16
    assert "differ" in str(got) and "first at" in str(got)


# -- bad input: one clear error each ---------------------------------------------------------------------------------


def test_bad_input_is_one_clear_error_naming_the_argument(monkeypatch):
    x = np.zeros(64, np.float32)
    with pytest.raises(ft.TritonArgumentError, match=r"argument 'BLOCK': missing \(a tl.constexpr"):
        ft.launch(K.add, (1,), x, x, x, 64, target="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"add takes 5 arguments .* got 6"):
        ft.launch(K.add, (1,), x, x, x, 64, 1, 2, target="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"BLOK: add has no parameter 'BLOK'"):
        ft.launch(K.add, (1,), x, x, x, 64, BLOCK=64, BLOK=64, target="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"target must be one of sm_80, sm_89, sm_90, sm_120"):
        ft.launch(K.add, (1,), x, x, x, 64, BLOCK=64, target="sm_75")
    with pytest.raises(ft.TritonArgumentError, match=r"argument 'y_ptr': dict is not an argument Triton can pass"):
        ft.launch(K.add, (1,), x, {}, x, 64, BLOCK=64, target="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"argument 'n': a string is only allowed for a tl.constexpr"):
        ft.launch(K.add, (1,), x, x, x, "64", BLOCK=64, target="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"argument 'n': \d+ does not fit 64 bits"):
        ft.launch(K.add, (1,), x, x, x, 2**70, BLOCK=64, target="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"arch: a sm_80 GPU cannot run a sm_90 build"):
        ft.launch(K.add, (1,), x, x, x, 64, BLOCK=64, target="sm_90", arch="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"options .*'num_warps': 3.*Triton refuses them"):
        ft.launch(K.add, (1,), x, x, x, 64, BLOCK=64, num_warps=3, target="sm_80")
    with pytest.raises(ft.TritonArgumentError, match=r"arch: unknown arch 'sm_75'"):
        ft.launch(K.add, (1,), x, x, x, 64, BLOCK=64, target="sm_80", arch="sm_75")
    with pytest.raises(ft.TritonArgumentError, match=r"kernel: a @triton.jit function expected"):
        ft.launch(lambda: None, (1,), target="sm_80")
    monkeypatch.setattr(triton, "__version__", "3.8.1")
    with pytest.raises(ft.TritonUnavailable, match=r"supports Triton 3.9.x.*this is Triton 3.8.1.*flashsim\[triton\]"):
        ft.launch(K.add, (1,), x, x, x, 64, BLOCK=64, target="sm_80")


def test_a_torch_tensor_on_a_device_is_refused_by_name():
    torch = pytest.importorskip("torch")
    x = np.zeros(64, np.float32)
    with pytest.raises(ft.TritonArgumentError, match=r"argument 'y_ptr': a torch tensor on meta"):
        ft.launch(K.add, (1,), x, torch.empty(64, device="meta"), x, 64, BLOCK=64, target="sm_80")


def test_a_target_triton_cannot_build_is_one_error():
    a = np.zeros((32, 32), ml_dtypes.float8_e4m3fn)
    c = np.zeros((32, 32), np.float16)
    with pytest.raises(ft.TritonCompileError, match=r"(?s)Triton cannot build matmul for sm_80.*fp8e4nv not supported"):
        ft.launch(K.matmul, (1,), a, a, c, 32, 32, 32, 32, 1, 32, 1, 32, 1, BM=32, BN=32, BK=32, GROUP=1,
                  target="sm_80")  # fmt: skip


# -- the GPU's bits --------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not DATA.is_file(), reason=f"no GPU capture yet: {DATA} (tools/triton_capture.py capture)")
def test_the_gpu_bits_of_triton_s_own_cubins():
    """tools/triton_capture.py ran, on the GPU, the cubins built here from Triton's builds of each case
    (tests/data/triton_cubins: Triton's own sm_90a cubins; the sm_80 PTX assembled for the H200) on the inputs stored
    beside the outputs; flashsim.triton must give the same bits on the same inputs, from the same PTX code. Cases the
    simulator cannot run yet (wgmma, ...) are listed in the skip reason, the others must all be equal."""
    from tool_modules import load_tool  # tests/tool_modules.py

    capture = load_tool("triton_capture")
    manifest = json.loads((capture.CUBINS / "manifest.json").read_text())
    with np.load(DATA, allow_pickle=False) as z:
        stored = {k: z[k] for k in z.files}
    checked, unsupported, differ = [], [], []
    for case in capture.CASES:
        if f"{case.name}/arch" not in stored:
            continue
        inputs = {k.split(":", 1)[1]: v for k, v in stored.items() if k.startswith(f"{case.name}/in:")}
        try:
            got, code = capture.simulate(case, inputs, arch=str(stored[f"{case.name}/arch"]))
        except UnsupportedInstruction as exc:
            unsupported.append(f"{case.name} ({exc.opcode})")
            continue
        assert code == manifest[case.name]["ptx_code_sha256"], f"{case.name}: Triton built other PTX than was captured"
        for name, after in got.items():
            want = stored[f"{case.name}/out:{name}"]
            if not np.array_equal(after.view(np.uint8), want.view(np.uint8)):
                differ.append(f"{case.name}/{name}")
        checked.append(case.name)
    assert not differ, f"bits differ from the GPU: {differ}"
    if unsupported:
        pytest.skip(f"equal on {len(checked)} cases; not runnable yet: {', '.join(unsupported)}")


# -- the command line ------------------------------------------------------------------------------------------------


def test_the_command_line_runs_and_compares(capsys, tmp_path):
    from flashsim.cli import main

    spec = f"{K.__file__}:add"
    base = ["--grid", "1", "--arg", "randn:f32:100", "--arg", "randn:f32:100", "--arg", "out:f32:100"]
    assert main(["triton", "run", spec, *base, "--arg", "100", "--meta", "BLOCK=128", "--target", "sm_80",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    x, y, out = (np.load(tmp_path / f"{n}.npy") for n in ("x_ptr", "y_ptr", "out_ptr"))
    assert np.array_equal(out, x + y) and "add: grid (1, 1, 1), block (128, 1, 1)" in capsys.readouterr().out
    assert main(["triton", "run", spec, *base, "--arg", "128", "--meta", "BLOCK=128", "--target", "sm_80",
                 "--check", "memcheck"]) == 1  # fmt: skip
    assert "triton_kernels.py:" in capsys.readouterr().err
    assert main(["triton", "run", spec, "--grid", "1", "--arg", "1.5"]) == 2  # a missing argument: one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument 'y_ptr': missing" in err[0]
