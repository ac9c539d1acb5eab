"""The GPU side of the third-party kernels (tests/thirdparty): stage their sources here, capture their outputs there.

    python tools/thirdparty_capture.py stage [--dest .thirdparty]
        here (network: PyPI): fetch the pinned archives (sha256 checked) and write, per package, the headers the
        builds read as a small archive with a manifest (what a machine without network builds from)
    python3 tools/thirdparty_capture.py capture --sources .thirdparty --out DIR [--kernel NAME ...]
        on the GPU machine, from the repository root (PYTHONPATH=$PWD where flashsim is not installed): for each
        kernel, build its PTX with that machine's nvcc from the staged sources, assemble it with ptxas (the GPU runs
        exactly the PTX the simulator runs), launch it on the seeded inputs and write DIR/<name>_<arch>.npz (inputs,
        outputs, provenance: tests/thirdparty/capture.py); then copy those files to tests/data/thirdparty/
    python3 tools/thirdparty_capture.py capture-cutlass --sources .thirdparty --out DIR
        on an sm_90 GPU machine: build CUTLASS's sm90 GEMM harness (tests/thirdparty/cutlass_gemm.py, about 40 s of
        nvcc), run it on each input case through CUTLASS's own host code and launcher with the driver's tensor maps,
        and write DIR/cutlass_sm90_gemm_<case>_sm90a.npz (inputs, D, the launch, the maps' arguments); then the same
        for CuTe's Hopper tutorial GEMM (about 20 s of nvcc): DIR/cute_tutorial_gemm_<case>_sm90a.npz
    python3 tools/thirdparty_capture.py capture-flashinfer --sources .thirdparty --out DIR
        on an sm_90 GPU machine: build FlashInfer's Hopper single-prefill harness once per variant (head dim 64 / 128,
        causal or not, bf16, and f16 at d = 64: tests/thirdparty/flashinfer_prefill.py; the five nvcc runs in
        parallel, about a minute and a half), run
        each input case through FlashInfer's own host code and launch with the driver's tensor maps, and write
        DIR/flashinfer_sm90_prefill_<case>_sm90a.npz (inputs, O, LSE, the launch, the maps' arguments)

Each kernel runs in a process of its own, so a launch that breaks the CUDA context leaves the others running. The
launch goes through the driver's cuLaunchKernel with one pointer per parameter, since the kernels take structs by
value (FlashAttention-2's Flash_fwd_params, llama.cpp's uint3 divisors); every parameter's size is checked against
the PTX's declaration first. Exit status 0 when every kernel was captured.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import pathlib
import subprocess
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # tests/thirdparty: the launch descriptions the CPU tests use

from thirdparty import (  # noqa: E402
    build,
    capture,
    cute_tutorial,
    cutlass_gemm,
    flashinfer_prefill,
    hostprogram,
    kernels,
    packages,
)

from flashsim import provenance  # noqa: E402
from flashsim.ptx.parser import parse  # noqa: E402

EXPECTED = "expected_ptx.json"


def stage(dest: pathlib.Path, arch: str = "sm_90") -> int:
    """Stage every package the kernels use, and record the PTX each kernel builds to here (nvcc's version with
    it): the capture reports whether the GPU machine's build is the same, which the tests then require."""
    used = sorted({k.package for k in kernels.KERNELS.values()} | {cutlass_gemm.PACKAGE, flashinfer_prefill.PACKAGE})
    for name in used:
        out = packages.stage(packages.PACKAGES[name], dest)
        print(f"{name}: {out} ({out.stat().st_size / 1e6:.1f} MB)")
    expected = {"nvcc": build.nvcc_version(), "arch": arch, "ptx_sha256": {}}
    for name, kernel in sorted(kernels.KERNELS.items()):
        # from the cache's tree (the same files as the staged copy, tests/test_ptx_thirdparty.py checks), so that
        # the folder that travels holds the small archives only
        expected["ptx_sha256"][name] = build.ptx_sha256(build.build_ptx(kernel, arch=arch))
        print(f"{name}: PTX {expected['ptx_sha256'][name]}")
    for name, case in sorted({**cutlass_gemm.CASES, **cute_tutorial.CASES}.items()):
        expected["ptx_sha256"][name] = build.ptx_sha256(build.build_ptx(case, arch=cutlass_gemm.ARCH))
        print(f"{name}: PTX {expected['ptx_sha256'][name]} ({cutlass_gemm.ARCH})")
    for name, case in sorted(flashinfer_prefill.CASES.items()):
        # the PTX each variant's program embeds (one build per variant, cached in the user cache)
        _program, ptx = flashinfer_prefill.build(case.build)
        expected["ptx_sha256"][name] = build.ptx_sha256(ptx)
        print(f"{name}: PTX {expected['ptx_sha256'][name]} ({flashinfer_prefill.ARCH})")
    (dest / EXPECTED).write_text(json.dumps(expected, indent=1) + "\n")
    return 0


