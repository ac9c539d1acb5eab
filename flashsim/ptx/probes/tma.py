"""TMA probes: hand-written PTX kernels for bulk tensor copies and the cases they run, written once for the
simulator's tests (tests/test_ptx_tma.py) and the silicon capture (python -m flashsim.gpu.capture.tma).

Every kernel reads its tensor map through a global pointer (``.param .u64 tmap``, the map in a 128-byte global buffer:
on the GPU the driver's CUtensorMap, in the simulator flashsim's encoding), or, with ``map_param``, takes it as a
``.param .align 64 .b8 tmap[128]`` parameter. A load kernel fills its shared buffer with ``SENTINEL`` bytes, copies
the box to ``smem + dst_offset`` with cp.async.bulk.tensor and an mbarrier (arrive.expect_tx, try_wait.parity) and
writes the whole buffer (the swizzled image) to ``out``, then a word that is 1 if the mbarrier's phase completed (the
transaction bytes all arrived) and 0 if the wait gave up (``load_out_bytes``); a store kernel fills its buffer from
``img`` and stores (or reduces) the box at ``smem + dst_offset`` into the tensor. ``arrays(case)`` makes a case's
seeded tensor and image.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - a base dependency
    _BF16 = None

__all__ = ["Case", "CASES", "load_ptx", "store_ptx", "bulk_ptx", "pipeline_ptx", "arrays", "smem_bytes", "dims"]
__all__ += ["load_out_bytes", "SENTINEL", "MAP_RULES", "f32_edges"]
__all__ += ["BULK", "bulk_inputs", "bulk_name"]

_DTYPES = {"f2": np.dtype(np.float16), "f4": np.dtype(np.float32), "u1": np.dtype(np.uint8)}
_DTYPES.update({"u2": np.dtype(np.uint16), "u4": np.dtype(np.uint32), "i4": np.dtype(np.int32), "bf16": _BF16})
_DTYPES.update({"f8": np.dtype(np.float64), "u8": np.dtype(np.uint64)})


@dataclass(frozen=True)
class Case:
    """One TMA launch: ``kind`` "load", "store" or "reduce" (cp.reduce.async.bulk.tensor ``op``); the global tensor
    of numpy ``dtype`` and ``shape`` (outermost first; each row padded by ``pad`` elements, so that strides are not
    dims), the map's ``data_type`` (CUDA's name), ``box`` / ``element_strides`` / ``coords`` innermost first,
    ``swizzle``, ``oob_fill``, the shared destination ``dst_offset`` bytes past a 1024-aligned buffer, and ``room``
    spare bytes after the box in that buffer (where a layout wider than the dense box would show, instead of
    faulting past the buffer); ``fault``, for a case the GPU faults on, what the simulator's refusal says."""

    name: str
    kind: str
    dtype: str
    data_type: str
    shape: tuple
    box: tuple
    coords: tuple
    swizzle: str = "NONE"
    element_strides: tuple | None = None
    oob_fill: str = "NONE"
    dst_offset: int = 0
    pad: int = 0
    op: str = "add"
    room: int = 0
    fault: str = ""  # the GPU faults on this case: what the simulator's error says (a regular expression)

    @property
    def rank(self) -> int:
        return len(self.shape)


