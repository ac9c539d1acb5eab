"""Silicon probes: small kernels that exercise PTX instructions on chosen inputs, run once on a GPU and then, from
the stored outputs, in the simulator, bit for bit.

A probe names a kernel source under kernel/capture/isa/ (CUDA with inline asm, or hand-written PTX), the launch
and its arguments; inputs come from a seeded generator, so a capture stores them next to the GPU's outputs. The
GPU side (``python -m flashsim.gpu.capture.isa``) compiles the probe's PTX, assembles it with ptxas (the same
PTX the simulator runs: the contraction reader of flashsim.ptx.sass sees the same SASS) and writes
``tests/data/ptx_isa/<topic>_<arch>.npz``; ``check(probe, capture)`` runs the same launch in flashsim.ptx and
names the first differing element. Topics are the modules of this package (``TOPICS``), each a list ``PROBES``.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import pathlib
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ...gpu.build import compile_ptx, kernel_path
from ..launch import launch
from ..module import load

__all__ = [
    "Arg",
    "Probe",
    "TOPICS",
    "probes",
    "ptx_of",
    "arguments",
    "simulate",
    "check",
    "capture_path",
    "load_capture",
    "Mismatch",
]

TOPICS = ("integer", "floating", "convert", "warp", "matrix", "memory", "sfu", "contraction", "cluster")
CAPTURE_DIR = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "ptx_isa"


@dataclass(frozen=True)
class Arg:
    """One kernel argument: ``kind`` "in" (an array the kernel reads), "out" (an array it writes, zero-filled
    unless ``fill``), "inout", or "scalar" (a numpy scalar ``value``); ``make(rng)`` returns an input array, or
    ``shape`` / ``dtype`` give an output's."""

    name: str
    kind: str
    make: object = None
    shape: tuple = ()
    dtype: str = "u4"
    value: object = None
    fill: int = 0


@dataclass(frozen=True)
class Probe:
    """A launch of ``kernel`` in kernel/``source`` (.cu or .ptx) on ``grid`` x ``block`` (blocks, also with a
    cluster) with ``args``; ``cluster`` (x, y, z) blocks per thread-block cluster of the launch, or None."""

    topic: str
    name: str
    source: str
    kernel: str
    grid: tuple
    block: tuple
    args: tuple
    shared_mem: int = 0
    defines: tuple = ()
    options: tuple = ()
    seed: int = 0
    note: str = field(default="", compare=False)
    cluster: tuple | None = None

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.name}"


