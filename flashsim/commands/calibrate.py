"""Calibrate for the GPU at hand: capture the SFU tables (ex2/rcp) and run the mma bit-check (needs a GPU).

Runs the SFU capture (flashsim.gpu.capture.sfu): the ex2.approx.ftz.f32 and rcp.approx.ftz.f32 tables, then
checks the models against the GPU on every one of the 2^32 inputs, on > 10 million random inputs of the
kernel's range and on the special values. Tables whose ex2 model reproduced every result are installed in
the user cache for this GPU's architecture ($FLASHSIM_CACHE/<arch>/, else ~/.cache/flashsim/<arch>/), where
flashsim.sfu and the emulator find them. Then runs flashsim.gpu.capture.mma (when installed) into
<cache>/<arch>/mma/. Exit status 0 only when every model reproduced every checked result, 1 when one did not,
2 on a bad option or without a GPU (one line, before any work).
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from .. import calibration
from ..arch import get_arch
from ..gpu import runtime as rt
from ..gpu.capture.sfu import Capture, GpuDevice
from ..numerics import sfu


def add_arguments(parser) -> None:
    parser.add_argument("--keep", metavar="DIR", help="keep the capture files (tables, GPU samples, summary) in DIR")
    parser.add_argument(
        "--quick", action="store_true", help="validate on sample windows of every binade instead of all 2^32 inputs"
    )
    parser.add_argument(
        "--random-scale",
        type=float,
        default=1.0,
        help="size of the random validation sets (1.0: about 12 M ex2 and 11 M rcp inputs)",
    )
    parser.add_argument("--no-mma", action="store_true", help="skip the mma bit-check")


def _mma_check(arch: str) -> int | None:
    """Run flashsim.gpu.capture.mma into the cache (its exit status), or None where that tool does not exist."""

    try:
        found = importlib.util.find_spec("flashsim.gpu.capture.mma") is not None
    except ImportError:
        found = False
    if not found:
        print("mma bit-check: flashsim.gpu.capture.mma is not available, skipped")
        return None
    out = calibration.cache_dir(arch) / "mma"
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    print(f"mma bit-check: python -m flashsim.gpu.capture.mma --out {out}", flush=True)
    rc = subprocess.run([sys.executable, "-m", "flashsim.gpu.capture.mma", "--out", str(out)], env=env).returncode
    print(f"mma bit-check: {'ok' if rc == 0 else f'FAILED (exit status {rc})'}")
    return rc


def check_arguments(args) -> None:
    """Argument errors before any GPU work: ValueError naming the option."""
    if not (args.random_scale > 0 and args.random_scale < float("inf")):
        raise ValueError(f"--random-scale must be a positive number, got {args.random_scale}")
    if args.keep:
        keep = pathlib.Path(args.keep)
        if keep.exists() and not keep.is_dir():
            raise ValueError(f"--keep {args.keep}: exists and is not a folder")
        parent = keep if keep.exists() else keep.parent
        if not parent.is_dir():
            raise FileNotFoundError(2, "--keep: no such folder", str(parent.resolve()))


def run(args) -> int:
    """Errors (a bad option, no GPU or cuda-python, a failed CUDA call) are raised: flashsim.cli prints them in one
    line with exit status 2."""

    check_arguments(args)
    rt.require_gpu()
    arch = get_arch(rt.current_arch()).name

    work = pathlib.Path(args.keep) if args.keep else pathlib.Path(tempfile.mkdtemp(prefix="flashsim-calibrate-"))
    device = GpuDevice()
    print(f"calibrating {device.name} ({arch})", flush=True)
    capture = Capture(device, quick=args.quick, random_scale=args.random_scale, log=lambda m: print(m, flush=True))
    status = capture.run(work)
    exact = capture.summary["exact"]
    if exact["ex2"]:
        dest = calibration.install(work / calibration.filename("sfu", arch), "sfu", arch)
        sample = work / f"sfu_sample_{calibration.arch_tag(arch)}.npz"
        shutil.copyfile(sample, dest.parent / sample.name)
        sfu.reload()
        print(f"installed the SFU tables for {arch}: {dest}")
    else:
        print("the ex2 model did not reproduce the GPU: tables NOT installed")
    if not args.keep and status == 0:
        shutil.rmtree(work, ignore_errors=True)
    elif not args.keep:
        print(f"capture files kept for analysis: {work}")
    mma = None if args.no_mma else _mma_check(arch)
    ok = status == 0 and mma in (None, 0)
    print(
        f"calibrate {arch}: ex2 {'exact' if exact['ex2'] else 'NOT exact'}, "
        f"rcp {'exact' if exact['rcp'] else 'NOT exact'}"
        + ("" if mma is None else f", mma {'ok' if mma == 0 else 'FAILED'}")
        + (" -> OK" if ok else " -> FAILED")
    )
    return 0 if ok else 1