CASES = (
    Case("load2d_none", "load", "f2", "FLOAT16", (40, 64), (64, 16), (0, 8)),
    Case("load2d_sw32", "load", "f2", "FLOAT16", (40, 48), (16, 16), (16, 4), swizzle="32B"),
    Case("load2d_sw64", "load", "f4", "FLOAT32", (40, 48), (16, 16), (16, 4), swizzle="64B"),
    Case("load2d_sw128", "load", "f2", "FLOAT16", (40, 64), (64, 16), (0, 8), swizzle="128B"),
    Case("load2d_sw128_narrow", "load", "f2", "FLOAT16", (40, 64), (32, 24), (8, 3), swizzle="128B", room=2048),
    Case("load2d_sw128_offset", "load", "f2", "FLOAT16", (40, 64), (64, 8), (0, 0), swizzle="128B", dst_offset=384),
    Case("load2d_oob_zero", "load", "f4", "FLOAT32", (20, 24), (16, 16), (16, 12), pad=8),
    Case("load2d_oob_neg", "load", "f4", "FLOAT32", (20, 24), (16, 16), (-8, -5), swizzle="64B"),
    Case("load2d_oob_nan", "load", "f4", "FLOAT32", (20, 24), (16, 16), (16, 12), oob_fill="NAN_REQUEST_ZERO_FMA"),
    Case("load2d_oob_nan_f16", "load", "f2", "FLOAT16", (10, 24), (32, 8), (8, 6), oob_fill="NAN_REQUEST_ZERO_FMA"),
    Case("load2d_oob_nan_bf16", "load", "bf16", "BFLOAT16", (10, 24), (16, 8), (16, -3), oob_fill=1),
    Case(
        "load2d_u8",
        "load",
        "u1",
        "UINT8",
        (30, 100),
        (64, 8),
        (40, 25),
        swizzle="64B",
        pad=12,
        fault="innermost coordinate",
    ),
    # boxes narrower than their swizzle span, and where a UINT8 box may start: what the GPU does with each
    Case("load2d_sw64_narrow", "load", "f2", "FLOAT16", (40, 48), (16, 12), (16, 4), swizzle="64B", room=1024),
    Case("load2d_sw32_narrow", "load", "u4", "UINT32", (40, 32), (4, 10), (4, 2), swizzle="32B", room=1024),
    Case("load2d_u8_none", "load", "u1", "UINT8", (30, 100), (64, 8), (40, 25), pad=12, fault="innermost coordinate"),
    Case("load2d_u8_x48", "load", "u1", "UINT8", (30, 100), (64, 8), (48, 25), swizzle="64B", pad=12),
    Case("load2d_u8_dim112", "load", "u1", "UINT8", (30, 112), (64, 8), (48, 25), swizzle="64B"),
    Case(
        "load2d_u8_x40_dim112",
        "load",
        "u1",
        "UINT8",
        (30, 112),
        (64, 8),
        (40, 25),
        swizzle="64B",
        fault="innermost coordinate",
    ),
    Case(
        "load2d_u8_x40_inside",
        "load",
        "u1",
        "UINT8",
        (30, 112),
        (64, 8),
        (40, 4),
        swizzle="64B",
        fault="innermost coordinate",
    ),
    Case("load2d_f16_x4", "load", "f2", "FLOAT16", (40, 64), (32, 16), (4, 8), fault="innermost coordinate"),
    # the layouts above, re-run where the GPU faulted: rows padded to the span overflow a buffer sized for the dense
    # box (the simulator must refuse as the GPU faults), and the 5-D box with room to show its rows
    Case(
        "load2d_sw128_narrow_tight",
        "load",
        "f2",
        "FLOAT16",
        (40, 64),
        (32, 24),
        (8, 3),
        swizzle="128B",
        fault="pass the block's",
    ),
    Case(
        "load5d_room",
        "load",
        "u2",
        "UINT16",
        (2, 3, 4, 5, 16),
        (8, 4, 3, 2, 2),
        (8, 2, 1, 2, 1),
        swizzle="32B",
        room=1024,
    ),
    # what a TFLOAT32 / *_FTZ map does to ties, subnormals, NaNs, infinities and the largest finite values
    Case("load2d_tf32_edges", "load", "u4", "TFLOAT32", (16, 32), (32, 8), (0, 4)),
    Case("load2d_tf32ftz_edges", "load", "u4", "TFLOAT32_FTZ", (16, 32), (32, 8), (0, 4)),
    Case("load2d_f32ftz_edges", "load", "u4", "FLOAT32_FTZ", (16, 32), (32, 8), (0, 4)),
    Case("load2d_estride", "load", "u4", "UINT32", (40, 32), (8, 12), (4, 2), element_strides=(1, 3)),
    Case("load2d_estride_x0", "load", "u4", "UINT32", (40, 32), (8, 12), (4, 2), element_strides=(4, 2)),
    Case("load3d", "load", "f2", "FLOAT16", (3, 20, 32), (32, 8, 2), (0, 16, 2), swizzle="64B"),
    Case(
        "load5d",
        "load",
        "u2",
        "UINT16",
        (2, 3, 4, 5, 16),
        (8, 4, 3, 2, 2),
        (8, 2, 1, 2, 1),
        swizzle="32B",
        fault="pass the block's",
    ),
    Case("load1d", "load", "u4", "UINT32", (100,), (32,), (80,)),
    Case("load2d_tf32", "load", "u4", "TFLOAT32", (16, 32), (32, 4), (0, 2)),
    Case("load2d_f32ftz", "load", "u4", "FLOAT32_FTZ", (16, 32), (32, 4), (0, 2), swizzle="128B"),
    Case("load2d_sw32_offset", "load", "f2", "FLOAT16", (40, 48), (16, 16), (16, 4), swizzle="32B", dst_offset=128),
    Case("load2d_sw64_offset", "load", "f4", "FLOAT32", (40, 48), (16, 16), (16, 4), swizzle="64B", dst_offset=256),
    Case("load2d_box_past_both", "load", "u4", "UINT32", (10, 20), (32, 16), (-4, -2), swizzle="128B", pad=12),
    Case("load2d_f64_nan", "load", "f8", "FLOAT64", (10, 16), (8, 8), (12, 5), swizzle="64B", oob_fill=1),
    Case(
        "load4d_estride",
        "load",
        "f2",
        "FLOAT16",
        (3, 4, 6, 64),
        (64, 4, 3, 2),
        (0, 1, -1, 1),
        swizzle="128B",
        element_strides=(1, 1, 2, 2),
    ),
    Case("store2d_none", "store", "f2", "FLOAT16", (40, 64), (64, 16), (0, 8)),
    Case("store2d_sw128_narrow", "store", "f2", "FLOAT16", (40, 64), (32, 8), (8, 3), swizzle="128B", room=1024),
    Case("store2d_tf32_edges", "store", "u4", "TFLOAT32", (16, 32), (32, 8), (0, 4)),
    Case("store2d_f16_x4", "store", "f2", "FLOAT16", (40, 64), (32, 8), (4, 3), fault="innermost coordinate"),
    Case("reduce2d_add_f32_dim30", "reduce", "f4", "FLOAT32", (20, 30), (32, 8), (0, 4), pad=2),
    Case("store2d_estride", "store", "u4", "UINT32", (40, 32), (8, 12), (4, 2), element_strides=(1, 3)),
    Case("reduce2d_add_f32_oob", "reduce", "f4", "FLOAT32", (20, 24), (16, 16), (16, 12), swizzle="64B", pad=8),
    Case("store2d_sw128_oob", "store", "f2", "FLOAT16", (20, 60), (64, 8), (16, 16), swizzle="128B", pad=4),
    Case("store3d_sw64", "store", "u4", "UINT32", (3, 20, 16), (16, 4, 2), (0, 3, 2), swizzle="64B"),
    Case("reduce2d_add_f32", "reduce", "f4", "FLOAT32", (20, 32), (32, 8), (0, 15)),
    Case("reduce2d_add_f16", "reduce", "f2", "FLOAT16", (20, 64), (64, 8), (0, 4), swizzle="128B"),
    Case("reduce2d_add_bf16", "reduce", "bf16", "BFLOAT16", (20, 64), (64, 8), (0, 4)),
    Case("reduce2d_add_u32", "reduce", "u4", "UINT32", (20, 32), (32, 8), (0, 4)),
    Case("reduce2d_max_s32", "reduce", "i4", "INT32", (20, 32), (32, 8), (0, 4), op="max"),
    Case("reduce2d_min_f16", "reduce", "f2", "FLOAT16", (20, 64), (64, 8), (0, 4), op="min"),
    Case("reduce2d_xor_u64", "reduce", "u8", "UINT64", (20, 16), (16, 8), (0, 4), op="xor"),
    Case("reduce2d_inc_u32", "reduce", "u4", "UINT32", (20, 32), (32, 8), (0, 4), op="inc"),
    Case("reduce2d_dec_u32", "reduce", "u4", "UINT32", (20, 32), (32, 8), (0, 4), op="dec"),
)


