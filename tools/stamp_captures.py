"""Stamp GPU captures with the compiled fingerprint of the build that made them (flashsim.provenance), here.

    python tools/stamp_captures.py [FILE ...]      (default: every capture in tests/data)

A capture made on the H200 (tools/device_round.sh) records its source record: the sha256 of the kernel sources and
the define set it ran with. tools/collect_device_round.sh copies it into tests/data, in the same checkout the round
ran from, and calls this tool, which checks that each record equals the working tree's (same sources, same
defines) and then adds ``provenance["compiled"]``: the sha256 of the PTX that the pinned NVRTC emits for that build
(``compiled_fingerprint``), what tests/test_drift.py compares against today's build. A capture whose sources differ
from the working tree's is refused (the PTX of this tree would not be the PTX of what ran): re-capture it.

Only the records change: every other array of a file is written back bit for bit (checked before the file is
replaced). Exit status: 0 every file stamped (or already), 1 some refused (named, with the reason), 2 bad use or
an NVRTC that is not the pinned one (.ci/constraints.txt).

This module also holds what a capture file is (``CAPTURES``: which kernel made it, where its records lie, the
command that re-captures it) and how its records are read (``records``) and written (``write_records``);
tests/test_drift.py reads the captures through it.
"""

import argparse
import json
import os
import pathlib
import re
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run from a checkout without an install
    sys.path.insert(0, str(ROOT))

from flashsim import KernelConfig, provenance  # noqa: E402
from flashsim.gpu import build  # noqa: E402

DATA = ROOT / "tests" / "data"
CONSTRAINTS = ROOT / ".ci" / "constraints.txt"
ROUND = "OUT=<dir> tools/device_round.sh captures on the H200, then tools/collect_device_round.sh <dir> here"

# capture file (glob under tests/data) -> (kernel, where its records are, how to re-capture that file alone on the H200)
#   "per case": an attention file, one record per case in c<i>_meta (with the case's configuration and arch)
#   "npz": the member "provenance"; "json": the key "provenance"
CAPTURES = {
    "attn_sm90_*.npz": (
        "flash_fwd",
        "per case",
        "PYTHONPATH=. python3 -m flashsim.cli verify --replay tests/data/{name} --save-cases tests/data/{name}",
    ),
    "mma_sm90.npz": ("mma_capture", "npz", "PYTHONPATH=. python3 -m flashsim.gpu.capture.mma --out tests/data"),
    "mma_k32_sm90.npz": (
        "mma_k32_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.mma_k32 --out tests/data",
    ),
    "wgmma_sm90.npz": (
        "wgmma_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.wgmma --out tests/data",
    ),
    "mma_sm90_summary.json": (
        "mma_capture",
        "json",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.mma --out tests/data",
    ),
    "layout_sm90.npz": (
        "layout_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.layout --out tests/data",
    ),
    "sfu_sample_sm90.npz": (
        "sfu_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.sfu --out /tmp/sfu && "
        "cp /tmp/sfu/sfu_sample_sm90.npz tests/data/",
    ),
    "sfu_approx_sample_sm90.npz": (
        "sfu_approx_capture",
        "npz",
        "PYTHONPATH=. python3 -m flashsim.gpu.capture.sfu_approx --quick --out /tmp/sfa && "
        "cp /tmp/sfa/sfu_approx_sample_sm90.npz tests/data/",
    ),
}
NOT_CAPTURES: tuple[str, ...] = ()  # data files in tests/data that no GPU made (none today)


@dataclass(frozen=True)
class Record:
    """One provenance record of a capture file: ``case`` is the attention case's index (None: the file's only
    record); ``config`` the case's KernelConfig (None for the capture kernels); ``provenance`` the stored dict."""

    case: int | None
    kernel: str
    config: KernelConfig | None
    arch: str
    provenance: dict | None

    @property
    def build(self) -> tuple:
        """What ``provenance.compiled_fingerprints`` takes."""
        return (self.kernel, self.config, self.arch)


