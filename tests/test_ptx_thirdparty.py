"""Public mma.sync kernels of other projects (tests/thirdparty), built from their pinned PyPI sources with their own
nvcc flags, run in flashsim.ptx: the archives hash as pinned and stage to the same files; each unit exports the
launch constants its PTX is launched by and the parameter bytes fit the PTX's declarations; each simulated launch
computes what the kernel is for (a float64 reference, an oracle independent of the simulator); and each one is bit
for bit what the H200 returned (tests/data/thirdparty/<name>_sm90.npz, made by tools/thirdparty_capture.py), from
the very PTX the capture ran: a PTX that differs from the capture's fails as drift, unless this machine's nvcc is
another release than the capture's (then it skips, naming both).

A kernel that meets an instruction flashsim.ptx does not implement fails naming it: a missing instruction is work
for the simulator, not a reason to skip.
"""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thirdparty import build, capture, kernels, packages
from tool_modules import load_tool

import flashsim.ptx as fptx
from flashsim.ptx.errors import UnsupportedInstruction
from flashsim.ptx.parser import parse

capture_tool = load_tool("thirdparty_capture")


def _cannot_fetch() -> str | None:
    """Why a pinned archive cannot be had here, or None: pip fetches flash-attn's sdist by running its setup.py
    without build isolation (tests/thirdparty/packages.py), which needs torch, wheel and setuptools installed, unless
    the archive is in the cache already."""
    for package in packages.PACKAGES.values():
        if package.build_isolation or (packages.cache_folder() / "archives" / package.filename).is_file():
            continue
        missing = [m for m in ("torch", "wheel", "setuptools") if importlib.util.find_spec(m) is None]
        if missing:
            return f"fetching {package.key}'s sdist runs its setup.py, which needs {', '.join(missing)} installed"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit's compiler) on PATH"),
    pytest.mark.skipif(_cannot_fetch() is not None, reason=str(_cannot_fetch())),
]

NAMES = sorted(kernels.KERNELS)
ARCH = "sm_90"


@pytest.fixture(scope="module")
def ptx():
    """{kernel name: its PTX}, built once (and kept in the user cache)."""
    return {name: build.build_ptx(kernels.KERNELS[name], arch=ARCH) for name in NAMES}


@pytest.fixture(scope="module")
def simulated(ptx):
    """{kernel name: (its seeded arrays after the simulated launch, None) or (None, the error it raised)}; skips
    where ptxas or nvdisasm is missing (contraction="sass" reads the SASS ptxas makes: the ptx extra brings both)."""
    from flashsim.gpu.build import cuda_tools

    for tool in ("ptxas", "nvdisasm"):
        if not cuda_tools(tool):
            pytest.skip(f"needs {tool} for contraction='sass': pip install 'flashsim[ptx]'")
    out = {}
    for name in NAMES:
        kernel = kernels.KERNELS[name]
        arrays = kernel.arrays()
        try:
            capture.simulate(kernel, ptx[name], arrays, arch=ARCH, check="memcheck")
        except (UnsupportedInstruction, ModuleNotFoundError) as exc:
            out[name] = (None, exc)
            continue
        out[name] = (arrays, None)
    return out


def _ran(simulated, name) -> dict:
    arrays, error = simulated[name]
    if error is not None:
        pytest.fail(f"{name} does not run in flashsim.ptx yet: {type(error).__name__}: {error}")
    return arrays


@settings(max_examples=200, deadline=None)
@given(d=st.integers(1, 2**31 - 1), n=st.integers(0, 2**31 - 1))
def test_fastdiv_values_divide_like_integers(d, n):
    mp, L, dz = (int(v) for v in kernels.fastdiv_values(d))
    assert dz == d
    hi = (n * mp) >> 32  # __umulhi
    assert ((hi + n) & 0xFFFFFFFF) >> L == n // d


@pytest.mark.parametrize("name", sorted(packages.PACKAGES))
def test_staged_sources_are_the_pinned_archives_files(name, tmp_path):
    package = packages.PACKAGES[name]
    packages.stage(package, tmp_path)
    staged, cached = packages.tree(package, staged=tmp_path), packages.tree(package)
    files = sorted(p.relative_to(cached) for p in cached.rglob("*") if p.is_file() and p.name[0] != ".")
    assert files, f"{package.key}: nothing kept"
    assert files == sorted(p.relative_to(staged) for p in staged.rglob("*") if p.is_file() and p.name[0] != ".")
    assert all((staged / f).read_bytes() == (cached / f).read_bytes() for f in files)


@pytest.mark.parametrize("name", NAMES)
def test_parameters_fit_the_ptx(name, ptx):
    kernel = kernels.KERNELS[name]
    ir = parse(ptx[name])
    entry = ir.functions[capture.single_entry(ir)]
    grid, block, shared = kernel.launch(ir)
    assert all(g >= 1 for g in grid) and 32 <= np.prod(block) <= 1024 and block[0] * block[1] % 32 == 0
    assert 0 < shared <= 227 * 1024
    arrays = kernel.arrays()
    params = kernel.parameters(ir, arrays, lambda n: 0x1000 * (1 + sorted(arrays).index(n)))
    assert [len(p) for p in params] == [p.size for p in entry.params]