def _rule(name: str, **change) -> tuple[str, dict]:
    base = dict(data_type="FLOAT16", dims=(64, 40), strides=(128,), box=(64, 16), element_strides=None)
    base.update(swizzle=0, oob=0, l2=0, interleave=0)
    return name, {**base, **change}


# cuTensorMapEncodeTiled's verdicts on maps that change one argument at a time across its rules (the capture asks
# the driver; tests/test_ptx_tma.py holds flashsim.ptx.tensor_map_tiled to the same accept / refuse on each). The
# arguments are the capture's ``encode``'s (enums as CUDA's integers; the address is a 1 KB-aligned device buffer).
MAP_RULES = (
    _rule("reference"),
    _rule("rank 1, u32 100", data_type="UINT32", dims=(100,), strides=(), box=(32,)),
    _rule("rank 1, u32 128", data_type="UINT32", dims=(128,), strides=(), box=(32,)),
    _rule("rank 1, f16 256", dims=(256,), strides=(), box=(64,)),
    _rule("rank 1, u8 256, 64B swizzle", data_type="UINT8", dims=(256,), strides=(), box=(64,), swizzle=2),
    _rule("rank 2, one row", dims=(64, 1), box=(64, 1)),
    _rule("inner box 8 bytes", box=(4, 16)),
    _rule("inner box 48 bytes", box=(24, 16)),
    _rule("box 256", dims=(256, 300), strides=(512,), box=(64, 256)),
    _rule("box 257", dims=(256, 300), strides=(512,), box=(64, 257)),
    _rule("box wider than the tensor", box=(128, 16)),
    _rule("box taller than the tensor", box=(64, 64)),
    _rule("element stride 8", element_strides=(1, 8)),
    _rule("element stride 9", element_strides=(1, 9)),
    _rule("element stride 0", element_strides=(1, 0)),
    _rule("inner element stride 2", element_strides=(2, 1)),
    _rule("box not a multiple of its element stride", box=(64, 15), element_strides=(1, 2)),
    _rule("stride 120", strides=(120,)),
    _rule("stride 0", strides=(0,)),
    _rule("stride below the row", strides=(64,)),
    _rule("stride 2^40 - 16", dims=(64, 2), strides=((1 << 40) - 16,)),
    _rule("stride 2^40", dims=(64, 2), strides=(1 << 40,)),
    _rule("dim 0", dims=(0, 40)),
    _rule("dim 2^32", dims=(1 << 32, 1), strides=(1 << 33,)),
    _rule("dim 2^32 + 1", dims=((1 << 32) + 1, 1), strides=(1 << 34,)),
    _rule("inner box over the 32B span", box=(32, 16), swizzle=1),
    _rule("inner box at the 32B span", box=(16, 16), swizzle=1),
    _rule("inner box over the 128B span", dims=(128, 40), strides=(256,), box=(128, 16), swizzle=3),
    _rule("OOB NaN on UINT16", data_type="UINT16", oob=1),
    _rule("OOB NaN on FLOAT64", data_type="FLOAT64", dims=(16, 40), box=(16, 16), oob=1),
    _rule("OOB NaN on TFLOAT32", data_type="TFLOAT32", dims=(32, 40), box=(32, 16), oob=1),
    _rule("interleave 16B, rank 2", interleave=1),
    _rule("interleave 16B, rank 3", dims=(64, 40, 2), strides=(128, 5120), box=(64, 16, 1), interleave=1),
    _rule(
        "interleave 32B, 32B swizzle", dims=(64, 40, 2), strides=(128, 5120), box=(64, 16, 1), interleave=2, swizzle=1
    ),
    _rule("interleave 32B, no swizzle", dims=(64, 40, 2), strides=(128, 5120), box=(64, 16, 1), interleave=2),
    _rule("L2 promotion 256B", l2=3),
    _rule("rank 5", dims=(16, 2, 2, 2, 2), strides=(32, 64, 128, 256), box=(16, 2, 2, 2, 2)),
    _rule("rank 3, outer stride below the plane", dims=(64, 40, 2), strides=(128, 128), box=(64, 16, 1)),
    _rule("box of 128 KB", dims=(256, 256), strides=(512,), box=(256, 256), data_type="UINT16"),
)


