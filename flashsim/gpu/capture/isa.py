"""Run the silicon probes (flashsim.ptx.probes) on the GPU at hand and store their outputs:
``python3 -m flashsim.gpu.capture.isa --out DIR [--topic T ...]``.

Each probe's PTX (NVRTC's for its .cu source, the same text flashsim.ptx runs) is assembled by ptxas for the GPU's
arch, so the SASS that ran is the SASS the simulator's contraction reader sees; its inputs are the probe's seeded
ones. DIR/<topic>_<arch>.npz holds, per probe, every array the launch writes (``name/I``, kinds "out" / "inout")
and, in ``meta``, the sha256 of each generated input (regenerated from the seed, not stored: a fifth of the bytes),
the PTX's sha256, the ptxas version and the launch, so tests/test_ptx_silicon.py can
rerun each probe in the simulator and the drift guard can tell a changed probe from a stored one. A probe whose
launch fails is recorded with its error (and the CUDA context is rebuilt only by a new process: the run stops).
Exit 0 when every probe ran. ``--export-ptx DIR`` (no GPU) writes the PTX of every probe build where the pinned
NVRTC is, ``--ptx-dir DIR`` runs those files on the GPU, so that the GPU runs the PTX the tests compile.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import time

import numpy as np

from ... import provenance
from ...ptx import probes as P
from .. import runtime as rt
from ..build import Build, assemble_ptx, ptxas_version

_BUILDS: dict = {}  # (sha256 of a PTX, arch) -> its Build: a topic's probes share one module, assembled once


def _build(ptx: str, arch: str, source: str) -> Build:
    key = (hashlib.sha256(ptx.encode()).hexdigest(), arch)
    got = _BUILDS.get(key)
    if got is None:
        cubin = assemble_ptx(ptx, arch)
        got = _BUILDS[key] = Build.of_cubin(cubin, arch, source)
    return got


def run_probe(probe: P.Probe, arch: str, ptx_dir: pathlib.Path | None = None) -> tuple[list, list, dict]:
    """(arguments before, arguments after, metadata) of one launch of ``probe`` on the GPU; its PTX compiled here,
    or read from ``ptx_dir`` (``--export-ptx``'s files, made where the pinned NVRTC is)."""
    ptx = P.ptx_of(probe, arch) if ptx_dir is None else (ptx_dir / P.build_key(probe, arch)).read_text()
    kernel = rt.load(_build(ptx, arch, probe.source), probe.kernel)
    before = P.arguments(probe)
    device = [rt.to_device(a) if isinstance(a, np.ndarray) else a for a in before]
    t0 = time.perf_counter()
    rt.launch(kernel, probe.grid, probe.block, *device, smem_bytes=probe.shared_mem, cluster=probe.cluster)
    after = [d.to_numpy() if isinstance(a, np.ndarray) else None for a, d in zip(before, device)]
    meta = {
        "ptx_sha256": hashlib.sha256(ptx.encode()).hexdigest(),
        "n_args": len(before),
        "inputs_sha256": P.inputs_sha256(probe, before),
        "source": probe.source,
        "kernel": probe.kernel,
        "grid": list(probe.grid),
        "block": list(probe.block),
        "shared_mem": probe.shared_mem,
        "cluster": None if probe.cluster is None else list(probe.cluster),
        "seconds": round(time.perf_counter() - t0, 4),
    }
    return before, after, meta


def capture_topic(topic: str, arch: str, out: pathlib.Path, ptx_dir: pathlib.Path | None = None) -> int:
    """Run every probe of ``topic``; write out/<topic>_<arch>.npz; the number of probes that failed."""
    arrays, meta, failed = (
        {},
        {
            "arch": arch,
            "ptxas": ptxas_version(),
            "nvrtc": provenance.nvrtc_version(),
            "gpu": rt.require_gpu().name,
            "date": time.strftime("%Y-%m-%d"),
            "probes": {},
        },
        0,
    )
    for probe in P.probes(topic):
        try:
            before, after, info = run_probe(probe, arch, ptx_dir)
        except Exception as exc:  # record and go on only for compile errors; a launch error ends the process
            print(f"  {probe.key}: FAILED {type(exc).__name__}: {exc}", flush=True)
            meta.setdefault("failed", {})[probe.name] = f"{type(exc).__name__}: {exc}"
            failed += 1
            if rt.sticky_error():
                break
            continue
        for i, (arg, b) in enumerate(zip(probe.args, after)):
            if arg.kind in ("out", "inout"):
                arrays[f"{probe.name}/{i}"] = b
        meta["probes"][probe.name] = info
        print(f"  {probe.key}: ok ({info['seconds']} s)", flush=True)
    path = out / f"{topic}_{arch.replace('_', '')}.npz"
    np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    print(f"{topic}: {len(meta['probes'])} probes -> {path}", flush=True)
    return failed


def export_ptx(folder: pathlib.Path, arch: str) -> int:
    """Write every probe build's PTX to ``folder`` (P.build_key names); the number of files."""
    folder.mkdir(parents=True, exist_ok=True)
    done = set()
    for probe in P.probes():
        key = P.build_key(probe, arch)
        if key not in done:
            (folder / key).write_text(P.ptx_of(probe, arch))
            done.add(key)
    return len(done)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flashsim.gpu.capture.isa", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=pathlib.Path, help="folder for the captures (needs a GPU)")
    ap.add_argument("--topic", action="append", choices=P.TOPICS, help="only these topics (default: all)")
    ap.add_argument(
        "--export-ptx",
        type=pathlib.Path,
        metavar="DIR",
        help="only write every probe's PTX to DIR "
        "(no GPU): made where the pinned NVRTC is, carried to the GPU and read there with --ptx-dir",
    )
    ap.add_argument("--ptx-dir", type=pathlib.Path, help="read the probes' PTX from DIR instead of compiling it")
    ap.add_argument("--arch", default="sm_90", help="with --export-ptx: the arch to compile for")
    args = ap.parse_args(argv)
    if args.export_ptx is not None:
        print(f"{export_ptx(args.export_ptx, args.arch)} PTX files -> {args.export_ptx}")
        return 0
    if args.out is None:
        ap.error("--out is needed (or --export-ptx)")
    args.out.mkdir(parents=True, exist_ok=True)
    arch = rt.current_arch()
    topics = [t for t in (args.topic or P.TOPICS) if P.probes(t)]
    failed = sum(capture_topic(t, arch, args.out, args.ptx_dir) for t in topics)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