def capture_files(folder=DATA) -> list[pathlib.Path]:
    """The data files of ``folder`` (.npz and .json), NOT_CAPTURES left out."""
    return sorted(
        p for p in pathlib.Path(folder).iterdir() if p.suffix in (".npz", ".json") and p.name not in NOT_CAPTURES
    )


def entry(path) -> tuple | None:
    """CAPTURES' (kernel, where, re-capture command) of ``path``; None for a file that is no known capture."""
    for pattern, value in CAPTURES.items():
        if pathlib.PurePath(path).match(pattern):
            return value
    return None


def _json(text):
    try:
        return json.loads(text) if text else None
    except (TypeError, ValueError):
        return None


def _text(array: np.ndarray) -> str:
    return bytes(array).decode() if array.dtype == np.uint8 else str(array)


def _file_arch(path: pathlib.Path) -> str:
    """The architecture a capture file names: "..._sm90..." -> "sm_90" (the GPU tools name their files so)."""
    m = re.search(r"_sm(\d+[af]?)\b", path.stem + " ")
    if not m:
        raise ValueError(f"{path.name}: no _smXY in the name, and the file states no arch")
    return "sm_" + m.group(1)


def _stated_arch(arrays: dict, path: pathlib.Path) -> str:
    """The arch an npz capture states (its "arch" member, or "arch" in its JSON meta / summary), else its name's."""
    if "arch" in arrays:
        return _text(arrays["arch"])
    for key in ("meta", "meta_json", "summary"):
        meta = _json(_text(arrays[key])) if key in arrays else None
        if isinstance(meta, dict) and meta.get("arch"):
            return meta["arch"]
    return _file_arch(path)


def _case_index(key: str) -> int:
    return int(key[1 : -len("_meta")])


def records(path) -> list[Record]:
    """Every provenance record of the capture ``path`` (one per case for attention files)."""
    path = pathlib.Path(path)
    known = entry(path)
    if known is None:
        raise ValueError(f"{path.name} is not a known capture (CAPTURES in tools/stamp_captures.py)")
    kernel, where, _ = known
    if where == "json":
        data = json.loads(path.read_text())
        return [Record(None, kernel, None, data.get("arch") or _file_arch(path), data.get("provenance"))]
    with np.load(path, allow_pickle=False) as z:
        if where == "npz":
            arrays = {k: z[k] for k in z.files if k in ("provenance", "arch", "meta", "meta_json", "summary")}
            stored = _json(_text(arrays["provenance"])) if "provenance" in arrays else None
            return [Record(None, kernel, None, _stated_arch(arrays, path), stored)]
        metas = {_case_index(k): json.loads(_text(z[k])) for k in z.files if k.endswith("_meta")}
    return [
        Record(i, kernel, KernelConfig(**m["config"]), m.get("arch") or _file_arch(path), m.get("provenance"))
        for i, m in sorted(metas.items())
    ]


