"""Sustained stretches of launches and the clock and power they ran at (short_launch/, power_clock/).

``stretch`` (GPU, torch): one function launched back to back for some seconds, timed by CUDA events over the whole
stretch. ``smi_rows`` / ``stretches`` (no GPU): nvidia-smi's samples (run.sh's `nvidia-smi --query-gpu=timestamp,
clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv -lms 100`) matched to the
stretches: the SM clock and the power while each ran. (flashsim.gpu.clocks samples the clock through NVML inside
`flashsim bench kernel`; these experiments keep nvidia-smi, whose power.draw holds over stretches of seconds and whose
CSV is what their committed logs hold.)
"""

from __future__ import annotations

import csv
import json
import time
from datetime import datetime, timezone


def stretch(label: str, launch, flops_per_launch: float, seconds: float, rows: list, **fields) -> dict:
    """``launch`` back to back for ``seconds`` (groups of 10, then a synchronize), one second of idle after; appends
    and returns {name, t0, t1 (unix times), calls, ms (per launch), tflops, **fields} and prints it."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t0 = time.time()
    start.record()
    calls = 0
    while time.time() - t0 < seconds:
        for _ in range(10):
            launch()
        calls += 10
        torch.cuda.synchronize()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / calls
    row = dict(
        name=label, t0=t0, t1=time.time(), calls=calls, ms=ms, tflops=flops_per_launch / (ms * 1e-3) / 1e12, **fields
    )
    print(f"{label:<34} {calls:6d} launches, {ms:.4f} ms each, {row['tflops']:6.1f} TFLOP/s", flush=True)
    rows.append(row)
    time.sleep(1.0)
    return row


def smi_rows(path: str) -> list[tuple[float, float, float, str]]:
    """(unix time, SM clock MHz, power W, clock event reasons) per sample."""
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    out = []
    for r in rows[1:]:
        if len(r) < 6:
            continue
        t = datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()
        out.append((t, float(r[1].split()[0]), float(r[3].split()[0]), r[5].strip()))
    return out


def stretches(folder: str, skip_s: float = 0.5) -> list[dict]:
    """sustain.json's stretches, each with the samples taken while it ran (its first ``skip_s`` seconds left out):
    clock_min / clock_mean / clock_max (MHz), power_mean (W), samples, reasons."""
    smi = smi_rows(f"{folder}/smi.csv")
    out = []
    for row in json.load(open(f"{folder}/sustain.json")):
        sel = [s for s in smi if row["t0"] + skip_s < s[0] < row["t1"]]
        clk, pw = [s[1] for s in sel], [s[2] for s in sel]
        out.append(
            dict(
                row,
                samples=len(sel),
                clock_min=min(clk),
                clock_max=max(clk),
                clock_mean=sum(clk) / len(clk),
                power_mean=sum(pw) / len(pw),
                reasons=sorted({s[3] for s in sel}),
            )
        )
    return out
