"""flashsim.gpu.build without a GPU: NVRTC compiles for sm_90 and sm_120, ptxas numbers, errors, cache, kernel_path.

Also the DLPack exporter of flashsim.gpu (exercised on host memory, which numpy and torch consume the same way).
"""

from __future__ import annotations

import gc
import os
import pathlib
import time

import numpy as np
import pytest
from cuda_kernels import HEAVY_SOURCE, MISC_SOURCE, MMA_NAMES, MMA_SOURCE  # tests/cuda_kernels.py

from flashsim.arch import get_arch
from flashsim.errors import CompileError, GPUError
from flashsim.gpu import _dlpack
from flashsim.gpu import build as B
from flashsim.gpu.build import compile_cuda, kernel_path, parse_ptxas_log
from flashsim.gpu.runtime import cubin_runs_on, gpu_available

ELF_MAGIC = b"\x7fELF"
NVRTC = pytest.mark.nvrtc  # the options are checked against cuda.core's ProgramOptions


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
@pytest.mark.nvrtc
def test_mma_kernel_compiles_with_resource_numbers(arch):
    b = compile_cuda(MMA_SOURCE, arch=arch, name_expressions=MMA_NAMES)
    assert b.cubin[:4] == ELF_MAGIC and b.arch == arch
    assert set(b.entry_points) == set(MMA_NAMES)
    assert set(b.lowered_names) == set(MMA_NAMES)
    for name in MMA_NAMES:
        e = b.entry(name)
        assert e.mangled == b.lowered_names[name] and e.mangled.startswith("_Z")
        assert b.entry(e.mangled) is e
        assert 0 < e.registers <= 255
        assert (e.spill_stores, e.spill_loads, e.static_smem_bytes) == (0, 0, 0)
        assert f"Compiling entry function '{e.mangled}' for '{arch}'" in b.log
    assert b.resources_known and b.registers == max(e.registers for e in b.entry_points.values())
    text = str(b)
    assert text.startswith(f"{arch}: {b.registers} registers, 0 B spill stores") and "mma_m16n8k16<true>" in text


@pytest.mark.nvrtc
def test_static_smem_barriers_and_extern_c_names():
    b = compile_cuda(MISC_SOURCE, arch="sm_120")
    assert set(b.entry_points) == {"axpb", "smem_mirror", "poke"}
    axpb = b.entry("axpb")
    assert axpb.static_smem_bytes == 256 * 4 and axpb.barriers == 1
    assert b.entry("smem_mirror").static_smem_bytes == 0  # dynamic smem is not static
    assert b.lowered_names == {}
    with pytest.raises(KeyError, match="axpb"):
        b.entry("nope")


@pytest.mark.nvrtc
def test_spills_are_reported_and_extra_options_apply():
    src = HEAVY_SOURCE
    free = compile_cuda(src, arch="sm_90")
    tight = compile_cuda(src, arch="sm_90", extra_options=("--maxrregcount=32",))
    assert free.spill_stores == 0 and free.registers > 32
    assert tight.registers <= 32 and tight.spill_stores > 0 and tight.spill_loads > 0 and tight.stack_bytes > 0
    assert compile_cuda(src, arch="sm_90", extra_options={"max_register_count": 32}) is tight


@pytest.mark.nvrtc
def test_defines_reach_the_source_and_change_the_build():
    src = r"""
    #ifndef WIDTH
    #error "WIDTH must be defined by the build"
    #endif
    extern "C" __global__ void k(int* o) { __shared__ int s[WIDTH]; s[threadIdx.x % WIDTH] = 1; o[0] = s[0]; }
    """
    b64 = compile_cuda(src, arch="sm_90", defines={"WIDTH": 64})
    b32 = compile_cuda(src, arch="sm_90", defines={"WIDTH": 32})
    assert b64.entry("k").static_smem_bytes == 256 and b32.entry("k").static_smem_bytes == 128
    assert b64.defines == (("WIDTH", 64),)
    with pytest.raises(CompileError, match="WIDTH must be defined by the build") as info:
        compile_cuda(src, arch="sm_90")
    assert "WIDTH must be defined" in info.value.log and "\0" not in info.value.log