def _replace_npz(path: pathlib.Path, changed: dict[str, str]) -> None:
    """Rewrite the npz ``path`` with the string members ``changed`` replaced, every other member as it was (order
    and bytes); checked on the written file before it replaces ``path``."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    unknown = set(changed) - set(arrays)
    if unknown:
        raise KeyError(f"{path.name} has no member {sorted(unknown)}")
    new = {k: (np.array(changed[k]) if k in changed else a) for k, a in arrays.items()}
    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=path.parent)
    os.close(fd)
    try:
        np.savez_compressed(tmp, **new)
        with np.load(tmp, allow_pickle=False) as z:
            assert list(z.files) == list(arrays), f"{path.name}: member order changed"
            for k, a in arrays.items():
                b = z[k]
                same = (
                    str(b) == changed[k]
                    if k in changed
                    else a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                )
                assert same, f"{path.name}: member {k} did not survive the rewrite"
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_records(path, stamped: dict) -> None:
    """Store ``stamped`` ({case index or None: provenance dict}) as the records of ``path``; only they change."""
    path = pathlib.Path(path)
    _, where, _ = entry(path)
    if where == "json":
        data = json.loads(path.read_text())
        data["provenance"] = stamped[None]
        path.write_text(json.dumps(data, indent=1))  # as flashsim.gpu.capture.mma writes it
        return
    if where == "npz":
        _replace_npz(path, {"provenance": provenance.to_json(stamped[None])})
        return
    with np.load(path, allow_pickle=False) as z:
        metas = {_case_index(k): json.loads(_text(z[k])) for k in z.files if k.endswith("_meta")}
    changed = {}
    for case, record in stamped.items():
        metas[case]["provenance"] = record
        changed[f"c{case}_meta"] = json.dumps(metas[case])
    _replace_npz(path, changed)


def source_mismatch(record: Record, root=None) -> list[str]:
    """Why ``record``'s sources and defines are not the working tree's (provenance.compare); []: they are."""
    return provenance.compare(record.provenance, provenance.fingerprint(record.kernel, record.config, root=root))


def pinned_nvrtc(constraints=CONSTRAINTS) -> str | None:
    """The nvidia-cuda-nvrtc version CI pins (.ci/constraints.txt), None where the file names none."""
    path = pathlib.Path(constraints)
    if not path.is_file():
        return None
    m = re.search(r"^nvidia-cuda-nvrtc==(\S+)\s*$", path.read_text(), re.MULTILINE)
    return m.group(1) if m else None


@dataclass
class StampReport:
    stamped: dict  # file name -> records stamped anew
    unchanged: list  # file names already carrying the current compiled record
    refused: dict  # file name -> reasons


def stamp(paths, *, root=None, workers=1) -> StampReport:
    """Stamp every record of ``paths`` whose sources equal the working tree's (``root``: another kernel/ folder);
    a file with any other record is refused whole and left as it is."""
    report = StampReport({}, [], {})
    todo = {}
    for path in map(pathlib.Path, paths):
        if entry(path) is None:
            report.refused[path.name] = ["not a known capture (CAPTURES in tools/stamp_captures.py)"]
            continue
        recs = records(path)
        why = [
            f"{'record' if r.case is None else f'case c{r.case}'}: {reason}"
            for r in recs
            for reason in source_mismatch(r, root)
        ]
        if why:
            report.refused[path.name] = why + ["re-capture: " + entry(path)[2].format(name=path.name)]
        else:
            todo[path] = recs
    builds = [r.build for recs in todo.values() for r in recs]
    fingerprints = iter(provenance.compiled_fingerprints(builds, root=root, workers=workers))
    for path, recs in todo.items():
        stamped = {}
        for r in recs:
            compiled = next(fingerprints)
            if r.provenance.get("compiled") != compiled:
                stamped[r.case] = {**r.provenance, "compiled": compiled}
        if stamped:
            write_records(path, stamped)
            report.stamped[path.name] = len(stamped)
        else:
            report.unchanged.append(path.name)
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=pathlib.Path, help="capture files (default: every one in tests/data)")
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="compile processes (default 1: on a 2-core machine a pool of 2 was slower)",
    )
    args = p.parse_args(argv)
    try:
        have = provenance.nvrtc_version()
    except build.NvrtcUnavailable as exc:
        print(f"stamp_captures: {exc}", file=sys.stderr)
        return 2
    pin = pinned_nvrtc()
    if have != pin:
        print(
            f"stamp_captures: NVRTC {have} is loaded, CI pins {pin} ({CONSTRAINTS.relative_to(ROOT)}): "
            f"pip install -c .ci/constraints.txt nvidia-cuda-nvrtc (stamps must be made with the pinned NVRTC)",
            file=sys.stderr,
        )
        return 2
    files = args.files or capture_files()
    report = stamp(files, workers=args.workers)
    for name, n in report.stamped.items():
        print(f"stamped {name}: {n} record(s), NVRTC {have}")
    for name in report.unchanged:
        print(f"unchanged {name}: already stamped with today's build")
    for name, why in report.refused.items():
        print(f"REFUSED {name}: its recorded sources are not the working tree's:\n    " + "\n    ".join(why))
    return 1 if report.refused else 0


if __name__ == "__main__":
    sys.exit(main())
