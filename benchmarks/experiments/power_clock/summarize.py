"""No GPU: run.sh's logs summed up (the figures of README.md here and benchmarks/RESULTS.md).

    python3 benchmarks/experiments/power_clock/summarize.py benchmarks/experiments/power_clock/2026-12-01

Per stretch: TFLOP/s, the SM clock and power nvidia-smi sampled while it ran, and TFLOP/s per GHz of mean clock;
then each kernel against the ceiling of its P V instruction (f16 P@V: the f16 probe; f32: the f32 one), as measured
and at equal clocks (the rates per GHz).
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
from sustained import stretches  # noqa: E402


def main(folder: str) -> None:
    rows = stretches(folder)
    by_name = {r["name"]: r for r in rows}
    print("stretch                            TFLOP/s   SM clock MHz (mean, min-max)   power W   TFLOP/s per GHz")
    for r in rows:
        print(
            f"{r['name']:<34} {r['tflops']:7.1f}   {r['clock_mean']:6.0f} ({r['clock_min']:.0f}-{r['clock_max']:.0f})"
            f"          {r['power_mean']:5.0f}   {r['tflops'] / (r['clock_mean'] / 1000):7.1f}   "
            f"reasons {', '.join(r['reasons'])}"
        )
    for acc, probe in (("f16", "f16.f16.f16.f16"), ("f32", "f32.f16.f16.f32")):
        k = next((r for r in rows if r["name"] == f"kernel d=128 {acc} P@V 4,16,4096"), None)
        c = next((r for n, r in by_name.items() if n.startswith("ceiling") and probe in n and "varied" not in n), None)
        if k is None or c is None:
            continue
        rate = k["tflops"] / c["tflops"]
        per_clock = (k["tflops"] / k["clock_mean"]) / (c["tflops"] / c["clock_mean"])
        print(
            f"kernel {acc} P@V / ceiling {probe}: {rate:.3f} as measured, {per_clock:.3f} at equal clocks "
            f"(clock {k['clock_mean']:.0f} against {c['clock_mean']:.0f} MHz)"
        )


if __name__ == "__main__":
    main(sys.argv[1])