@pytest.mark.nvrtc
def test_compile_error_carries_the_nvrtc_log():
    bad = MISC_SOURCE.replace("stage[threadIdx.x] =", "stage[threadIdx.x] = undefined_symbol_xyz +")
    with pytest.raises(CompileError) as info:
        compile_cuda(bad, arch="sm_120", name="misc.cu")
    err = info.value
    assert isinstance(err, GPUError)
    assert 'identifier "undefined_symbol_xyz" is undefined' in err.log
    assert "misc.cu(" in err.log and "sm_120" in str(err) and err.log in str(err)


@pytest.mark.parametrize("arch", ["sm_91", "compute_90", "ampere", ""])
def test_unknown_arch_is_a_value_error(arch):
    with pytest.raises(ValueError, match="arch"):
        compile_cuda(MISC_SOURCE, arch=arch)


@pytest.mark.nvrtc
def test_arch_spellings():
    assert compile_cuda(MISC_SOURCE, arch=get_arch("sm_120")).arch == "sm_120"
    assert compile_cuda(MISC_SOURCE, arch="90").arch == "sm_90"
    assert compile_cuda(MISC_SOURCE, arch="sm_90a").arch == "sm_90a"
    with pytest.raises(ValueError, match="arch must be"):
        compile_cuda(MISC_SOURCE, arch=90)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"defines": {"1BAD": 1}}, "not a C macro name"),
        ({"defines": {"X": 1.5}}, "must be an int"),
        ({"defines": [("X", 1)]}, "defines must be a dict"),
        ({"name_expressions": ("",)}, "name_expressions"),
        pytest.param({"extra_options": ("--no_such_option",)}, "unknown or reserved option", marks=NVRTC),
        pytest.param({"extra_options": ("--arch=sm_80",)}, "unknown or reserved option", marks=NVRTC),
        pytest.param({"extra_options": (42,)}, "extra_options entries", marks=NVRTC),
        ({"include_dirs": ("/no/such/dir/flashsim",)}, "not a folder"),
    ],
)
def test_bad_arguments_are_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        compile_cuda(MISC_SOURCE, **kwargs)
    with pytest.raises(ValueError, match="source"):
        compile_cuda("   ")


@pytest.mark.nvrtc
def test_cache_returns_the_same_build_and_tracks_headers(tmp_path):
    header = tmp_path / "val.cuh"
    header.write_text("#define VAL 3\n")
    src = '#include "val.cuh"\nextern "C" __global__ void k(int* o) { o[threadIdx.x] = VAL; }\n'
    B.clear_cache()
    t0 = time.perf_counter()
    first = compile_cuda(src, arch="sm_90", include_dirs=(tmp_path,))
    t1 = time.perf_counter()
    again = compile_cuda(src, arch="sm_90", include_dirs=(str(tmp_path),))
    t2 = time.perf_counter()
    assert again is first and (t2 - t1) < (t1 - t0)
    assert compile_cuda(src, arch="sm_120", include_dirs=(tmp_path,)) is not first
    header.write_text("#define VAL 4   // edited: a new size and mtime\n")
    edited = compile_cuda(src, arch="sm_90", include_dirs=(tmp_path,))
    assert edited is not first and edited.cubin != first.cubin
    B.clear_cache()
    assert compile_cuda(src, arch="sm_90", include_dirs=(tmp_path,)) is not edited


@pytest.mark.nvrtc
def test_cuda_headers_are_found_when_installed():
    if not B.cuda_include_dirs():
        pytest.skip("no CUDA headers (cuda_fp16.h) on this machine")
    src = (
        '#include <cuda_fp16.h>\nextern "C" __global__ void h(float* o) { o[0] = __half2float(__float2half(o[0])); }\n'
    )
    assert compile_cuda(src, arch="sm_120").entry("h").registers > 0