def _compare_with_stage(sources: pathlib.Path, name: str, ptx: str) -> str:
    """A line saying whether ``ptx`` is the PTX ``stage`` built for ``name`` on the development machine."""
    path = sources / EXPECTED
    if not path.is_file():
        return f"{name}: no {EXPECTED} in {sources} to compare the PTX with"
    expected = json.loads(path.read_text())
    here, there = expected["ptx_sha256"].get(name), build.ptx_sha256(ptx)
    if here == there:
        return f"{name}: PTX {there} is the one staged ({expected['nvcc']})"
    return (
        f"{name}: WARNING: PTX {there} built with {build.nvcc_version()!r} differs from the staged build {here} "
        f"({expected['nvcc']!r}): the tests will treat the capture as drift or skip it"
    )


def _check_sizes(fn, params: list) -> None:
    if len(params) != len(fn.params):
        raise ValueError(f"{fn.name} takes {len(fn.params)} parameters, the description gives {len(params)}")
    for i, (p, raw) in enumerate(zip(fn.params, params)):
        if len(raw) != p.size:
            raise ValueError(
                f"parameter {i} ({p.name}) has {p.size} bytes in the PTX, the description gives {len(raw)}"
            )


def _launch(rt_kernel, grid, block, shared: int, params: list) -> None:
    """cuLaunchKernel with ``params`` (bytes each) on flashsim.gpu.runtime's stream, then wait. The dynamic shared
    memory limit is set to ``shared`` first, as the projects' hosts do (FA2 from 48 KB up, llama.cpp always)."""
    from cuda.bindings import driver

    from flashsim.gpu import runtime as rt

    def ok(what, result):
        err = result[0]
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what}: {driver.cuGetErrorName(err)[1]}")
        return result[1] if len(result) > 1 else None

    handle = rt_kernel.kernel.handle
    if not isinstance(handle, driver.CUkernel):
        handle = driver.CUkernel(int(handle))
    function = ok("cuKernelGetFunction", driver.cuKernelGetFunction(handle))
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    ok("cuFuncSetAttribute", driver.cuFuncSetAttribute(function, attr, int(shared)))
    buffers = [ctypes.create_string_buffer(raw, len(raw)) for raw in params]
    pointers = (ctypes.c_void_p * len(buffers))(*[ctypes.addressof(b) for b in buffers])
    stream = rt.default_stream().handle
    ok("cuLaunchKernel", driver.cuLaunchKernel(function, *grid, *block, shared, stream, ctypes.addressof(pointers), 0))
    ok("cuStreamSynchronize", driver.cuStreamSynchronize(stream))


def prepare(name: str, sources: pathlib.Path, arch: str) -> tuple:
    """(kernel description, PTX, parsed PTX, entry name, (grid, block, shared bytes)) of one kernel, built here from
    the staged sources."""
    kernel = kernels.KERNELS[name]
    ptx = build.build_ptx(kernel, arch=arch, staged=sources, cache=False)
    ir = parse(ptx)
    return kernel, ptx, ir, capture.single_entry(ir), kernel.launch(ir)


