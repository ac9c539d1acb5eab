"""``compare(kernel, grid, *args, target=..., **meta)``: the same launch under flashsim (the GPU's bits) and under
Triton's interpreter (``TRITON_INTERPRET=1``: numpy, ``tl.dot`` as np.matmul), and what differs.

Each run gets its own copy of every buffer argument. The interpreter runs in a child process with TRITON_INTERPRET=1
set before Triton is imported (Triton decides at import which functions it interprets, its own tl.cdiv and friends
included), importing the kernel's module from its file (a kernel defined in ``__main__`` or inside a function cannot be
re-imported: a clear error), on CPU torch tensors (Triton's interpreter takes torch tensors, so it needs torch); a grid
callable is evaluated once, here, and both runs get the same grid. Every buffer that either run wrote is compared
bit for bit (flashsim.diff.compare: elements that differ, the ulp histogram, the first differing element and both
values); buffers neither run changed are left out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..diff import TensorDiff
from ..diff import compare as diff_arrays
from .launch import launch
from .support import TritonArgumentError, import_triton

__all__ = ["compare", "Comparison"]


@dataclass
class Comparison:
    """``outputs`` (argument name -> flashsim.diff.TensorDiff, flashsim's bits as "got", the interpreter's as
    "expected"), ``seconds`` ({"flashsim": s, "interpreter": s}), ``report`` (flashsim.ptx's), ``target``,
    ``results`` (argument name -> (flashsim's array, the interpreter's array))."""

    kernel: str
    target: str
    outputs: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)
    report: object = None
    results: dict = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return all(d.ok for d in self.outputs.values())

    def __str__(self) -> str:
        s = self.seconds
        lines = [
            f"{self.kernel} on {self.target}: flashsim {s.get('flashsim', 0):.2f} s, Triton's interpreter "
            f"{s.get('interpreter', 0):.2f} s"
        ]
        if not self.outputs:
            lines.append("  neither run wrote any buffer")
        for name, d in self.outputs.items():
            if d.ok:
                lines.append(f"  {name}: all {d.total:,} elements bit-equal")
                continue
            hist = ", ".join(f"{k} ulp: {v:,}" for k, v in d.ulp_hist.items() if v and k != "0")
            lines.append(
                f"  {name}: {d.total - d.equal:,} of {d.total:,} elements differ (max {d.max_ulp:,} ulp; {hist}); "
                f"first at {d.first_index}: flashsim {d.first_values[0]}, interpreter {d.first_values[1]}"
            )
        return "\n".join(lines)


def _as_numpy(x):
    """A numpy copy of a buffer argument (numpy array or CPU torch tensor), else None."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if type(x).__module__.startswith("torch") and hasattr(x, "untyped_storage"):
        import torch

        t = x.detach().cpu().contiguous()
        if t.dtype == torch.bfloat16:
            import ml_dtypes

            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
        if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
            import ml_dtypes

            return t.view(torch.uint8).numpy().view(getattr(ml_dtypes, str(t.dtype).removeprefix("torch."))).copy()
        return t.numpy().copy()
    return None


def _diff(name: str, got: np.ndarray, expected: np.ndarray) -> TensorDiff:
    if got.dtype.kind == "f" or got.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return diff_arrays(name, got, expected)
    same = got == expected
    d = TensorDiff(name, int(same.size), int(same.sum()), 0)
    if not same.all():
        idx = tuple(int(i) for i in np.argwhere(~same)[0])
        d.first_index, d.first_values = idx, (repr(got[idx].item()), repr(expected[idx].item()))
        d.max_ulp = int(np.abs(got.astype(np.int64) - expected.astype(np.int64)).max())
        d.ulp_hist = {"0": int(same.sum()), "differ": int((~same).sum())}
    return d


def compare(kernel, grid, *args, target="sm_90", arch=None, num_warps=4, num_stages=3, **meta) -> Comparison:
    """Run the launch ``launch(kernel, grid, *args, target=..., **meta)`` would run under flashsim and under
    Triton's interpreter, each on copies of the buffers, and compare every buffer either run wrote (module
    docstring). The arguments themselves are left unchanged."""
    import_triton()
    from .launch import _function, prepare

    fn = _function(kernel)
    names = [p.name for p in fn.params]
    originals, sim_args, int_args, int_meta, sim_meta = {}, [], [], {}, {}
    for i, a in enumerate(args):
        arr = _as_numpy(a)
        name = names[i] if i < len(names) else f"argument {i}"
        if arr is not None:
            originals[name] = arr
        sim_args.append(a if arr is None else arr.copy())
        int_args.append(a if arr is None else arr.copy())
    for k, v in meta.items():
        arr = _as_numpy(v) if k in names else None
        if arr is not None:
            originals[k] = arr
        sim_meta[k] = v if arr is None else arr.copy()
        int_meta[k] = v if arr is None else arr.copy()
    options = dict(target=target, arch=arch, num_warps=num_warps, num_stages=num_stages)
    grid3 = prepare(fn, grid, *sim_args, **options, **sim_meta).grid  # a callable grid, evaluated once for both
    t0 = time.perf_counter()
    report = launch(fn, grid3, *sim_args, **options, **sim_meta)
    t1 = time.perf_counter()
    int_args, int_meta, seconds = interpret(fn, grid3, int_args, int_meta)
    out = Comparison(fn.__name__, report.compiled.target.name, report=report)
    out.seconds = {"flashsim": t1 - t0, "interpreter": seconds}
    sim_by = {names[i] if i < len(names) else f"argument {i}": a for i, a in enumerate(sim_args)} | sim_meta
    int_by = {names[i] if i < len(names) else f"argument {i}": a for i, a in enumerate(int_args)} | int_meta
    for name, before in originals.items():
        got = sim_by[name]
        expected = int_by[name]
        wrote = not (np.array_equal(got.view(np.uint8), before.view(np.uint8))) or not np.array_equal(
            expected.view(np.uint8), before.view(np.uint8)
        )
        if wrote:
            out.outputs[name] = _diff(name, got, expected)
            out.results[name] = (got, expected)
    return out


_CHILD = r"""
import importlib.util, os, pickle, sys, time
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
job = pickle.load(open(sys.argv[1], "rb"))
spec = importlib.util.spec_from_file_location(job["module"], job["file"])
mod = importlib.util.module_from_spec(spec)
sys.modules[job["module"]] = mod
spec.loader.exec_module(mod)
fn = mod
for part in job["qualname"].split("."):
    fn = getattr(fn, part)
def tensor(a):
    name = a.dtype.name
    if name == "bfloat16":
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    if name in ("float8_e4m3fn", "float8_e5m2"):
        return torch.from_numpy(a.view(np.uint8).copy()).view(getattr(torch, name))
    return torch.from_numpy(a.copy())
def back(t, like):
    if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        return t.view(torch.int16 if t.dtype == torch.bfloat16 else torch.uint8).numpy().view(like.dtype)
    return t.numpy()
args = [tensor(a) if isinstance(a, np.ndarray) else a for a in job["args"]]
meta = {k: tensor(v) if isinstance(v, np.ndarray) else v for k, v in job["meta"].items()}
t0 = time.perf_counter()
fn[job["grid"]](*args, **meta)
seconds = time.perf_counter() - t0
out = {"args": [back(t, a) if isinstance(a, np.ndarray) else a for t, a in zip(args, job["args"])],
       "meta": {k: back(meta[k], v) if isinstance(v, np.ndarray) else v for k, v in job["meta"].items()},
       "seconds": seconds}
pickle.dump(out, open(sys.argv[2], "wb"))
"""


def interpret(fn, grid: tuple, args: list, meta: dict):
    """Run ``fn`` (a JITFunction) over ``grid`` under TRITON_INTERPRET=1 in a child process (module docstring) on
    ``args`` / ``meta`` (numpy arrays for buffers); returns (args, meta, seconds) with the buffers as it left them."""
    import inspect
    import os
    import pathlib
    import pickle
    import subprocess
    import sys
    import tempfile

    module, qualname = fn.fn.__module__, fn.fn.__qualname__
    try:
        file = inspect.getfile(fn.fn)
    except TypeError:
        file = None
    if module == "__main__" or "<locals>" in qualname or not file or not pathlib.Path(file).is_file():
        raise TritonArgumentError(
            f"kernel: compare re-imports {fn.__name__}'s module in a child process for Triton's interpreter; define "
            "it at the top level of an importable .py file (not in __main__ or inside a function)"
        )
    try:
        import torch  # noqa: F401 - only to fail here, with the reason, rather than in the child
    except ImportError:
        raise TritonArgumentError("compare runs Triton's interpreter, which needs torch: pip install torch") from None
    with tempfile.TemporaryDirectory() as tmp:
        job, result = pathlib.Path(tmp, "job.pkl"), pathlib.Path(tmp, "out.pkl")
        payload = dict(module=module, qualname=qualname, file=file, grid=tuple(grid), args=list(args), meta=meta)
        with open(job, "wb") as f:
            pickle.dump(payload, f)
        env = dict(os.environ, TRITON_INTERPRET="1")
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(job), str(result)], capture_output=True, text=True, env=env
        )
        if done.returncode != 0:
            tail = "\n".join(done.stderr.strip().splitlines()[-15:])
            raise RuntimeError(f"Triton's interpreter failed on {fn.__name__}:\n{tail}")
        with open(result, "rb") as f:
            out = pickle.load(f)
    return out["args"], out["meta"], out["seconds"]