@pytest.mark.parametrize("name", NAMES)
def test_simulated_launch_computes_its_operation(name, simulated):
    arrays = _ran(simulated, name)
    for output, (want, tol) in kernels.KERNELS[name].reference(arrays).items():
        err = np.abs(arrays[output].astype(np.float64) - want)
        assert np.isfinite(arrays[output]).all(), f"{name}.{output} holds non-finite values"
        assert err.max() <= tol, f"{name}.{output}: max error {err.max():.3g} past {tol:.3g}"


@pytest.mark.parametrize("name", NAMES)
def test_simulator_is_bit_equal_to_the_h200(name, ptx, simulated):
    kernel = kernels.KERNELS[name]
    path = capture.capture_path(name, ARCH)
    if not path.is_file():
        pytest.fail(
            f"{path} is missing: run tools/thirdparty_capture.py capture on the H200 (tools/thirdparty_capture.py "
            "says how) and store what it writes there"
        )
    before, after, meta = capture.load(path)
    package = packages.PACKAGES[kernel.package]
    assert (meta["package"], meta["version"], meta["archive_sha256"]) == (package.name, package.version, package.sha256)
    if meta["nvcc"] != build.nvcc_version():
        pytest.skip(f"the capture ran PTX from nvcc {meta['nvcc']!r}; this machine's is {build.nvcc_version()!r}")
    assert meta["ptx_sha256"] == build.ptx_sha256(ptx[name]), (
        f"{name}: the PTX built today differs from the one the H200 ran (drift): re-capture"
    )
    seeded = kernel.arrays()
    for array, value in before.items():
        assert value.tobytes() == seeded[array].tobytes(), f"{name}: stored input {array} is not the seeded one"
    arrays = _ran(simulated, name)
    for output in kernel.outputs:
        gpu, sim = after[output], arrays[output]
        bits = f"u{gpu.itemsize}"
        diff = np.flatnonzero(gpu.view(bits).reshape(-1) != sim.view(bits).reshape(-1))
        if diff.size:
            i = int(diff[0])
            where = tuple(int(j) for j in np.unravel_index(i, gpu.shape))
            g, s = int(gpu.view(bits).reshape(-1)[i]), int(sim.view(bits).reshape(-1)[i])
            pytest.fail(
                f"{name}.{output}: {diff.size} elements differ from the H200's; first {where}: GPU {g:#x}, "
                f"simulator {s:#x}"
            )


def test_capture_tool_builds_checks_and_stores_what_the_tests_replay(tmp_path, ptx, simulated):
    """The tool's path on the GPU machine, the GPU aside: build from staged sources, the parameters checked against
    the PTX, the launch, the stored file; the simulator stands in for the GPU (on the kernel that runs today)."""
    name = "llama_mmf_bf16"
    staged = tmp_path / "staged"
    packages.stage(packages.PACKAGES[kernels.KERNELS[name].package], staged)
    kernel, built, ir, entry, launch = capture_tool.prepare(name, staged, ARCH)
    assert built == ptx[name]
    arrays = kernel.arrays()
    before = {n: a.copy() for n, a in arrays.items()}
    params = capture_tool.parameters(kernel, ir, entry, arrays, lambda n: fptx.address(arrays[n]))
    module = fptx.load(built, arch=ARCH)
    fptx.launch(module.kernel(entry), *launch[:2], params, shared_mem=launch[2])
    path = capture.capture_path(name, ARCH, tmp_path)
    capture.save(path, before, arrays, capture.record(kernel, built, build.nvcc_version(), launch, ARCH))
    stored_before, stored_after, meta = capture.load(path)
    assert meta["ptx_sha256"] == build.ptx_sha256(ptx[name]) and meta["grid"] == list(launch[0])
    assert all(stored_before[n].tobytes() == kernel.arrays()[n].tobytes() for n in arrays)
    assert stored_after["dst"].tobytes() == _ran(simulated, name)["dst"].tobytes()
    with pytest.raises(ValueError, match="parameter 0"):
        capture_tool._check_sizes(ir.functions[entry], [b"\0" * 4] + params[1:])


def test_a_unit_builds_to_one_ptx_from_any_checkout(tmp_path):
    """nvcc names internal-linkage globals after the unit's absolute path; build_ptx zeroes that part, so the
    capture made from the GPU machine's checkout and the PTX built here are one text (FlashAttention-2's CuTe
    globals are such names)."""
    import subprocess

    unit = 'namespace { __device__ int seen[1]; }\nextern "C" __global__ void k(int* o) { o[0] = seen[0]; }\n'
    texts = []
    for where in ("one", "two"):
        folder = tmp_path / where
        folder.mkdir()
        (folder / "unit.cu").write_text(unit)
        cmd = [build.cuda_tool("nvcc"), "-ptx", "-arch=sm_90", "unit.cu", "-o", "unit.ptx"]
        subprocess.run(cmd, cwd=folder, check=True, capture_output=True)
        texts.append((folder / "unit.ptx").read_text())
    assert all("_INTERNAL_" in t for t in texts)
    assert build.stable_internal_names(texts[0]) == build.stable_internal_names(texts[1])
    parse(build.stable_internal_names(texts[0]))  # still PTX the parser (and ptxas) read