def dims(case: Case) -> tuple[tuple, tuple]:
    """(global_dim, global_strides) of a case's map over its array (innermost first; strides in bytes)."""
    item = _DTYPES[case.dtype].itemsize
    padded = case.shape[:-1] + (case.shape[-1] + case.pad,)
    strides, acc = [], padded[-1] * item
    for n in reversed(padded[:-1]):
        strides.append(acc)
        acc *= n
    return tuple(reversed(case.shape)), tuple(strides)


def box_bytes(case: Case) -> int:
    es = case.element_strides or (1,) * case.rank
    n = [case.box[0]] + [-(-b // e) for b, e in zip(case.box[1:], es[1:])]
    return int(np.prod(n)) * _DTYPES[case.dtype].itemsize


def load_out_bytes(case: Case) -> int:
    """The load kernel's ``out``: the shared image, then a 16-byte slot whose first word is the completion flag."""
    return smem_bytes(case) + 16


def smem_bytes(case: Case) -> int:
    """The kernel's shared buffer: the destination offset, the box and the room, rounded up to 1024 bytes."""
    return -(-(case.dst_offset + box_bytes(case) + case.room) // 1024) * 1024


_F32_MAPS = ("TFLOAT32", "TFLOAT32_FTZ", "FLOAT32_FTZ")  # maps whose copy may change an f32's bits


def f32_edges(rng, n: int) -> np.ndarray:
    """``n`` f32 bit patterns (uint32) that tell roundings and flushes apart: exact ties at tf32's 13th bit with the
    kept bit odd and even, one below and above a tie, subnormals, NaNs of both signs and payloads, infinities, the
    largest finite values, signed zeros and plain random patterns, in a seeded order."""
    top = rng.integers(0, 1 << 19, n, dtype=np.uint32) << np.uint32(13)
    kinds = [
        top | np.uint32(0x1000),  # a tie
        top | np.uint32(0x0FFF),
        top | np.uint32(0x1001),
        rng.integers(1, 1 << 23, n, dtype=np.uint32) | (rng.integers(0, 2, n, dtype=np.uint32) << np.uint32(31)),
        np.uint32(0x7F800000) | rng.integers(1, 1 << 23, n, dtype=np.uint32),
        np.uint32(0xFF800000) | rng.integers(1, 1 << 23, n, dtype=np.uint32),
        np.full(n, 0x7F800000, np.uint32),
        np.full(n, 0xFF800000, np.uint32),
        np.uint32(0x7F7FE000) | rng.integers(0, 1 << 13, n, dtype=np.uint32),
        np.full(n, 0x80000000, np.uint32),
        rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32),
    ]
    pick = rng.integers(0, len(kinds), n)
    return np.choose(pick, kinds).astype(np.uint32)


def arrays(case: Case, seed: int = 0) -> dict:
    """The case's seeded inputs: ``tensor`` (the padded global array) and, for a store or reduction, ``img`` (the
    shared buffer's bytes). Floats are drawn from a wide range with subnormals, zeros, infinities and NaNs mixed
    in; integers from their whole range."""
    rng = np.random.default_rng(seed)
    dt = _DTYPES[case.dtype]
    padded = case.shape[:-1] + (case.shape[-1] + case.pad,)
    n = int(np.prod(padded))
    if case.dtype in ("f2", "f4", "f8", "bf16"):
        if case.kind == "reduce":  # moderate values, no NaN, a few subnormals (f32 add flushes them: the ISA's note)
            x = rng.standard_normal(n) * np.exp2(rng.integers(-20, 8, n))
            x[rng.random(n) < 0.1] *= 2.0**-130
        else:
            x = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
            x[rng.random(n) < 0.02] = np.inf
        with np.errstate(over="ignore", under="ignore"):
            tensor = x.astype(dt).reshape(padded)
    elif case.data_type in _F32_MAPS:
        tensor = f32_edges(rng, n).reshape(padded)
    else:
        tensor = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).view(dt).reshape(padded)
        if case.op in ("inc", "dec"):
            tensor = (tensor % 64).astype(dt)
    out = {"tensor": np.ascontiguousarray(tensor)}
    if case.kind in ("store", "reduce"):
        size = smem_bytes(case)
        if case.dtype in ("f2", "f4", "f8", "bf16"):
            k = size // dt.itemsize
            y = rng.standard_normal(k) * np.exp2(rng.integers(-20, 8, k))
            y[rng.random(k) < 0.1] *= 2.0**-130
            with np.errstate(under="ignore"):
                img = y.astype(dt).view(np.uint8)
        else:
            img = rng.integers(0, 256, size, dtype=np.uint8)
            if case.op in ("inc", "dec"):
                img = (img.view(dt) % 64).astype(dt).view(np.uint8)
        out["img"] = np.ascontiguousarray(img)
    return out


# the bulk-copy cases: a plain copy and cp.reduce.async.bulk into global memory (operation and type modifiers)
BULK = (None, ".add.f32", ".add.noftz.f16", ".min.u32", ".xor.b64", ".add.f64")


def bulk_inputs(reduce, size: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of a bulk-copy case, as uint32 words: seeded; floats for the float reductions, subnormals and
    zeros among them (f32 add flushes them, f16 keeps them)."""
    rng = np.random.default_rng(3)
    t = reduce.split(".")[-1] if reduce else "u32"
    if t[0] == "f":
        dt = np.dtype({"f32": np.float32, "f16": np.float16, "f64": np.float64}[t])
        n = size // dt.itemsize

        def make():
            with np.errstate(over="ignore", under="ignore"):
                return (rng.standard_normal(n) * np.exp2(rng.integers(-140, 8, n))).astype(dt)

        return make().view(np.uint32), make().view(np.uint32)
    return rng.integers(0, 2**32, size // 4, dtype=np.uint32), rng.integers(0, 2**32, size // 4, dtype=np.uint32)


def bulk_name(reduce) -> str:
    return "bulk" + (reduce or "_copy").replace(".", "_")


# a wait gives up after this many polls (on a GPU where a copy never completed, the kernel ends with a wrong image
# instead of hanging the capture; the simulator's copies land at the first poll)
SPIN_LIMIT = 1 << 22

_HEAD = """.version 8.3
.target sm_90a
.address_size 64
"""


def _map_param(map_param: bool) -> str:
    return ".param .align 64 .b8 tmap[128]" if map_param else ".param .u64 tmap"


def _map_load(map_param: bool) -> str:
    """PTX putting the map's generic address in %rd1 (and acquiring a map in global memory)."""
    if map_param:
        return "\tmov.b64 %rd9, tmap;\n\tcvta.param.u64 %rd1, %rd9;\n"
    return "\tld.param.u64 %rd1, [tmap];\n\tfence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;\n"


# the byte a load kernel fills its shared buffer with before the copy: bytes the copy leaves alone keep it, so an
# image shows what the copy wrote (zeros and OOB fills included) apart from what it did not touch
SENTINEL = 0xA5


def _fill_smem(size: int) -> str:
    return f"""\tshl.b32 %r4, %r1, 4;
$Lfill0:
\tsetp.ge.u32 %p1, %r4, {size};
\t@%p1 bra $Lfilled0;
\tadd.u32 %r6, %r3, %r4;
\tst.shared.v4.u32 [%r6], {{%r0, %r0, %r0, %r0}};
\tadd.u32 %r4, %r4, %r7;
\tbra $Lfill0;
$Lfilled0:
"""


def load_ptx(case: Case, map_param: bool = False) -> str:
    """The load kernel ``tma_load(tmap, out, c0, ...)`` of ``case`` (module docstring)."""
    r = case.rank
    size = smem_bytes(case)
    coords = ", ".join(f".param .u32 c{i}" for i in range(r))
    regs = ", ".join(f"%r{20 + i}" for i in range(r))
    load_coords = "".join(f"\tld.param.u32 %r{20 + i}, [c{i}];\n" for i in range(r))
    return (
        _HEAD
        + f"""
.visible .entry tma_load({_map_param(map_param)}, .param .u64 out, {coords})
{{
\t.reg .pred %p<4>;
\t.reg .b32 %r<32>;
\t.reg .b64 %rd<16>;
\t.shared .align 1024 .b8 smem[{size}];
\t.shared .align 8 .b64 bar;

\tmov.u32 %r0, {SENTINEL * 0x01010101};
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %ntid.x;
\tshl.b32 %r7, %r2, 4;
\tmov.u32 %r3, smem;
\tmov.u32 %r8, bar;
{_fill_smem(size)}\tsetp.ne.u32 %p2, %r1, 0;
\t@%p2 bra $Linit;
\tmbarrier.init.shared::cta.b64 [%r8], 1;
$Linit:
\tfence.proxy.async;
\tbar.sync 0;
\t@%p2 bra $Lwait;
{_map_load(map_param)}{load_coords}\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], {box_bytes(case)};
\tadd.u32 %r9, %r3, {case.dst_offset};
\tcp.async.bulk.tensor.{r}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r9], [%rd1, {{{regs}}}], [%r8];
\tmov.u32 %r16, 0;
$Lwait:
\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
\tadd.u32 %r16, %r16, 1;
\tsetp.lt.u32 %p0, %r16, {SPIN_LIMIT};
\t@%p3 bra $Lwaited;
\t@%p0 bra $Lwait;
$Lwaited:
\tld.param.u64 %rd3, [out];
\t@%p2 bra $Lflagged;
\tselp.u32 %r15, 1, 0, %p3;
\tst.global.u32 [%rd3+{size}], %r15;
$Lflagged:
\tshl.b32 %r4, %r1, 4;
$Lcopy:
\tsetp.ge.u32 %p1, %r4, {size};
\t@%p1 bra $Ldone;
\tadd.u32 %r6, %r3, %r4;
\tld.shared.v4.u32 {{%r11, %r12, %r13, %r14}}, [%r6];
\tcvt.u64.u32 %rd4, %r4;
\tadd.u64 %rd5, %rd3, %rd4;
\tst.global.v4.u32 [%rd5], {{%r11, %r12, %r13, %r14}};
\tadd.u32 %r4, %r4, %r7;
\tbra $Lcopy;
$Ldone:
\tret;
}}
"""
    )


def store_ptx(case: Case, map_param: bool = False) -> str:
    """The store / reduce kernel ``tma_store(tmap, img, c0, ...)`` of ``case`` (module docstring)."""
    r = case.rank
    size = smem_bytes(case)
    coords = ", ".join(f".param .u32 c{i}" for i in range(r))
    regs = ", ".join(f"%r{20 + i}" for i in range(r))
    load_coords = "".join(f"\tld.param.u32 %r{20 + i}, [c{i}];\n" for i in range(r))
    if case.kind == "store":
        op = "cp.async.bulk.tensor"
        mode = f"{r}d.global.shared::cta.tile.bulk_group"
    else:
        op = "cp.reduce.async.bulk.tensor"
        mode = f"{r}d.global.shared::cta.{case.op}.tile.bulk_group"
    return (
        _HEAD
        + f"""
.visible .entry tma_store({_map_param(map_param)}, .param .u64 img, {coords})
{{
\t.reg .pred %p<4>;
\t.reg .b32 %r<32>;
\t.reg .b64 %rd<16>;
\t.shared .align 1024 .b8 smem[{size}];

\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %ntid.x;
\tshl.b32 %r7, %r2, 4;
\tmov.u32 %r3, smem;
\tld.param.u64 %rd3, [img];
\tshl.b32 %r4, %r1, 4;
$Lfill:
\tsetp.ge.u32 %p1, %r4, {size};
\t@%p1 bra $Lfilled;
\tcvt.u64.u32 %rd4, %r4;
\tadd.u64 %rd5, %rd3, %rd4;
\tld.global.v4.u32 {{%r11, %r12, %r13, %r14}}, [%rd5];
\tadd.u32 %r6, %r3, %r4;
\tst.shared.v4.u32 [%r6], {{%r11, %r12, %r13, %r14}};
\tadd.u32 %r4, %r4, %r7;
\tbra $Lfill;
$Lfilled:
\tfence.proxy.async;
\tbar.sync 0;
\tsetp.ne.u32 %p2, %r1, 0;
\t@%p2 bra $Ldone;
{_map_load(map_param)}{load_coords}\tadd.u32 %r9, %r3, {case.dst_offset};
\t{op}.{mode} [%rd1, {{{regs}}}], [%r9];
\tcp.async.bulk.commit_group;
\tcp.async.bulk.wait_group 0;
$Ldone:
\tret;
}}
"""
    )


def bulk_ptx(size: int, reduce: str | None = None) -> str:
    """``bulk_copy(src, dst)``: cp.async.bulk of ``size`` bytes global -> shared (mbarrier complete_tx), then shared
    -> global (bulk_group), or with ``reduce`` (".add.f32", ".add.noftz.f16", ".min.u32" ...) cp.reduce.async.bulk
    into ``dst``."""
    store = (
        f"cp.reduce.async.bulk.global.shared::cta.bulk_group{reduce}"
        if reduce
        else "cp.async.bulk.global.shared::cta.bulk_group"
    )
    return (
        _HEAD
        + f"""
.visible .entry bulk_copy(.param .u64 src, .param .u64 dst)
{{
\t.reg .pred %p<4>;
\t.reg .b32 %r<20>;
\t.reg .b64 %rd<8>;
\t.shared .align 128 .b8 smem[{size}];
\t.shared .align 8 .b64 bar;

\tmov.u32 %r1, %tid.x;
\tmov.u32 %r3, smem;
\tmov.u32 %r8, bar;
\tsetp.ne.u32 %p2, %r1, 0;
\t@%p2 bra $Ldone;
\tld.param.u64 %rd1, [src];
\tld.param.u64 %rd2, [dst];
\tmbarrier.init.shared::cta.b64 [%r8], 1;
\tmbarrier.expect_tx.shared::cta.b64 [%r8], {size};
\tcp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1], {size}, [%r8];
\tmbarrier.arrive.shared::cta.b64 _, [%r8];
\tmov.u32 %r16, 0;
$Lwait:
\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
\tadd.u32 %r16, %r16, 1;
\tsetp.lt.u32 %p1, %r16, {SPIN_LIMIT};
\t@%p3 bra $Lwaited;
\t@%p1 bra $Lwait;
$Lwaited:
\t{store} [%rd2], [%r3], {size};
\tcp.async.bulk.commit_group;
\tcp.async.bulk.wait_group 0;
$Ldone:
\tret;
}}
"""
    )


def pipeline_ptx(tiles: int, stages: int = 2) -> str:
    """``pipeline(tmap, out)``: warp 0's thread 0 loads ``tiles`` boxes of 32 x 8 f32 (1 KiB) along dim 1 through a
    ring of ``stages`` shared buffers, each with a "full" mbarrier (arrive.expect_tx, complete_tx by the copy) and
    an "empty" one (32 arrivals of the consumer warp); warp 1 waits on full, copies the tile to out (lane = column)
    and arrives on empty. The producer waits on empty before reusing a stage: a consumer reading too early, or a
    producer overwriting too early, gives wrong tiles."""
    return (
        _HEAD
        + f"""
.visible .entry pipeline(.param .u64 tmap, .param .u64 out)
{{
\t.reg .pred %p<8>;
\t.reg .b32 %r<40>;
\t.reg .b64 %rd<16>;
\t.reg .f32 %f<4>;
\t.shared .align 1024 .b8 smem[{stages * 1024}];
\t.shared .align 8 .b64 full[{stages}];
\t.shared .align 8 .b64 empty[{stages}];

\tmov.u32 %r1, %tid.x;
\tmov.u32 %r3, smem;
\tmov.u32 %r4, full;
\tmov.u32 %r5, empty;
\tsetp.ne.u32 %p1, %r1, 0;
\t@%p1 bra $Linit;
\tmov.u32 %r6, 0;
$Linitloop:
\tshl.b32 %r7, %r6, 3;
\tadd.u32 %r8, %r4, %r7;
\tmbarrier.init.shared::cta.b64 [%r8], 1;
\tadd.u32 %r8, %r5, %r7;
\tmbarrier.init.shared::cta.b64 [%r8], 32;
\tadd.u32 %r6, %r6, 1;
\tsetp.lt.u32 %p2, %r6, {stages};
\t@%p2 bra $Linitloop;
$Linit:
\tbar.sync 0;
\tsetp.ge.u32 %p3, %r1, 32;
\t@%p3 bra $Lconsumer;
\t@%p1 bra $Ldone;
\tld.param.u64 %rd1, [tmap];
\tfence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;
\tmov.u32 %r10, 0;
$Lproduce:
\trem.u32 %r11, %r10, {stages};
\tdiv.u32 %r12, %r10, {stages};
\tshl.b32 %r13, %r11, 3;
\tsetp.lt.u32 %p4, %r10, {stages};
\t@%p4 bra $Lfree;
\tadd.u32 %r14, %r5, %r13;
\tsub.u32 %r15, %r12, 1;
\tand.b32 %r15, %r15, 1;
$Lwaitempty:
\tmbarrier.try_wait.parity.shared::cta.b64 %p5, [%r14], %r15;
\t@!%p5 bra $Lwaitempty;
$Lfree:
\tadd.u32 %r16, %r4, %r13;
\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r16], 1024;
\tshl.b32 %r17, %r11, 10;
\tadd.u32 %r17, %r3, %r17;
\tshl.b32 %r18, %r10, 3;
\tmov.u32 %r19, 0;
\tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
\t\t[%r17], [%rd1, {{%r19, %r18}}], [%r16];
\tadd.u32 %r10, %r10, 1;
\tsetp.lt.u32 %p6, %r10, {tiles};
\t@%p6 bra $Lproduce;
\tbra $Ldone;
$Lconsumer:
\tsetp.ge.u32 %p3, %r1, 64;
\t@%p3 bra $Ldone;
\tsub.u32 %r20, %r1, 32;
\tld.param.u64 %rd2, [out];
\tmov.u32 %r10, 0;
$Lconsume:
\trem.u32 %r11, %r10, {stages};
\tdiv.u32 %r12, %r10, {stages};
\tand.b32 %r12, %r12, 1;
\tshl.b32 %r13, %r11, 3;
\tadd.u32 %r16, %r4, %r13;
$Lwaitfull:
\tmbarrier.try_wait.parity.shared::cta.b64 %p5, [%r16], %r12;
\t@!%p5 bra $Lwaitfull;
\tshl.b32 %r17, %r11, 10;
\tadd.u32 %r17, %r3, %r17;
\tshl.b32 %r21, %r20, 2;
\tadd.u32 %r17, %r17, %r21;
\tmov.u32 %r22, 0;
$Lrows:
\tshl.b32 %r23, %r22, 7;
\tadd.u32 %r24, %r17, %r23;
\tld.shared.f32 %f1, [%r24];
\tshl.b32 %r25, %r10, 8;
\tshl.b32 %r26, %r22, 5;
\tadd.u32 %r25, %r25, %r26;
\tadd.u32 %r25, %r25, %r20;
\tmul.wide.u32 %rd3, %r25, 4;
\tadd.u64 %rd4, %rd2, %rd3;
\tst.global.f32 [%rd4], %f1;
\tadd.u32 %r22, %r22, 1;
\tsetp.lt.u32 %p6, %r22, 8;
\t@%p6 bra $Lrows;
\tadd.u32 %r14, %r5, %r13;
\tmbarrier.arrive.shared::cta.b64 _, [%r14];
\tadd.u32 %r10, %r10, 1;
\tsetp.lt.u32 %p6, %r10, {tiles};
\t@%p6 bra $Lconsume;
$Ldone:
\tret;
}}
"""
    )
