"""On the GPU: the host time of a serving call's parts, and of each way of handing the driver a launch.

    python3 benchmarks/experiments/serving_host_time/gpu_parts.py --out DIR     (under a minute on an H100)

Writes DIR/gpu_parts.txt and DIR/gpu_parts.json. Shape: decode B=1, Nk=2048, Hq 32, Hkv 8, d 128, bf16 (the last
--call row of benchmarks/bench_serving.py: index check, flash_fwd with 32 splits, flash_combine). Every number is
the host time per call in us: the wall time of N back-to-back calls without a synchronisation (after one), over N,
the median of R such runs (bench_serving.host_us, as its "host" columns).

- **layers**: the public call; serving_torch._enqueue; flashsim.gpu.serving.enqueue (addresses as ints); the three
  packed launches alone (flashsim.gpu.packed.driver_launch), each kernel alone;
- **parts** of _enqueue on CUDA: the two allocations (torch.empty_like of q and of the lse template; the
  new_empty it replaced; one allocation cut into o and lse by views, for comparison), the key tuple, the capture
  test, the raw stream, the record read;
- **launch forms** of each kernel, each checked bit for bit against the default (o and lse equal after the three
  launches): cuda.bindings' cuLaunchKernelEx (the previous path); ctypes cuLaunchKernelEx with the library's
  CUkernel (the default now); with the context's CUfunction (cuKernelGetFunction once) instead; with the parameters
  in one buffer (``extra``: CU_LAUNCH_PARAM_BUFFER_POINTER / SIZE, each parameter at its natural alignment) instead
  of the pointer array; and cuLaunchKernel (no configuration structure) where the launch has no attribute.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
from pathlib import Path

import numpy as np
import torch

import flashsim
from flashsim.gpu import packed
from flashsim.gpu import serving as gs
from flashsim.gpu import serving_torch as st
from flashsim.gpu.torch_op import _raw_stream

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/: the benchmark's own host timing
from bench_serving import host_us  # noqa: E402  (median of rounds, as the benchmark's host columns)

B, NK, HQ, HKV, D = 1, 2048, 32, 8, 128
DEVICE = "cuda"


def extra_buffer(p: packed.PackedLaunch):
    """(the ``extra`` array, what keeps it alive): p's parameters in one buffer, each at its natural alignment (the
    kernel parameter ABI), read from its slots now (the addresses written last)."""
    layout, off = [], 0
    for t in p.types:
        off = -(-off // t.itemsize) * t.itemsize
        layout.append((off, t))
        off += t.itemsize
    buf = (ctypes.c_uint8 * max(off, 1))()
    raw = np.frombuffer(buf, np.uint8)
    for (o, t), value in zip(layout, p.values()):
        raw[o : o + t.itemsize] = np.asarray(value, t).reshape(1).view(np.uint8)
    size = ctypes.c_size_t(off)
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size), 0)  # cuda.h: 0x01, 0x02, END
    return extra, (buf, size)


def forms(p: packed.PackedLaunch, stream: int) -> dict:
    """name -> a no-argument callable launching ``p`` on ``stream`` that way (module docstring)."""
    from cuda.bindings import driver

    lib = ctypes.CDLL("libcuda.so.1")
    ex = lib.cuLaunchKernelEx
    ex.argtypes, ex.restype = (ctypes.c_void_p,) * 4, ctypes.c_int
    plain = lib.cuLaunchKernel
    plain.argtypes = (ctypes.c_void_p, *(ctypes.c_uint,) * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
    plain.restype = ctypes.c_int
    handle = int(p.kernel.handle)
    err, function = driver.cuKernelGetFunction(driver.CUkernel(handle))
    assert int(err) == 0, err
    function = int(function)
    bconfig, bfunction = packed.native_config(p.config), driver.CUfunction(handle)
    cconfig, keep = packed.c_config(p.config)
    caddr = ctypes.addressof(cconfig)
    extra, keep2 = extra_buffer(p)
    xaddr = ctypes.addressof(extra)
    params = p.params_addr

    # each form sets the stream in its configuration per launch, as driver_launch does
    def bindings():
        bconfig.hStream = stream
        return driver.cuLaunchKernelEx(bconfig, bfunction, params, 0)

    def ctypes_function():
        cconfig.hStream = stream
        return ex(caddr, function, params, None)

    def ctypes_extra():
        cconfig.hStream = stream
        return ex(caddr, handle, None, xaddr)

    def ctypes_function_extra():
        cconfig.hStream = stream
        return ex(caddr, function, None, xaddr)

    out = {
        "bindings": bindings,
        "ctypes (default)": lambda: packed.driver_launch(p, stream),
        "ctypes CUfunction": ctypes_function,
        "ctypes extra buffer": ctypes_extra,
        "ctypes CUfunction extra": ctypes_function_extra,
    }
    if not cconfig.numAttrs:  # no configuration structure: eleven arguments for ctypes to convert instead
        g, b = p.config.grid, p.config.block
        args = (*g, *b, int(p.config.shmem_size or 0), stream)
        out["ctypes cuLaunchKernel CUfunction"] = lambda: plain(function, *args, params, None)
    out["_keep"] = (keep, keep2, extra)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=21)
    args = ap.parse_args()
    n, r = args.calls, args.repeat
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.set_grad_enabled(False)
    g = torch.Generator(device=DEVICE).manual_seed(0)
    q = torch.randn((B, 1, HQ, D), generator=g, device=DEVICE).to(torch.bfloat16)
    k = torch.randn((B, NK, HKV, D), generator=g, device=DEVICE).to(torch.bfloat16)
    v = torch.randn((B, NK, HKV, D), generator=g, device=DEVICE).to(torch.bfloat16)
    sl = torch.full((B,), NK, dtype=torch.int32, device=DEVICE)
    ref_o, ref_lse = flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)
    torch.cuda.synchronize()
    hit = next(h for h in st._KEYS.values() if h.prob.nk_cap == NK and h.prob.batch == B)
    plan = hit.plan
    dev = q.get_device()
    stream = _raw_stream(dev)
    o, lse = torch.empty_like(q), torch.empty_like(hit.lse_like)
    parts = torch.empty((max(plan.part_bytes, 1),), dtype=torch.uint8, device=DEVICE)
    addrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), 0, 0, 0, sl.data_ptr(), 0)
    gs.enqueue(plan, stream, *addrs, parts.data_ptr())  # the slots now hold these live buffers' addresses
    torch.cuda.synchronize()
    same = torch.equal(o.view(torch.int16), ref_o.view(torch.int16)) and torch.equal(lse, ref_lse)
    launches = {
        "check": plan.packed_check,
        "flash_fwd": plan.packed_fwd,
        "combine": plan.packed_combine_overlap
        if gs.OVERLAP_COMBINE and plan.packed_combine_overlap is not None
        else plan.packed_combine,
    }
    res: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "calls": n, "repeat": r}
    res["serving.enqueue bits equal to the call"] = bool(same)
    res["driver_launch path"] = "ctypes" if packed._LAUNCHER and packed._LAUNCHER[0] is not None else "cuda.bindings"
    op_args = (q, k, v, sl, None, 0, None, False, None, "f32", (), None, True, (-1, -1), 0.0, True)
    res["layers"] = {
        "call": host_us(lambda: flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl), n, r),
        "_enqueue": host_us(lambda: st._enqueue("attention_with_kvcache", *op_args), n, r),
        "serving.enqueue": host_us(lambda: gs.enqueue(plan, stream, *addrs, parts.data_ptr()), n, r),
        "driver_launch x3": host_us(lambda: [packed.driver_launch(p, stream) for p in launches.values()], n, r),
    }
    lse_shape = hit.lse_shape
    nbytes_o = q.numel() * q.element_size()

    def one_allocation():
        buf = torch.empty((nbytes_o + lse.numel() * 4,), dtype=torch.uint8, device=q.device)
        return buf[:nbytes_o].view(q.dtype).view(q.shape), buf[nbytes_o:].view(torch.float32).view(lse_shape)

    key_args = ("attention_with_kvcache", q, k, v, sl, None, 0, None, False, None, "f32", (), None, (-1, -1), 0.0)
    res["parts"] = {
        "torch.empty_like(q)": host_us(lambda: torch.empty_like(q), n, r),
        "torch.empty_like(lse template)": host_us(lambda: torch.empty_like(hit.lse_like), n, r),
        "q.new_empty(lse shape, float32)": host_us(lambda: q.new_empty(lse_shape, dtype=torch.float32), n, r),
        "one allocation + views (o, lse)": host_us(one_allocation, n, r),
        "o.new_empty((0,), int64)": host_us(lambda: o.new_empty((0,), dtype=torch.int64), n, r),
        "key tuple (q, k, v, seqlens)": host_us(lambda: st.call_key(*key_args), n, r),
        "_capturing()": host_us(st._capturing, n, r),
        "_raw_stream(dev)": host_us(lambda: _raw_stream(dev), n, r),
        "serving.raise_pending()": host_us(gs.raise_pending, n, r),
        "6 data_ptr()": host_us(
            lambda: (q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), sl.data_ptr()), n, r
        ),
    }
    res["forms"] = {}
    for name, p in launches.items():
        fs = forms(p, stream)
        keep = fs.pop("_keep")
        rows = {}
        for form, fn in fs.items():
            status = fn()  # None (driver_launch raises on failure), a CUresult int, or cuda.bindings' (CUresult,)
            if status not in (None, 0) and not (isinstance(status, tuple) and int(status[0]) == 0):
                raise RuntimeError(f"{name} launched as {form}: {status}")
            rows[form] = host_us(fn, n, r)
            # the form's bits: the three launches with this form for this kernel, the outputs against the call's
            o.zero_(), lse.zero_()
            for other_name, other in launches.items():
                fn() if other_name == name else packed.driver_launch(other, stream)
            torch.cuda.synchronize()
            rows[form + " bits equal"] = bool(
                torch.equal(o.view(torch.int16), ref_o.view(torch.int16)) and torch.equal(lse, ref_lse)
            )
        res["forms"][name] = rows
        del keep
    # FA2 through SDPA, the reference the issue names
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            sdpa = torch.nn.functional.scaled_dot_product_attention
            res["layers"]["FA2 (SDPA)"] = host_us(lambda: sdpa(qt, kt, vt, enable_gqa=True), n, r)
    except Exception as exc:  # noqa: BLE001 - recorded, the rest stands
        res["FA2 error"] = f"{type(exc).__name__}: {exc}"[:300]
    lines = [f"{res['device']}, torch {res['torch']}: host us per call, median of {r} x {n} calls"]
    lines.append(f"serving.enqueue's outputs bit-equal to the call's: {res['serving.enqueue bits equal to the call']}")
    lines.append(f"packed.driver_launch through {res['driver_launch path']}")
    if "FA2 error" in res:
        lines.append(f"FA2 (SDPA): {res['FA2 error']}")
    for section in ("layers", "parts"):
        lines += [f"{section}:"] + [f"  {k:40s} {v:7.2f}" for k, v in res[section].items()]
    for kname, rows in res["forms"].items():
        lines.append(f"launch forms of {kname}:")
        lines += [f"  {k:40s} {v:7.2f}" for k, v in rows.items() if not k.endswith("bits equal")]
        lines.append(
            "  bits equal: " + ", ".join(f"{k[:-11]} {v}" for k, v in rows.items() if k.endswith("bits equal"))
        )
    text = "\n".join(lines)
    print(text)
    (out_dir / "gpu_parts.txt").write_text(text + "\n")
    (out_dir / "gpu_parts.json").write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