def parameters(kernel, ir, entry: str, arrays: dict, address) -> list:
    """The launch's parameter bytes, each checked against the size the PTX declares."""
    params = kernel.parameters(ir, arrays, address)
    _check_sizes(ir.functions[entry], params)
    return params


def capture_one(name: str, sources: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    from flashsim.gpu import runtime as rt
    from flashsim.gpu.build import Build, assemble_ptx, ptxas_version

    arch = rt.current_arch()
    kernel, ptx, ir, entry, launch = prepare(name, sources, arch)
    print(_compare_with_stage(sources, name, ptx), flush=True)
    cubin = assemble_ptx(ptx, arch)
    built = Build.of_cubin(cubin, arch, kernel.unit, key=build.ptx_sha256(ptx))
    rt_kernel = rt.load(built, entry)
    arrays = kernel.arrays()
    device = {n: rt.to_device(a) for n, a in arrays.items()}
    params = parameters(kernel, ir, entry, arrays, lambda n: device[n].ptr)
    t0 = time.perf_counter()
    _launch(rt_kernel, *launch, params)
    seconds = time.perf_counter() - t0
    after = {n: d.to_numpy() for n, d in device.items()}
    meta = capture.record(kernel, ptx, build.nvcc_version(), launch, arch)
    meta.update(
        gpu=rt.require_gpu().name,
        ptxas=ptxas_version(),
        nvrtc=provenance.nvrtc_version(),
        date=time.strftime("%Y-%m-%d"),
        seconds=round(seconds, 4),
    )
    path = capture.capture_path(name, arch, out)
    capture.save(path, arrays, after, meta)
    return path


def capture_cutlass(sources: pathlib.Path, out: pathlib.Path) -> int:
    """Build the CUTLASS GEMM harness (tests/thirdparty/cutlass_gemm.py) with this machine's nvcc from the staged
    sources, keeping the PTX nvcc assembles into it, and run each input case through CUTLASS's own host code and
    launcher, the driver encoding the maps (the shim forwards and logs them); store inputs, D, the launch (grid,
    block, cluster, shared memory, the parameter bytes with the driver's maps) and the logged map arguments."""
    import tempfile

    from flashsim.gpu import runtime as rt

    gpu = rt.require_gpu().name  # before the build: no GPU, no point building
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        keep = pathlib.Path(tmp) / "keep"
        keep.mkdir()
        t0 = time.perf_counter()
        program = cutlass_gemm.build_host(staged=sources, keep=keep)
        build_seconds = time.perf_counter() - t0
        ptx = hostprogram.kept_ptx(keep)
    print(f"harness built in {build_seconds:.1f} s", flush=True)
    for name, case in sorted(cutlass_gemm.CASES.items()):
        print(_compare_with_stage(sources, name, ptx), flush=True)
        arrays = cutlass_gemm.inputs(case)
        with tempfile.TemporaryDirectory() as tmp:
            folder = pathlib.Path(tmp)
            for n in "ABC":
                (folder / f"{n}.bin").write_bytes(arrays[n].tobytes())
            args = ["run", cutlass_gemm.M, cutlass_gemm.N, cutlass_gemm.K]
            args += [repr(cutlass_gemm.ALPHA), repr(cutlass_gemm.BETA), folder]
            t0 = time.perf_counter()
            launch, log = cutlass_gemm.run_harness(program, args, folder, "forward")
            seconds = time.perf_counter() - t0
            d = np.frombuffer((folder / "D.bin").read_bytes(), np.float32).reshape(arrays["D"].shape)
        pointers = launch["pointers"]
        maps = cutlass_gemm.relative_maps(log, pointers)
        after = {**arrays, "D": d.copy()}
        _save_host_run(
            out, name, case, ptx, cutlass_gemm.ARCH, launch, pointers, maps, dict(arrays), after, gpu, seconds,
            build_seconds,
        )  # fmt: skip
    return capture_tutorial(sources, out, gpu)


def _save_host_run(out, name, case, ptx, arch, launch, pointers, maps, before, after, gpu, seconds, build_seconds):
    """Store one run of a kernel launched by its project's own host code: inputs, outputs and the provenance record
    (tests/thirdparty/capture.py) with the launch (cluster, parameter bytes, array addresses), the logged map
    arguments relative to those arrays, the GPU, ptxas and the run's and build's seconds."""
    from flashsim.gpu.build import ptxas_version

    launch_tuple = (launch["grid"], launch["block"], launch["shared_bytes"])
    meta = capture.record(case, ptx, build.nvcc_version(), launch_tuple, arch)
    meta.update(
        cluster=launch["cluster"],
        params=launch["params"],
        pointers=pointers,
        tensor_maps=maps,
        gpu=gpu,
        ptxas=ptxas_version(),
        date=time.strftime("%Y-%m-%d"),
        seconds=round(seconds, 4),
        build_seconds=round(build_seconds, 1),
    )
    path = capture.capture_path(name, arch, out)
    capture.save(path, before, after, meta)
    print(f"{name}: ok -> {path}", flush=True)


def capture_tutorial(sources: pathlib.Path, out: pathlib.Path, gpu: str) -> int:
    """The same for CuTe's Hopper tutorial GEMM (tests/thirdparty/cute_tutorial.py): its own host code builds the
    TMA atoms (the driver's maps, logged) and launches; C is read back."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        keep = pathlib.Path(tmp) / "keep"
        keep.mkdir()
        t0 = time.perf_counter()
        program = cute_tutorial.build_host(staged=sources, keep=keep)
        build_seconds = time.perf_counter() - t0
        ptx = hostprogram.kept_ptx(keep)
    print(f"tutorial built in {build_seconds:.1f} s", flush=True)
    _entry, sizes = cute_tutorial.entry(ptx)
    for name, case in sorted(cute_tutorial.CASES.items()):
        print(_compare_with_stage(sources, name, ptx), flush=True)
        arrays = cute_tutorial.inputs(case)
        with tempfile.TemporaryDirectory() as tmp:
            folder = pathlib.Path(tmp)
            for n in "ABC":
                (folder / f"{n}.bin").write_bytes(arrays[n].tobytes())
            args = ["run", cute_tutorial.M, cute_tutorial.N, cute_tutorial.K, folder]
            t0 = time.perf_counter()
            launch, log = cute_tutorial.run_harness(program, args, folder, "forward", sizes)
            seconds = time.perf_counter() - t0
            c = np.frombuffer((folder / "C.bin").read_bytes(), np.float16).reshape(arrays["C"].shape)
        after = {**arrays, "C": c.copy()}
        pointers = cute_tutorial.pointers(launch)
        maps = cutlass_gemm.relative_maps(log, pointers)
        _save_host_run(
            out, name, case, ptx, cute_tutorial.ARCH, launch, pointers, maps, arrays, after, gpu, seconds, build_seconds
        )
    return 0


def capture_flashinfer(sources: pathlib.Path, out: pathlib.Path) -> int:
    """Build FlashInfer's prefill harness (tests/thirdparty/flashinfer_prefill.py) once per variant with this
    machine's nvcc from the staged sources (the builds in parallel), keeping the PTX nvcc assembles into each, and
    run every input case through FlashInfer's own host code and launch, the driver encoding the maps (the shim
    forwards and logs them); store inputs, O, LSE, the launch (grid, block, shared memory, the parameter bytes with
    the driver's maps, the array addresses) and the logged map arguments."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from flashsim.gpu import runtime as rt

    fi = flashinfer_prefill
    gpu = rt.require_gpu().name  # before the builds: no GPU, no point building
    out.mkdir(parents=True, exist_ok=True)
    packages.tree(packages.PACKAGES[fi.PACKAGE], sources)  # extracted once, before the parallel builds read it
    t0 = time.perf_counter()
    with ThreadPoolExecutor(len(fi.VARIANTS)) as pool:
        done = pool.map(lambda v: fi.build(v, staged=sources, cache=False), fi.VARIANTS.values())
        built = dict(zip(fi.VARIANTS, done))
    build_seconds = time.perf_counter() - t0
    print(f"{len(built)} harness variants built in {build_seconds:.1f} s", flush=True)
    failed = []
    for name, case in sorted(fi.CASES.items()):
        program, ptx = built[case.variant]
        print(_compare_with_stage(sources, name, ptx), flush=True)
        arrays = fi.inputs(case)
        _entry, sizes = fi.entry(ptx)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                folder = pathlib.Path(tmp)
                for n in "QKV":
                    (folder / f"{n}.bin").write_bytes(arrays[n].tobytes())
                args = ["run", case.qo_len, case.kv_len, case.heads, folder]
                t0 = time.perf_counter()
                launch, log = fi.run_harness(program, args, folder, "forward", sizes)
                seconds = time.perf_counter() - t0
                o = np.frombuffer((folder / "O.bin").read_bytes(), arrays["O"].dtype).reshape(arrays["O"].shape)
                lse = np.frombuffer((folder / "LSE.bin").read_bytes(), np.float32).reshape(arrays["LSE"].shape)
        except RuntimeError as exc:
            failed.append(name)
            print(f"{name}: FAILED\n{exc}", flush=True)
            continue
        after = {**arrays, "O": o.copy(), "LSE": lse.copy()}
        pointers = launch["pointers"]
        maps = fi.relative_maps(log, pointers)
        _save_host_run(
            out, name, case, ptx, fi.ARCH, launch, pointers, maps, arrays, after, gpu, seconds, build_seconds
        )
    print(json.dumps({"captured": sorted(set(fi.CASES) - set(failed)), "failed": failed}), flush=True)
    return 1 if failed else 0


def capture_all(names, sources: pathlib.Path, out: pathlib.Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in names:
        cmd = [sys.executable, __file__, "capture-one", name, "--sources", str(sources), "--out", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        print(done.stdout.strip() or f"{name}: no output", flush=True)
        if done.returncode != 0:
            failed.append(name)
            print(f"{name}: FAILED\n{done.stderr.strip()}", flush=True)
    summary = {"captured": [n for n in names if n not in failed], "failed": failed}
    print(json.dumps(summary), flush=True)
    return 1 if failed else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/thirdparty_capture.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    s = sub.add_parser("stage", help="fetch the pinned archives and write their stripped copies")
    s.add_argument("--dest", type=pathlib.Path, default=REPO / ".thirdparty")
    c = sub.add_parser("capture", help="on a GPU: build, launch and store every kernel (or --kernel ones)")
    one = sub.add_parser("capture-one", help="one kernel, in this process (what capture runs for each)")
    one.add_argument("name", choices=sorted(kernels.KERNELS))
    for p in (c, one):
        p.add_argument("--sources", type=pathlib.Path, required=True, help="the folder stage wrote")
        p.add_argument("--out", type=pathlib.Path, required=True)
    c.add_argument("--kernel", action="append", choices=sorted(kernels.KERNELS), help="only these (default: all)")
    g = sub.add_parser("capture-cutlass", help="on a GPU: build and run the CUTLASS sm90 GEMM harness, store D")
    g.add_argument("--sources", type=pathlib.Path, required=True, help="the folder stage wrote")
    g.add_argument("--out", type=pathlib.Path, required=True)
    f = sub.add_parser("capture-flashinfer", help="on a GPU: build and run FlashInfer's sm90 prefill, store O, LSE")
    f.add_argument("--sources", type=pathlib.Path, required=True, help="the folder stage wrote")
    f.add_argument("--out", type=pathlib.Path, required=True)
    args = ap.parse_args(argv)
    if args.command == "capture-flashinfer":
        return capture_flashinfer(args.sources.resolve(), args.out)
    if args.command == "stage":
        return stage(args.dest)
    if args.command == "capture-cutlass":
        return capture_cutlass(args.sources.resolve(), args.out)
    if args.command == "capture-one":
        path = capture_one(args.name, args.sources.resolve(), args.out)
        print(f"{args.name}: ok -> {path}")
        return 0
    return capture_all(args.kernel or sorted(kernels.KERNELS), args.sources.resolve(), args.out)


if __name__ == "__main__":
    sys.exit(main())