def probes(topic: str | None = None) -> list[Probe]:
    """Every probe of ``topic`` (every topic when None), in their modules' order."""
    out = []
    for t in TOPICS if topic is None else (topic,):
        try:
            mod = importlib.import_module(f"{__name__}.{t}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{t}":
                raise
            continue
        out += list(mod.PROBES)
    names = [p.key for p in out]
    if len(set(names)) != len(names):
        raise ValueError(f"probe names repeat: {sorted(n for n in names if names.count(n) > 1)}")
    return out


@lru_cache(maxsize=64)
def _ptx(source: str, defines: tuple, options: tuple, arch: str) -> str:
    path = kernel_path(source)
    if path.suffix == ".ptx":
        return path.read_text()
    return compile_ptx(path.read_text(), name=path.name, defines=dict(defines), arch=arch, options=options)


def ptx_of(probe: Probe, arch: str = "sm_90") -> str:
    """The PTX the probe runs (NVRTC's for a .cu source, the file itself for a .ptx one)."""
    return _ptx(probe.source, tuple(probe.defines), tuple(probe.options), arch)


def build_key(probe: Probe, arch: str = "sm_90") -> str:
    """A file name for the probe's PTX build (its source, defines, options and arch): probes that share a build
    share it (``python -m flashsim.gpu.capture.isa --export-ptx`` writes them, ``--ptx-dir`` reads them)."""
    text = json.dumps([probe.source, list(probe.defines), list(probe.options), arch])
    return hashlib.sha256(text.encode()).hexdigest()[:20] + ".ptx"


def ptx_sha256(probe: Probe, arch: str = "sm_90") -> str:
    return hashlib.sha256(ptx_of(probe, arch).encode()).hexdigest()


def arguments(probe: Probe) -> list:
    """Fresh arguments of the launch: generated inputs (seeded by the probe), zero- or ``fill``-ed outputs."""
    rng = np.random.default_rng([probe.seed, int(hashlib.sha256(probe.key.encode()).hexdigest()[:8], 16)])
    out = []
    for a in probe.args:
        if a.kind == "scalar":
            out.append(a.value)
        elif a.kind in ("in", "inout"):
            out.append(np.ascontiguousarray(a.make(rng)))
        elif a.kind == "out":
            out.append(np.full(a.shape, a.fill, np.dtype(a.dtype)))
        else:
            raise ValueError(f"{probe.key}: argument {a.name} has kind {a.kind!r}")
    return out


def inputs_sha256(probe: Probe, args: list) -> list:
    """sha256 of each generated input array (kind "in" / "inout") of ``args``, None for the others: what a capture
    records instead of the inputs themselves, which ``arguments`` regenerates from the probe's seed."""
    return [
        hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest() if a.kind in ("in", "inout") else None
        for a, x in zip(probe.args, args)
    ]


def capture_path(topic: str, arch: str = "sm_90") -> pathlib.Path:
    return CAPTURE_DIR / f"{topic}_{arch.replace('_', '')}.npz"


def load_capture(topic: str, arch: str = "sm_90") -> dict:
    """{probe name: {"args": [arrays...], "inputs_sha256": [...], "ptx_sha256": str, "meta": dict}} of a stored
    capture: the GPU's written arrays (kind "out" / "inout") after the launch, None for the other arguments, and the
    hash of every generated input (the inputs are regenerated, not stored: ``check``)."""
    with np.load(capture_path(topic, arch), allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        out = {}
        for name, info in meta["probes"].items():
            out[name] = {
                "args": [z[f"{name}/{i}"] if f"{name}/{i}" in z else None for i in range(info["n_args"])],
                "inputs_sha256": info["inputs_sha256"],
                "ptx_sha256": info["ptx_sha256"],
                "meta": {**{k: v for k, v in meta.items() if k != "probes"}, **info},
            }
        return out


@lru_cache(maxsize=32)
def _module(ptx: str, arch: str, contraction: str):
    """One Module per probe source: its kernels are decoded once each, its contraction read once."""
    return load(ptx, arch=arch, contraction=contraction)


def simulate(probe: Probe, arch: str = "sm_90", *, args=None, check=None, contraction: str = "sass"):
    """Run the probe in flashsim.ptx; (the arguments after the launch, the report)."""
    module = _module(ptx_of(probe, arch), arch, contraction)
    args = arguments(probe) if args is None else [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    report = launch(
        module.kernel(probe.kernel),
        probe.grid,
        probe.block,
        args,
        shared_mem=probe.shared_mem,
        check=check,
        cluster=probe.cluster,
    )
    return args, report


@dataclass
class Mismatch:
    """Where simulator and GPU first differ: the argument, the element index and both bit patterns."""

    probe: str
    arg: str
    index: tuple
    gpu: int
    sim: int
    count: int

    def __str__(self) -> str:
        return (
            f"{self.probe}: {self.count} elements of {self.arg} differ; first at {self.index}: GPU "
            f"{self.gpu:#x}, simulator {self.sim:#x}"
        )


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.itemsize in (1, 2, 4, 8) else a.view(np.uint8)


def check(probe: Probe, stored: dict, arch: str = "sm_90") -> Mismatch | None:
    """Run ``probe`` in the simulator on its inputs, regenerated and checked against the capture's hashes (a
    ValueError when they differ: the probe's generator or numpy's random stream changed since the capture), and
    compare every written array with the GPU's."""
    inputs = arguments(probe)
    for a, want, got in zip(probe.args, stored["inputs_sha256"], inputs_sha256(probe, inputs)):
        if want != got:
            raise ValueError(f"{probe.key}: input {a.name} no longer regenerates as captured: capture the probe again")
    got, _ = simulate(probe, arch, args=inputs)
    for a, mine, gpu in zip(probe.args, got, stored["args"]):
        if a.kind not in ("out", "inout"):
            continue
        x, y = _bits(gpu), _bits(mine)
        diff = np.flatnonzero(x.reshape(-1) != y.reshape(-1))
        if diff.size:
            i = int(diff[0])
            return Mismatch(
                probe.key,
                a.name,
                np.unravel_index(i, gpu.shape),
                int(x.reshape(-1)[i]),
                int(y.reshape(-1)[i]),
                int(diff.size),
            )
    return None
