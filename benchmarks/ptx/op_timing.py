"""Where one launch of the FA3-style forward (benchmarks/ptx/fa3_style_forward.py's case) spends its time, per opcode:
the CPU time of every instruction run alone and of every stacked group (``S:`` its opcode, ``K`` its size) or chain.

    python benchmarks/ptx/op_timing.py [--top 30]          (needs nvcc; tests/thirdparty)

A development measurement, not part of flashsim: it times ``Machine._run_block``'s two calls that run work (an op's
``run`` and ``vectorize.run_group``) by compiling, in this process, a copy of that method's source with timers
around them, so it measures whichever flashsim is imported (PYTHONPATH) without changing it. Timers cost about a
microsecond per call: the total is a little above the launch's own time. One untimed launch first (decode, tables).
"""

from __future__ import annotations

import argparse
import collections
import inspect
import os
import pathlib
import re
import sys
import textwrap
import time

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks" / "ptx"))

import fa3_style_forward as bench  # noqa: E402
from thirdparty import flashinfer_prefill as fi  # noqa: E402

import flashsim  # noqa: E402
import flashsim.ptx as fptx  # noqa: E402
from flashsim.ptx import machine  # noqa: E402

RUN_OP = "ops[pc].run(g)"
RUN_GROUP = re.compile(r"vectorize\.run_group\(g, prog, item, self\.\w+\)")  # the wave's memo: named as it is


def timed_run_block(spent: collections.Counter, calls: collections.Counter):
    """Machine._run_block with CPU timers around each op's run and each stacked group (keyed by opcode)."""
    src = textwrap.dedent(inspect.getsource(machine.Machine._run_block))
    if RUN_OP not in src or not RUN_GROUP.search(src):
        raise SystemExit("Machine._run_block no longer has the calls this script times: update RUN_OP / RUN_GROUP")
    src = src.replace(RUN_OP, f"_t0 = _clock(); {RUN_OP}; _note(ops[pc].name, _t0)")
    src = RUN_GROUP.sub(lambda m: f"_t0 = _clock(); {m.group(0)}; _note(_group_key(ops, item), _t0)", src)

    def note(key, t0):
        spent[key] += time.process_time() - t0
        calls[key] += 1

    def group_key(ops, item):
        n = len(getattr(item, "groups", ()))
        size = f"chain of {n} x {len(item) // n}" if n else f"K={len(item)}"
        return f"S:{ops[item[0]].name} {size if len(item) > 4 else 'K<=4'}"

    namespace = dict(vars(machine), _clock=time.process_time, _note=note, _group_key=group_key)
    exec(compile(src, machine.__file__, "exec"), namespace)  # noqa: S102 - the method's own source, timers added
    return namespace["_run_block"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    case = fi.CASES[bench.CASE]
    program, ptx = fi.build(case.build)
    arrays = fi.inputs(case)
    launch, _log, params = fi.describe(case, ptx, program, arrays)
    kernel = fptx.load(ptx, arch=fi.ARCH).kernel(fi.entry(ptx)[0])
    grid, block, shared = tuple(launch["grid"]), tuple(launch["block"]), launch["shared_bytes"]

    def run():
        return fptx.launch(kernel, grid, block, params, shared_mem=shared)

    run()
    spent, calls = collections.Counter(), collections.Counter()
    machine.Machine._run_block = timed_run_block(spent, calls)
    t0 = time.process_time()
    run()
    total = time.process_time() - t0
    print(f"flashsim from {pathlib.Path(flashsim.__file__).parent}; load average {os.getloadavg()}")
    print(f"one launch of {bench.CASE}: {total:.3f} CPU s, {sum(spent.values()):.3f} s of it in the timed calls")
    print(f"{'CPU ms':>8} {'calls':>6} {'us/call':>8}  opcode (S: a stacked group or chain)")
    for key, t in spent.most_common(args.top):
        print(f"{t * 1e3:8.1f} {calls[key]:6d} {t / calls[key] * 1e6:8.1f}  {key}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