@pytest.mark.nvrtc
def test_every_compile_reports_resources_even_when_nvrtc_could_cache():
    """A fresh process compiling a source already compiled before must still get the ptxas report."""
    import subprocess
    import sys

    script = (
        "from flashsim.gpu.build import compile_cuda; from cuda_kernels import MISC_SOURCE; "
        "b = compile_cuda(MISC_SOURCE, arch='sm_90'); print(b.resources_known, b.entry('axpb').registers)"
    )
    root = str(B._PACKAGE_DIR.parent.parent)
    tests = str(pathlib.Path(__file__).resolve().parent)  # cuda_kernels.py lives with the tests
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    runs = [
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=root, timeout=120, env=env)
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr
        known, regs = r.stdout.split()
        assert known == "True" and int(regs) > 0


def test_build_without_a_ptxas_report_says_so():
    b = B.Build(cubin=b"", arch="sm_90", entry_points={}, lowered_names={}, log="")
    assert not b.resources_known and "unknown" in str(b)


def test_parse_ptxas_log_keeps_device_functions_apart():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
ptxas         .     48 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_120'
ptxas info    : Function properties for _Z3fooPf
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Function properties for helper2
ptxas         .     96 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 33792 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'bar' for 'sm_120'
ptxas info    : Function properties for bar
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 380 bytes cmem[0]
"""
    got = parse_ptxas_log(log)
    assert got == {
        "_Z3fooPf": dict(
            stack_bytes=16, spill_stores=8, spill_loads=12, registers=168, barriers=1, static_smem_bytes=33792
        ),
        "bar": dict(stack_bytes=0, spill_stores=0, spill_loads=0, registers=12),
    }


def test_kernel_path_lookup_order_and_errors(tmp_path, monkeypatch):
    repo, installed = tmp_path / "repo_kernel", tmp_path / "pkg_kernel"
    (repo / "capture").mkdir(parents=True)
    (installed / "capture").mkdir(parents=True)
    (repo / "a.cu").write_text("// repo")
    (installed / "a.cu").write_text("// installed")
    (installed / "capture" / "b.cu").write_text("// installed b")
    monkeypatch.setattr(B, "_KERNEL_DIRS", (repo, installed))
    assert kernel_path("a.cu") == repo / "a.cu"
    assert kernel_path("capture/b.cu") == installed / "capture" / "b.cu"
    assert B.kernel_dir() == repo
    with pytest.raises(FileNotFoundError, match="missing.cu") as info:
        kernel_path("missing.cu")
    assert str(repo) in str(info.value) and str(installed) in str(info.value)
    for bad in ("../pyproject.toml", "/etc/passwd", ""):
        with pytest.raises(ValueError, match="relative"):
            kernel_path(bad)
    monkeypatch.setattr(B, "_KERNEL_DIRS", (tmp_path / "none1", tmp_path / "none2"))
    with pytest.raises(FileNotFoundError, match="kernel/ folder was not found"):
        B.kernel_dir()


def test_kernel_dir_of_this_checkout_is_shipped_in_the_package():
    pkg_link = B._PACKAGE_DIR / "_kernel"
    assert pkg_link.is_dir()
    if B._KERNEL_DIRS[0] != pkg_link:  # a checkout: the shipped folder is the repository's kernel/
        assert pkg_link.resolve() == B._KERNEL_DIRS[0].resolve() == B.kernel_dir().resolve()


@pytest.mark.parametrize(
    "build_arch, device_arch, runs",
    [
        ("sm_90", "sm_90", True),
        ("sm_90a", "sm_90", True),
        ("sm_80", "sm_86", True),
        ("sm_86", "sm_80", False),
        ("sm_90", "sm_120", False),
        ("sm_120", "sm_90", False),
        ("sm_100", "sm_120", False),
    ],
)
def test_cubin_compatibility_rule(build_arch, device_arch, runs):
    assert cubin_runs_on(build_arch, device_arch) is runs


def test_kernel_arguments_are_checked_against_known_parameter_sizes():
    from flashsim.gpu import runtime as rt

    arr = rt.DeviceArray(0x1000, (4,), np.dtype(np.float32))
    k = rt.Kernel(kernel=None, name="axpb", build=None, _param_sizes=(8, 4, 4))
    assert [a.dtype for a in rt._kernel_args(k, (arr, np.float32(1), np.int32(2)))] == [np.uint64, np.float32, np.int32]
    with pytest.raises(ValueError, match="takes 3 arguments, got 2"):
        rt._kernel_args(k, (arr, np.float32(1)))
    with pytest.raises(ValueError, match="argument 2 of axpb: the kernel expects 4 bytes, got int64"):
        rt._kernel_args(k, (arr, np.float32(1), np.int64(2)))
    with pytest.raises(ValueError, match="argument 1 of axpb: expected a DeviceArray or a numpy scalar"):
        rt._kernel_args(k, (arr, 1.0, np.int32(2)))


def test_gpu_available_never_raises():
    ok, reason = gpu_available()
    assert isinstance(ok, bool) and isinstance(reason, str) and reason


def test_require_gpu_without_gpu_says_why():
    ok, reason = gpu_available()
    if ok:
        pytest.skip("a GPU is present")
    from flashsim.gpu import runtime as rt

    with pytest.raises(GPUError, match="no usable GPU"):
        rt.require_gpu()


# -- DLPack export, on host memory ------------------------------------------------------------------


class _HostExport:
    """Exports a numpy array through flashsim.gpu._dlpack with device type CPU."""

    def __init__(self, a):
        self.a = a

    def __dlpack_device__(self):
        return (_dlpack.KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return _dlpack.make_capsule(self.a.ctypes.data, self.a.shape, self.a.dtype, (_dlpack.KDL_CPU, 0), self.a)


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int8, np.int32, np.uint16, np.uint64, np.bool_]
)
@pytest.mark.parametrize("shape", [(7,), (2, 3, 5), (0, 4), ()])
def test_dlpack_export_round_trip_numpy(dtype, shape):
    rng = np.random.default_rng(0)
    a = rng.integers(0, 255, size=shape).astype(dtype)
    base = _dlpack.live_count()
    b = np.from_dlpack(_HostExport(a))
    assert b.shape == a.shape and b.dtype == a.dtype
    if a.size:
        assert b.ctypes.data == a.ctypes.data  # zero-copy
        assert b.tobytes() == a.tobytes()
    del b
    gc.collect()
    assert _dlpack.live_count() == base


def test_dlpack_owner_outlives_its_producer_and_unconsumed_capsules_are_freed():
    base = _dlpack.live_count()
    view = np.from_dlpack(_HostExport(np.arange(6, dtype=np.float32)))  # the array's only other reference is gone
    gc.collect()
    assert view.tolist() == [0, 1, 2, 3, 4, 5] and _dlpack.live_count() == base + 1
    capsule = _HostExport(np.zeros(3, np.float32)).__dlpack__()
    assert _dlpack.live_count() == base + 2
    del capsule, view
    gc.collect()
    assert _dlpack.live_count() == base


def test_dlpack_export_to_torch_including_bfloat16():
    torch = pytest.importorskip("torch")
    import ml_dtypes

    a = (np.arange(12, dtype=np.float32) - 5).astype(ml_dtypes.bfloat16).reshape(3, 4)
    t = torch.from_dlpack(_HostExport(a))
    assert t.dtype == torch.bfloat16 and tuple(t.shape) == (3, 4) and t.data_ptr() == a.ctypes.data
    assert np.array_equal(t.view(torch.int16).numpy(), a.view(np.int16))


def test_dlpack_dtype_codes():
    import ml_dtypes

    assert _dlpack.dtype_code(np.float16) == (2, 16)
    assert _dlpack.dtype_code(ml_dtypes.bfloat16) == (4, 16)
    assert _dlpack.dtype_code(np.uint32) == (1, 32)
    assert _dlpack.dtype_code(np.bool_) == (6, 8)
    with pytest.raises(ValueError, match="DLPack"):
        _dlpack.dtype_code(np.complex64)
