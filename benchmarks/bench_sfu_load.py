"""What loading the SFU tables costs a new process: decoding the shipped file (the correctly rounded references are
recomputed to undo the stored differences) against loading the decoded tables from flashsim's disk cache.

    python3 benchmarks/bench_sfu_load.py [--json out.json]

Each figure comes from a fresh process (``sfu.load_tables("sm_90")``, wall time and the process's peak resident
memory from getrusage), with FLASHSIM_CACHE pointing at a new empty folder: the first process decodes and fills the
cache, the second loads from it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = """
import json, resource, time
t0 = time.perf_counter()
import flashsim
from flashsim.numerics import sfu
t1 = time.perf_counter()
tables = sfu.load_tables("sm_90")
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, FLASHSIM_CACHE=cache, PYTHONPATH=repo + os.pathsep + os.environ.get("PYTHONPATH", ""))
        for name in ("first process (decode, fill the cache)", "second process (disk cache)"):
            res = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=600)
            if res.returncode:
                raise SystemExit(res.stderr[-2000:])
            out[name] = json.loads(res.stdout.strip().splitlines()[-1])
            r = out[name]
            print(
                f"{name:42s} load {r['load_s']:7.3f} s, peak RSS {r['peak_rss_mb']:6.0f} MB "
                f"(import flashsim {r['import_s']:.2f} s)"
            )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
