"""The GPU's outputs of the third-party launches and their replay in the simulator.

A capture, tests/data/thirdparty/<name>_<arch>.npz, holds every array of the launch before (``in/<array>``) and
after (``out/<array>``) the GPU ran it, and ``meta`` (JSON): the package, version and archive sha256, the unit's
sha256, nvcc's flags and version, the PTX's sha256, the launch, the GPU and the date. ``simulate`` runs the same
launch in flashsim.ptx on given arrays, from the same parameter description as the GPU (kernels.py).
"""

from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np

import flashsim.ptx as fptx
from flashsim.gpu.build import kernel_path

from . import packages

__all__ = ["CAPTURE_DIR", "capture_path", "load", "save", "simulate", "record", "single_entry"]

CAPTURE_DIR = pathlib.Path(__file__).resolve().parents[1] / "data" / "thirdparty"


def capture_path(name: str, arch: str = "sm_90", folder: pathlib.Path = CAPTURE_DIR) -> pathlib.Path:
    return folder / f"{name}_{arch.replace('_', '')}.npz"


def record(kernel, ptx: str, nvcc: str, launch: tuple, arch: str) -> dict:
    """The provenance of one build and launch of ``kernel``."""
    package = packages.PACKAGES[kernel.package]
    grid, block, shared = launch
    return {
        "kernel": kernel.name,
        "package": package.name,
        "version": package.version,
        "archive": package.filename,
        "archive_sha256": package.sha256,
        "unit": kernel.unit,
        "unit_sha256": hashlib.sha256(kernel_path(kernel.unit).read_bytes()).hexdigest(),
        "flags": list(kernel.flags),
        "includes": list(kernel.includes),
        "nvcc": nvcc,
        "arch": arch,
        "ptx_sha256": hashlib.sha256(ptx.encode()).hexdigest(),
        "grid": list(grid),
        "block": list(block),
        "shared_bytes": int(shared),
        "seed": kernel.seed,
        "outputs": list(kernel.outputs),
    }


def save(path: pathlib.Path, before: dict, after: dict, meta: dict) -> None:
    arrays = {f"in/{k}": v for k, v in before.items()} | {f"out/{k}": v for k, v in after.items()}
    np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)


def load(path: pathlib.Path) -> tuple[dict, dict, dict]:
    """(arrays before the launch, arrays after it, meta) of a stored capture."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        before = {k[3:]: z[k] for k in z.files if k.startswith("in/")}
        after = {k[4:]: z[k] for k in z.files if k.startswith("out/")}
    return before, after, meta


def single_entry(ir_module) -> str:
    """The one kernel of a unit's PTX (each unit instantiates exactly one)."""
    entries = ir_module.entries()
    if len(entries) != 1:
        raise ValueError(f"a third-party unit must define one kernel, its PTX has {entries}")
    return entries[0]


def simulate(kernel, ptx: str, arrays: dict, arch: str = "sm_90", check=None):
    """Run ``kernel``'s launch in flashsim.ptx on ``arrays`` (written in place); the launch report."""
    module = fptx.load(ptx, arch=arch)
    grid, block, shared = kernel.launch(module.ir)
    params = kernel.parameters(module.ir, arrays, lambda name: fptx.address(arrays[name]))
    entry = module.kernel(single_entry(module.ir))
    return fptx.launch(entry, grid, block, params, shared_mem=shared, check=check)
