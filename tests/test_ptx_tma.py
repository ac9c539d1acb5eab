"""TMA and bulk copies in flashsim.ptx: hand-written PTX kernels (flashsim.ptx.probes.tma) checked bit for bit
against numpy oracles written here from the PTX ISA's own statements (the box as tensor elements c + k * stride,
out-of-bound elements filled, the swizzle as the ISA's tables: 16-byte chunk c of 128-byte shared line L lands at
chunk c ^ (L mod 2 / 4 / 8)), tensor-map refusals, bad destinations and mbarrier transaction errors; and the replay
of the H200's capture (flashsim.gpu.capture.tma) when it is in tests/data/."""

from __future__ import annotations

import hashlib
import inspect
import json
import pathlib

import numpy as np
import pytest

import flashsim.ptx as fp
from flashsim.ptx.probes import tma as T
from flashsim.ptx.sanitize import RaceCheck
from flashsim.ptx.tensormap import OOB_NAN

CAPTURE = pathlib.Path(__file__).parent / "data" / "ptx_tma" / "tma_sm90.npz"
_SPAN_ROWS = {"NONE": 1, "32B": 2, "64B": 4, "128B": 8}
_DT = T._DTYPES


def _map(case, tensor):
    gd, gs = T.dims(case)
    return fp.tensor_map_tiled(
        tensor,
        data_type=case.data_type,
        global_dim=gd,
        global_strides=gs,
        box_dim=case.box,
        element_strides=case.element_strides,
        swizzle=case.swizzle,
        oob_fill=case.oob_fill,
    )


_SPAN_BYTES = {"NONE": 0, "32B": 32, "64B": 64, "128B": 128}


def _box_logical(case) -> np.ndarray:
    """Logical shared byte offsets of the box's 16-byte chunks: rows of the inner dimension one after another, each
    starting a new swizzle span under a swizzle (rows narrower than the span padded: what the H100 capture's
    *_narrow cases show), at dst_offset."""
    idx, _ = _box_indices(case)
    inner = idx[0].shape[-1] * _DT[case.dtype].itemsize
    rows = idx[0].size * _DT[case.dtype].itemsize // inner
    pitch = max(inner, _SPAN_BYTES[case.swizzle])
    return case.dst_offset + (np.arange(rows)[:, None] * pitch + np.arange(0, inner, 16)).reshape(-1)


def _tf32_rne(u: np.ndarray) -> np.ndarray:
    """f32 bit patterns rounded to tf32 (10 fraction bits) to nearest even, the PTX ISA's rule for .tf32 tensors; a
    NaN becomes 0x7FFFE000 (the H100's)."""
    u = u.astype(np.uint64)
    r = ((u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    nan = (u & 0x7F800000 == 0x7F800000) & (u & 0x7FFFFF != 0)
    return np.where(nan, np.uint32(0x7FFFE000), r)


def _physical(addr: np.ndarray, swizzle: str) -> np.ndarray:
    """The ISA's swizzle tables: chunk c of line L (16 and 128 bytes) goes to chunk c ^ (L mod rows)."""
    line, chunk = addr // 128, (addr // 16) % 8
    return line * 128 + ((chunk ^ (line % _SPAN_ROWS[swizzle])) * 16) + addr % 16


def _box_indices(case):
    """(numpy index tuple into the logical tensor, in-bounds mask), both shaped like the box (outermost first)."""
    es = list(case.element_strides or (1,) * case.rank)
    es[0] = 1  # dim 0's traversal stride is ignored without interleave (cuda.h)
    n = [case.box[0]] + [-(-b // e) for b, e in zip(case.box[1:], es[1:])]
    per_dim = [c + np.arange(k) * e for c, k, e in zip(case.coords, n, es)]  # innermost first
    grids = np.meshgrid(*reversed(per_dim), indexing="ij")  # outermost first
    sizes = case.shape
    inside = np.ones(grids[0].shape, bool)
    for g, size in zip(grids, sizes):
        inside &= (g >= 0) & (g < size)
    return tuple(np.clip(g, 0, size - 1) for g, size in zip(grids, sizes)), inside


def _logical(case, tensor):
    return tensor[(Ellipsis, slice(0, case.shape[-1]))]


def expected_load(case, tensor) -> np.ndarray:
    idx, inside = _box_indices(case)
    dt = _DT[case.dtype]
    values = _logical(case, tensor)[idx].copy()
    fill = 0
    if case.oob_fill not in ("NONE", 0) and dt.kind == "f" or (case.oob_fill == 1 and case.dtype == "bf16"):
        fill = OOB_NAN[dt.itemsize]
    ud = np.dtype(f"u{dt.itemsize}")
    raw = values.view(ud)
    if case.data_type in ("TFLOAT32", "TFLOAT32_FTZ"):
        raw = _tf32_rne(raw)
    raw[~inside] = fill
    logical = raw.tobytes()
    image = np.full(T.smem_bytes(case), T.SENTINEL, np.uint8)
    src = np.frombuffer(logical, np.uint8).reshape(-1, 16)
    where = _physical(_box_logical(case), case.swizzle)
    image[(where[:, None] + np.arange(16)).reshape(-1)] = src.reshape(-1)
    return image


def _reduce(op: str, dtype: str, old, new):
    dt = _DT[dtype]
    if op == "add":
        if dt.kind == "f":
            exact = old.astype(np.float64) + new.astype(np.float64)  # exact for two operands of these formats
            # f32 too: the ISA's note says cp.reduce.async.bulk's .add.f32 flushes subnormals, the H100 keeps them
            return exact.astype(dt)
        return old + new
    if op in ("min", "max"):
        r = (np.minimum if op == "min" else np.maximum)(old, new)
        if dt.kind == "f":  # -0 < +0, as PTX's min / max order them
            zeros = (old == 0) & (new == 0)
            neg = (np.signbit(old) | np.signbit(new)) if op == "min" else (np.signbit(old) & np.signbit(new))
            r = np.where(zeros, np.where(neg, -0.0, 0.0).astype(dt), r)
        return r
    if op == "xor":
        return old ^ new
    if op == "inc":
        return np.where(old >= new, 0, old + 1).astype(dt)
    if op == "dec":
        return np.where((old == 0) | (old > new), new, old - 1).astype(dt)
    raise AssertionError(op)


def expected_store(case, tensor, img) -> np.ndarray:
    """A store / reduction writes the in-bound elements, the inner bound tested in 16-byte granules (elements past
    the inner extent in a granule with in-bound ones are written too, into the row's padding: the H100 does)."""
    dt = _DT[case.dtype]
    granule = 16 // dt.itemsize
    padded_inner = -(-case.shape[-1] // granule) * granule
    idx, inside = _box_indices(T.Case(**{**case.__dict__, "shape": case.shape[:-1] + (padded_inner,)}))
    where = _physical(_box_logical(case), case.swizzle)
    logical = img[(where[:, None] + np.arange(16)).reshape(-1)].view(dt).reshape(inside.shape)
    out = tensor.copy()
    view = out[(Ellipsis, slice(0, padded_inner))]
    sel = tuple(i[inside] for i in idx)
    if case.kind == "store":
        view[sel] = logical[inside]
    else:
        view[sel] = _reduce(case.op, case.dtype, view[sel], logical[inside])
    return out


def _map_buffer(tm) -> np.ndarray:
    buf = np.zeros(128, np.uint8)
    buf[:] = np.frombuffer(tm.bytes, np.uint8)
    return buf


def run_case(case, map_param: bool, arrays=None, tmap=None):
    a = T.arrays(case) if arrays is None else {k: v.copy() for k, v in arrays.items()}
    tm = _map(case, a["tensor"]) if tmap is None else tmap
    m = tm if map_param else _map_buffer(tm)
    coords = [np.int32(c) for c in case.coords]
    if case.kind == "load":
        mod = fp.load(T.load_ptx(case, map_param))
        out = np.zeros(T.load_out_bytes(case), np.uint8)
        fp.launch(mod.kernel("tma_load"), 1, 128, [m, out, *coords], check="initcheck")
        return a, out
    mod = fp.load(T.store_ptx(case, map_param))
    fp.launch(mod.kernel("tma_store"), 1, 128, [m, a["img"], *coords], check="memcheck")
    return a, a["tensor"]


def _bits(x):
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


@pytest.mark.parametrize("case", [c for c in T.CASES if c.kind == "load"], ids=lambda c: c.name)
def test_tensor_load(case):
    if case.fault:  # the GPU faults on this case: the simulator refuses it, naming the rule
        with pytest.raises((fp.SimulationError, fp.MemoryFault), match=case.fault):
            run_case(case, map_param=case.rank % 2 == 0)
        return
    a, out = run_case(case, map_param=case.rank % 2 == 0)
    want, size = expected_load(case, a["tensor"]), T.smem_bytes(case)
    assert np.array_equal(out[:size], want), f"first differing byte {np.flatnonzero(out[:size] != want)[:8]}"
    assert out[size : size + 4].view(np.uint32)[0] == 1, "the mbarrier phase did not complete"


@pytest.mark.parametrize("case", [c for c in T.CASES if c.kind != "load"], ids=lambda c: c.name)
def test_tensor_store_and_reduce(case):
    if case.fault:
        with pytest.raises((fp.SimulationError, fp.MemoryFault), match=case.fault):
            run_case(case, map_param=case.rank % 2 == 1)
        return
    before = T.arrays(case)
    _, after = run_case(case, map_param=case.rank % 2 == 1, arrays=before)
    want = expected_store(case, before["tensor"], before["img"])
    assert np.array_equal(_bits(after), _bits(want)), np.argwhere(_bits(after) != _bits(want))[:8]


def test_map_in_global_memory_and_param_agree():
    case = next(c for c in T.CASES if c.name == "load2d_sw128_narrow")
    a = T.arrays(case)
    _, via_param = run_case(case, True, arrays=a)
    _, via_global = run_case(case, False, arrays=a)
    assert np.array_equal(via_param, via_global)


def test_swizzle_changes_the_image():
    """The oracle itself: a 128B-swizzled image differs from the plain one and holds the same bytes."""
    case = next(c for c in T.CASES if c.name == "load2d_sw128")
    plain = next(c for c in T.CASES if c.name == "load2d_none")
    a = T.arrays(case)
    sw, no = expected_load(case, a["tensor"]), expected_load(plain, a["tensor"])
    assert not np.array_equal(sw, no) and np.array_equal(np.sort(sw), np.sort(no))


_BULK_TYPE = {"f32": "f4", "f16": "f2", "f64": "f8", "u32": "u4", "b64": "u8"}


def run_bulk(reduce, src, dst):
    dst = dst.copy()
    mod = fp.load(T.bulk_ptx(src.nbytes, reduce))
    fp.launch(mod.kernel("bulk_copy"), 1, 32, [src, dst], check="racecheck")
    return dst


def expected_bulk(reduce, src, dst):
    if reduce is None:
        return src
    op, t = reduce.split(".")[1], reduce.split(".")[-1]
    dt = _BULK_TYPE[t]
    return _reduce(op, dt, dst.view(_DT[dt]), src.view(_DT[dt])).view(np.uint32)


@pytest.mark.parametrize("reduce", T.BULK, ids=T.bulk_name)
def test_bulk_copy(reduce):
    src, dst = T.bulk_inputs(reduce)
    got = run_bulk(reduce, src, dst)
    assert np.array_equal(got, expected_bulk(reduce, src, dst))


def test_bulk_reduce_f32_keeps_subnormals():
    """The inputs hold f32 subnormals, some added to each other: the sums are exact, as on the H100 (the PTX ISA's
    note says they are flushed; an oracle with the flush disagrees, so the test can tell)."""
    src, dst = T.bulk_inputs(".add.f32")
    s, d = src.view(np.float32), dst.view(np.float32)
    tiny = np.finfo(np.float32).tiny
    flushed = [np.where(np.abs(v) < tiny, np.copysign(np.float32(0), v), v) for v in (s, d)]
    got = run_bulk(".add.f32", src, dst)
    assert np.array_equal(got, (d + s).view(np.uint32))
    assert not np.array_equal(got, (flushed[0] + flushed[1]).view(np.uint32))


def test_pipeline_on_expect_tx_and_parity():
    tiles = 6
    x = np.arange(tiles * 8 * 32, dtype=np.float32).reshape(tiles * 8, 32) * np.float32(0.5)
    tm = fp.tensor_map_tiled(x, data_type="FLOAT32", global_dim=(32, tiles * 8), global_strides=(128,), box_dim=(32, 8))
    out = np.zeros_like(x)
    mod = fp.load(T.pipeline_ptx(tiles))
    fp.launch(mod.kernel("pipeline"), 1, 64, [_map_buffer(tm), out], check="racecheck")
    assert np.array_equal(out, x)


_CUDA = r"""
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
struct alignas(64) TensorMap { uint64_t opaque[16]; };  // cuda.h's CUtensorMap (NVRTC has no cuda.h)
struct Params { TensorMap a; float* out; };

__device__ void load(const TensorMap* tmap, float* smem, uint64_t* bar, int x, int y) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  uint32_t b = (uint32_t)__cvta_generic_to_shared(bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 1024;" :: "r"(b));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" :: "r"(s), "l"(tmap), "r"(x), "r"(y), "r"(b) : "memory");
  }
  __syncthreads();
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0; @!p bra W; }"
               :: "r"(b) : "memory");
}

extern "C" __global__ void by_param(const __grid_constant__ TensorMap tmap, float* out, int x, int y) {
  __shared__ alignas(1024) float smem[8 * 32];
  __shared__ alignas(8) uint64_t bar;
  load(&tmap, smem, &bar, x, y);
  for (int i = threadIdx.x; i < 256; i += blockDim.x) out[i] = smem[i];
}

extern "C" __global__ void in_struct(const __grid_constant__ Params p, int x, int y) {
  __shared__ alignas(1024) float smem[8 * 32];
  __shared__ alignas(8) uint64_t bar;
  load(&p.a, smem, &bar, x, y);
  for (int i = threadIdx.x; i < 256; i += blockDim.x) p.out[i] = smem[i];
}
"""


@pytest.mark.nvrtc
def test_cuda_kernels_take_the_map_as_grid_constant_or_in_a_struct():
    """nvcc-style PTX (cvta.param of the map's parameter): a __grid_constant__ map, and one inside a params struct
    (FlashAttention-3's and CUTLASS's way), given as TensorMap and as its bytes."""
    mod = fp.compile(_CUDA, arch="sm_90a")
    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    tm = fp.tensor_map_tiled(x, data_type="FLOAT32", global_dim=(32, 16), global_strides=(128,), box_dim=(32, 8))
    out = np.zeros(256, np.float32)
    fp.launch(mod.kernel("by_param"), 1, 64, [tm, out, np.int32(0), np.int32(5)])
    assert np.array_equal(out.reshape(8, 32), x[5:13])
    out[:] = 0
    params = tm.bytes + int(fp.address(out)).to_bytes(8, "little") + bytes(56)
    fp.launch(mod.kernel("in_struct"), 1, 64, [params, np.int32(0), np.int32(7)])
    assert np.array_equal(out.reshape(8, 32), x[7:15])


def test_a_read_before_the_wait_sees_the_old_bytes():
    """The copy lands when the mbarrier is polled, not when it is issued: thread 0 reads its destination right
    after issuing and gets what was there (the sentinel fill), then the box after its wait."""
    case = _load_case(name="early")
    size = T.smem_bytes(case)
    ptx = T.load_ptx(case, True).replace(
        "$Lwait:\n",
        "\tld.shared.u32 %r15, [%r9];\n\tld.param.u64 %rd3, [out];\n"
        f"\tst.global.u32 [%rd3+{size + 4}], %r15;\n$Lwait:\n",
    )
    a = T.arrays(case)
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    out[size + 4 : size + 8] = 0xAB
    fp.launch(fp.load(ptx).kernel("tma_load"), 1, 32, [_map(case, a["tensor"]), out, np.int32(0), np.int32(8)])
    assert out[size + 4 : size + 8].tolist() == [T.SENTINEL] * 4
    assert np.array_equal(out[: T.smem_bytes(case)], expected_load(case, a["tensor"]))


# -- refusals -----------------------------------------------------------------------------------------------------


def _tiled(**kw):
    a = kw.pop("array", np.zeros((64, 64), np.float16))
    args = dict(data_type="FLOAT16", global_dim=(64, 64), global_strides=(128,), box_dim=(64, 8))
    args.update(kw)
    return fp.tensor_map_tiled(a, **args)


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(box_dim=(64, 257)), "box_dim[1] = 257: must be 1..256"),
        (dict(global_strides=(120,)), "global_strides[0] = 120: must be a multiple of 16"),
        (dict(array=np.zeros(4104, np.uint8)[8:].view(np.float16).reshape(64, 32)), "must be 16-byte aligned"),
        (dict(box_dim=(4, 8)), "multiple of 16 bytes"),
        (dict(box_dim=(64, 8), swizzle="64B"), "at most the swizzle span (64 bytes"),
        (dict(element_strides=(1, 9)), "element_strides[1] = 9: must be 1..8"),
        (dict(global_dim=(64, 65)), "past the"),
        (dict(data_type="UINT16", oob_fill="NAN_REQUEST_ZERO_FMA"), "only for floating-point data types"),
        (dict(global_dim=(1,) * 6, global_strides=(16,) * 5, box_dim=(1,) * 6), "tensorRank 6 must be 1..5"),
        (dict(global_strides=()), "global_strides: 1 entries expected"),
        (dict(swizzle="128B_ATOM_32B"), "sm_100"),
        (dict(data_type="FLOAT17"), "data_type: unknown name"),
    ],
)
def test_bad_maps(kw, words):
    with pytest.raises(ValueError, match=None) as info:
        _tiled(**kw)
    assert words in str(info.value), str(info.value)


def test_map_enums_by_name_and_number_agree():
    a = np.zeros((64, 64), np.float16)
    by_name = _tiled(array=a, data_type="CU_TENSOR_MAP_DATA_TYPE_FLOAT16", swizzle="CU_TENSOR_MAP_SWIZZLE_128B")
    by_number = _tiled(array=a, data_type=6, swizzle=3)
    assert by_name.bytes == by_number.bytes and len(by_name.bytes) == 128


def _load_case(**kw):
    base = next(c for c in T.CASES if c.name == "load2d_sw128")
    return T.Case(**{**base.__dict__, **kw})


def test_destination_must_be_128_byte_aligned():
    case = _load_case(name="misaligned", dst_offset=64)
    with pytest.raises(fp.MemoryFault, match="128-byte aligned") as info:
        run_case(case, map_param=True)
    assert info.value.line is not None and "cp.async.bulk.tensor destination" in str(info.value)


def test_destination_past_shared_memory():
    case = _load_case(name="past", dst_offset=128)
    a = T.arrays(case)
    ptx = T.load_ptx(case, True).replace(f"add.u32 %r9, %r3, {case.dst_offset};", "add.u32 %r9, %r3, 2048;")
    mod = fp.load(ptx)
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    with pytest.raises(fp.MemoryFault, match="bytes of shared memory"):
        fp.launch(mod.kernel("tma_load"), 1, 128, [_map(case, a["tensor"]), out, np.int32(0), np.int32(8)])


def test_not_a_tensor_map():
    case = _load_case(name="garbage")
    a = T.arrays(case)
    mod = fp.load(T.load_ptx(case, False))
    garbage = np.arange(128, dtype=np.uint8)
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    with pytest.raises(fp.SimulationError, match="not a flashsim tensor map"):
        fp.launch(mod.kernel("tma_load"), 1, 128, [garbage, out, np.int32(0), np.int32(8)])
    del a


def test_tx_underflow_names_the_mbarrier_and_line():
    """The box is 2048 bytes, the phase expects 1024: the copy completes more than expected."""
    case = _load_case(name="short")
    ptx = T.load_ptx(case, True).replace("b64 _, [%r8], 2048;", "b64 _, [%r8], 1024;")
    mod = fp.load(ptx)
    a = T.arrays(case)
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    with pytest.raises(fp.SimulationError, match="tx-count underflow") as info:
        fp.launch(mod.kernel("tma_load"), 1, 128, [_map(case, a["tensor"]), out, np.int32(0), np.int32(8)])
    msg = str(info.value)
    assert "mbarrier at shared offset" in msg and "1024 more bytes" in msg
    line = next(i for i, s in enumerate(ptx.splitlines(), 1) if "cp.async.bulk.tensor" in s)
    assert info.value.line == line and info.value.thread == (0, 0, 0)


def test_expect_tx_too_large_is_a_deadlock_naming_the_missing_bytes():
    """The phase expects 4096 bytes, the copy brings the box's 2048: the waiters never see it complete."""
    case = _load_case(name="long")
    ptx = T.load_ptx(case, True).replace("b64 _, [%r8], 2048;", "b64 _, [%r8], 4096;")
    a = T.arrays(case)
    args = [_map(case, a["tensor"]), np.zeros(T.load_out_bytes(case), np.uint8), np.int32(0), np.int32(8)]
    with pytest.raises(fp.Deadlock, match="waits for 0 arrival\\(s\\) and a tx-count of 2048"):
        fp.launch(fp.load(ptx).kernel("tma_load"), 1, 32, args, spin_limit=50)


_TX_KERNEL = """.version 8.3
.target sm_90a
.address_size 64
.visible .entry k()
{
\t.reg .b32 %r<4>;
\t.shared .align 8 .b64 bar;
\tmov.u32 %r1, bar;
\tmbarrier.init.shared::cta.b64 [%r1], 1;
\tmbarrier.expect_tx.shared::cta.b64 [%r1], EXPECT;
\tmbarrier.complete_tx.shared::cta.b64 [%r1], COMPLETE;
\tmbarrier.arrive.shared::cta.b64 _, [%r1];
\tret;
}
"""


@pytest.mark.parametrize(
    "expect, complete, words",
    [(100, 200, "100 more bytes completed than the phase expected"), (1 << 20, 0, "tx-count overflow")],
)
def test_tx_count_errors(expect, complete, words):
    mod = fp.load(_TX_KERNEL.replace("EXPECT", str(expect)).replace("COMPLETE", str(complete)))
    with pytest.raises(fp.SimulationError, match=words):
        fp.launch(mod.kernel("k"), 1, 1, [])


def test_tx_count_may_go_negative_before_its_expect():
    """complete_tx before expect_tx is legal (the range is -(2^20 - 1) .. 2^20 - 1): the phase then completes."""
    ptx = _TX_KERNEL.replace("EXPECT", "300").replace("COMPLETE", "300")
    lines = ptx.splitlines()
    i = next(k for k, s in enumerate(lines) if "expect_tx" in s)
    lines[i], lines[i + 1] = lines[i + 1], lines[i]  # complete first
    ptx = "\n".join(lines).replace(
        "\tret;",
        "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n"
        "\tselp.u32 %r2, 1, 0, %p1;\n\tst.global.u32 [%rd1], %r2;\n\tret;",
    )
    ptx = ptx.replace(".visible .entry k()", ".visible .entry k(.param .u64 out)").replace(
        "\tmov.u32 %r1, bar;",
        "\t.reg .pred %p<2>;\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [out];\n\tmov.u32 %r1, bar;",
    )
    out = np.zeros(1, np.uint32)
    fp.launch(fp.load(ptx).kernel("k"), 1, 1, [out])
    assert out[0] == 1


def _multicast_ptx(case, mask: int) -> str:
    return (
        T.load_ptx(case, True)
        .replace(
            "complete_tx::bytes [%r9], [%rd1, {%r20, %r21}], [%r8];",
            "complete_tx::bytes.multicast::cluster [%r9], [%rd1, {%r20, %r21}], [%r8], %rs1;",
        )
        .replace(".reg .b32 %r<32>;", f".reg .b32 %r<32>;\n\t.reg .b16 %rs<2>;\n\tmov.u16 %rs1, {mask};")
    )


def test_multicast_within_the_cluster():
    """A launch without clusters is a cluster of one CTA per block: ctaMask 1 delivers to the CTA itself (as the
    plain copy does), a mask naming another rank is an error naming it."""
    case = _load_case(name="mc")
    a = T.arrays(case)
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    args = [_map(case, a["tensor"]), out, np.int32(0), np.int32(8)]
    fp.launch(fp.load(_multicast_ptx(case, 1)).kernel("tma_load"), 1, 128, args)
    assert np.array_equal(out[: T.smem_bytes(case)], expected_load(case, a["tensor"]))
    with pytest.raises(fp.SimulationError, match="names CTA rank 1, past the cluster's 1 CTA"):
        fp.launch(fp.load(_multicast_ptx(case, 3)).kernel("tma_load"), 1, 128, args)


def test_remote_copy_needs_another_cta():
    ptx = T.bulk_ptx(512).replace(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r3], [%rd1], 512, [%r8];",
        "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r3], [%r3], 512, [%r8];",
    )
    src, dst = T.bulk_inputs(None)
    with pytest.raises(fp.SimulationError, match="must be in another CTA of the cluster"):
        fp.launch(fp.load(ptx).kernel("bulk_copy"), 1, 32, [src, dst])


def test_im2col_is_refused():
    ptx = T.load_ptx(_load_case(name="i2c"), True).replace(".tile.mbarrier", ".im2col.mbarrier")
    assert any("im2col" in str(e) for e in fp.load(ptx).kernel("tma_load").program.unsupported)


@pytest.mark.skipif(
    not hasattr(RaceCheck, "async_proxy_access"), reason="racecheck has no async-proxy tracking in this build"
)
def test_racecheck_a_tma_store_of_unfenced_generic_writes():
    """The threads fill the store's shared source with st.shared: without fence.proxy.async before the bulk copy
    reads it (through the async proxy) that is a hazard; with the fence, none."""
    case = next(c for c in T.CASES if c.name == "store2d_none")
    a = T.arrays(case)
    tm = _map(case, a["tensor"])
    fenced = fp.load(T.store_ptx(case, True))
    fp.launch(fenced.kernel("tma_store"), 1, 128, [tm, a["img"], np.int32(0), np.int32(8)], check="racecheck")
    unfenced = fp.load(T.store_ptx(case, True).replace("\tfence.proxy.async;\n", ""))
    with pytest.raises(fp.RaceError, match="async"):
        fp.launch(unfenced.kernel("tma_store"), 1, 128, [tm, a["img"], np.int32(0), np.int32(8)], check="racecheck")


# -- tensor maps edited on the device --------------------------------------------------------------------------------

_REPLACE = """.version 8.6
.target sm_90a
.address_size 64
.visible .entry edit(.param .u64 gmap, .param .u64 addr, .param .u64 out)
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<16>;
\t.reg .b64 %rd<8>;
\t.shared .align 128 .b8 tm[128];
\t.shared .align 1024 .b8 smem[1024];
\t.shared .align 8 .b64 bar;
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, tm;
\tshl.b32 %r3, %r1, 2;
\tadd.u32 %r3, %r2, %r3;
\tmov.u32 %r4, 0;
\tst.shared.u32 [%r3], %r4;
\tbar.warp.sync -1;
\tsetp.ne.u32 %p1, %r1, 0;
\tld.param.u64 %rd1, [gmap];
\tld.param.u64 %rd2, [addr];
\tcvt.u64.u32 %rd3, %r2;
\t@%p1 bra $Lcopy;
\ttensormap.replace.tile.global_address.shared::cta.b1024.b64 [%rd3], %rd2;
\ttensormap.replace.tile.rank.shared::cta.b1024.b32 [%rd3], 1;
\tmov.u32 %r5, 32;
\ttensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd3], 0, %r5;
\tmov.u32 %r5, 8;
\ttensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%rd3], 1, %r5;
\tmov.u32 %r5, 32;
\ttensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd3], 0, %r5;
\tmov.u32 %r5, 16;
\ttensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%rd3], 1, %r5;
\tmov.u64 %rd4, 128;
\ttensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%rd3], 0, %rd4;
\tmov.u32 %r5, 1;
\ttensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd3], 0, %r5;
\ttensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%rd3], 1, %r5;
\ttensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%rd3], 7;
\ttensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%rd3], 3;
$Lcopy:
\tbar.warp.sync -1;
\ttensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd1], [%rd3], 128;
\tfence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;
\t@%p1 bra $Lend;
\tmov.u32 %r8, bar;
\tmbarrier.init.shared::cta.b64 [%r8], 1;
\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 1024;
\tmov.u32 %r9, smem;
\tmov.u32 %r10, 4;
\tcp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [%r9], [%rd1, {%r4, %r10}], [%r8];
$Lwait:
\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r8], 0;
\t@!%p2 bra $Lwait;
\tld.param.u64 %rd5, [out];
\tmov.u32 %r11, 0;
$Lout:
\tadd.u32 %r12, %r9, %r11;
\tld.shared.v4.u32 {%r4, %r5, %r6, %r7}, [%r12];
\tcvt.u64.u32 %rd6, %r11;
\tadd.u64 %rd7, %rd5, %rd6;
\tst.global.v4.u32 [%rd7], {%r4, %r5, %r6, %r7};
\tadd.u32 %r11, %r11, 16;
\tsetp.lt.u32 %p3, %r11, 1024;
\t@%p3 bra $Lout;
$Lend:
\tret;
}
"""


def test_tensormap_replace_builds_a_map_on_the_device():
    """Triton's device-side descriptor sequence: 128 zero bytes in shared memory, tensormap.replace of each field,
    tensormap.cp_fenceproxy to global memory, fence.proxy.tensormap::generic.acquire, then a TMA load through it."""
    x = np.random.default_rng(5).standard_normal((16, 32)).astype(np.float32)
    gmap = np.zeros(128, np.uint8)
    out = np.zeros(1024, np.uint8)
    mod = fp.load(_REPLACE)
    fp.launch(mod.kernel("edit"), 1, 32, [gmap, np.uint64(fp.address(x)), out])
    host = fp.tensor_map_tiled(
        x, data_type="FLOAT32", global_dim=(32, 16), global_strides=(128,), box_dim=(32, 8), swizzle="128B"
    )
    assert gmap.tobytes() == host.bytes
    case = T.Case("edit", "load", "f4", "FLOAT32", (16, 32), (32, 8), (0, 4), swizzle="128B")
    assert np.array_equal(out, expected_load(case, x)[:1024])


_REPLACE_GLOBAL = """.version 8.3
.target sm_90a
.address_size 64
.visible .entry edit(.param .u64 gmap)
{
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<4>;
\tld.param.u64 %rd1, [gmap];
\tmov.u32 %r1, 8;
\ttensormap.replace.tile.box_dim.global.b1024.b32 [%rd1], 1, %r1;
\ttensormap.replace.tile.swizzle_mode.global.b1024.b32 [%rd1], 2;
\ttensormap.replace.tile.fill_mode.global.b1024.b32 [%rd1], 1;
\tfence.proxy.tensormap::generic.release.gpu;
\tret;
}
"""


def test_tensormap_replace_in_global_memory():
    x = np.zeros((40, 32), np.float16)
    before = fp.tensor_map_tiled(x, data_type="FLOAT16", global_dim=(32, 40), global_strides=(64,), box_dim=(32, 16))
    after = fp.tensor_map_tiled(
        x, data_type="FLOAT16", global_dim=(32, 40), global_strides=(64,), box_dim=(32, 8), swizzle="64B", oob_fill=1
    )
    gmap = _map_buffer(before)
    fp.launch(fp.load(_REPLACE_GLOBAL).kernel("edit"), 1, 1, [gmap])
    assert gmap.tobytes() == after.bytes


def _triton_kernels():
    """Two Triton kernels built by Triton's own compiler for sm_90 (no GPU): TMA through a host TensorDescriptor
    (load, store) and through a device-side descriptor (tl.make_tensor_descriptor: tensormap.replace in shared
    memory, tensormap.cp_fenceproxy to the global scratch, then a load whose box runs past the tensor)."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def host_desc(desc, out_ptr, BM: tl.constexpr, BN: tl.constexpr):
        x = desc.load([0, 0])
        offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
        tl.store(out_ptr + offs, x)
        desc.store([0, 0], x + 1)

    @triton.jit
    def device_desc(a_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
        desc = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        x = desc.load([BM, 0])
        offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
        tl.store(out_ptr + offs, x)

    def build(fn, signature):
        c = triton.compile(ASTSource(fn, signature, constexprs={"BM": 64, "BN": 64}), target=GPUTarget("cuda", 90, 32))
        return fp.load(c.asm["ptx"]), c.metadata

    host = build(
        host_desc, {"desc": "tensordesc<fp16[64, 64]>", "out_ptr": "*fp16", "BM": "constexpr", "BN": "constexpr"}
    )
    sig = {"a_ptr": "*fp16", "out_ptr": "*fp16", "M": "i32", "N": "i32", "BM": "constexpr", "BN": "constexpr"}
    return host, build(device_desc, sig)


@pytest.mark.needs("triton")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_triton_tma_kernels():
    (host, host_meta), (device, device_meta) = _triton_kernels()
    assert host_meta.tensordesc_meta[0]["swizzle"] == 3  # Triton asks the launcher for a 128B-swizzled 64 x 64 box
    x = np.random.default_rng(1).standard_normal((64, 64)).astype(np.float16)
    a = x.copy()
    tm = fp.tensor_map_tiled(
        a, data_type="FLOAT16", global_dim=(64, 64), global_strides=(128,), box_dim=(64, 64), swizzle="128B"
    )
    out = np.zeros((64, 64), np.float16)
    shape_strides = [np.int32(64), np.int32(64), np.int64(64), np.int64(1)]  # Triton's launcher passes them too
    args = [tm, *shape_strides, out, np.uint64(0), np.uint64(0)]
    fp.launch(host.kernel("host_desc"), 1, 128, args, shared_mem=host_meta.shared, check="memcheck")
    assert np.array_equal(out.view(np.uint16), x.view(np.uint16))
    assert np.array_equal(a.view(np.uint16), (x + np.float16(1)).view(np.uint16))

    y = np.random.default_rng(2).standard_normal((100, 64)).astype(np.float16)
    out = np.zeros((64, 64), np.float16)
    scratch = np.zeros(max(device_meta.global_scratch_size, 128), np.uint8)
    args = [y, out, np.int32(100), np.int32(64), scratch, np.uint64(0)]
    fp.launch(device.kernel("device_desc"), 1, 128, args, shared_mem=device_meta.shared, check="memcheck")
    want = np.zeros((64, 64), np.float16)
    want[:36] = y[64:]  # rows 100.. of the box are out of bounds: zero
    assert np.array_equal(out.view(np.uint16), want.view(np.uint16))


def _triton_matmuls():
    """A Triton matmul through host TensorDescriptors (TMA loads, a 3-stage mbarrier ring) and the same matmul
    through pointers (cp.async): wgmma in Triton's default sm_90 build, mma.sync with DISABLE_MMA_V3."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def mm_desc(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
        acc = tl.zeros((BM, BN), tl.float32)
        for k in tl.range(0, K, BK, num_stages=3):
            acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
        offs_m, offs_n = pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc)

    @triton.jit
    def mm_ptr(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
        acc = tl.zeros((BM, BN), tl.float32)
        offs_m, offs_n = pid_m * BM + tl.arange(0, BM), pid_n * BN + tl.arange(0, BN)
        for k in tl.range(0, K, BK, num_stages=3):
            offs_k = k + tl.arange(0, BK)
            a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
            b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + offs_m[:, None] * N + offs_n[None, :], acc)

    const = {"BM": 64, "BN": 64, "BK": 32}
    sizes = {"c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", **{k: "constexpr" for k in const}}
    out = []
    for fn, sig in (
        (mm_desc, {"a_desc": "tensordesc<fp16[64, 32]>", "b_desc": "tensordesc<fp16[32, 64]>", **sizes}),
        (mm_ptr, {"a_ptr": "*fp16", "b_ptr": "*fp16", **sizes}),
    ):
        c = triton.compile(ASTSource(fn, sig, constexprs=const), target=GPUTarget("cuda", 90, 32))
        ptx = c.asm["ptx"]
        out.append((fp.load(ptx), c.metadata, ptx))
    return out


@pytest.mark.needs("triton")
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("mma", ["wgmma", "mma.sync"])
def test_triton_tma_matmul_equals_its_pointer_twin(monkeypatch, mma):
    """Triton's reads of the TMA-written tiles (wgmma's matrix descriptors, or ldmatrix) assume the GPU's 64B / 128B
    swizzles: the matmul is bit-equal to the pointer-based one only if the simulated TMA lays the tiles out as the
    hardware does."""
    if mma == "mma.sync":
        monkeypatch.setenv("DISABLE_MMA_V3", "1")
    (desc, desc_meta, desc_ptx), (ptr, ptr_meta, _) = _triton_matmuls()
    assert "cp.async.bulk.tensor" in desc_ptx and mma in desc_ptx
    swizzles = [m["swizzle"] for m in desc_meta.tensordesc_meta]
    assert sorted(swizzles) == [2, 3]  # A (64 x 32 f16): 64B; B (32 x 64 f16): 128B
    m = n = k = 128
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    ta = fp.tensor_map_tiled(
        a, data_type="FLOAT16", global_dim=(k, m), global_strides=(2 * k,), box_dim=(32, 64), swizzle=swizzles[0]
    )
    tb = fp.tensor_map_tiled(
        b, data_type="FLOAT16", global_dim=(n, k), global_strides=(2 * n,), box_dim=(64, 32), swizzle=swizzles[1]
    )
    c_desc, c_ptr = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
    sizes = [np.int32(m), np.int32(n), np.int32(k), np.uint64(0), np.uint64(0)]
    desc_args = [ta, np.int32(m), np.int32(k), np.int64(k), np.int64(1)]
    desc_args += [tb, np.int32(k), np.int32(n), np.int64(n), np.int64(1), c_desc, *sizes]
    fp.launch(desc.kernel(desc.kernels[0]), (2, 2), 128, desc_args, shared_mem=desc_meta.shared)
    fp.launch(ptr.kernel(ptr.kernels[0]), (2, 2), 128, [a, b, c_ptr, *sizes], shared_mem=ptr_meta.shared)
    assert np.array_equal(c_desc.view(np.uint32), c_ptr.view(np.uint32))
    # f32 accumulation of 128 products of size about 1: at most about k * k * 2^-24 = 1e-3 from the exact product
    assert np.abs(c_desc - a.astype(np.float64) @ b.astype(np.float64)).max() < 1e-3


# -- silicon ----------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not CAPTURE.exists(), reason=f"no H200 capture yet ({CAPTURE}: python -m flashsim.gpu.capture.tma)")
def test_replay_h200_capture():
    """Every case the GPU ran (the driver's map in global memory), rerun here with flashsim's map: the shared-memory
    images and tensors bit for bit."""
    cap = np.load(CAPTURE, allow_pickle=False)
    names = [str(n) for n in cap["names"]]
    shas = json.loads(str(cap["meta"]))["ptx_sha256"]
    today = {c.name: (T.load_ptx(c) if c.kind == "load" else T.store_ptx(c)) for c in T.CASES}
    today.update({T.bulk_name(r): T.bulk_ptx(T.bulk_inputs(r)[0].nbytes, r) for r in T.BULK})
    stale = [n for n in names if hashlib.sha256(today[n].encode()).hexdigest() != shas[n]]
    assert not stale, f"the PTX of {stale} changed after the capture: re-capture (python -m flashsim.gpu.capture.tma)"
    failed = []
    for case in T.CASES:
        if case.name not in names:
            continue
        arrays = {k.split("/", 1)[1]: cap[k] for k in cap.files if k.startswith(f"in_{case.name}/")}
        _, got = run_case(case, map_param=False, arrays=arrays)
        if not np.array_equal(
            np.asarray(got).reshape(-1).view(np.uint8), cap[f"out_{case.name}"].reshape(-1).view(np.uint8)
        ):
            failed.append(case.name)
    for reduce in T.BULK:
        name = T.bulk_name(reduce)
        if name in names:
            got = run_bulk(reduce, cap[f"in_{name}/src"], cap[f"in_{name}/dst"])
            if not np.array_equal(got, cap[f"out_{name}"]):
                failed.append(name)
    assert names and not failed, f"differ from the H200: {failed}"
    faulted = json.loads(str(cap["meta"])).get("failed", {})
    cases = {c.name: c for c in T.CASES}
    unrefused = [n for n in faulted if n in cases and not cases[n].fault and "cuTensorMapEncodeTiled" not in faulted[n]]
    assert not unrefused, f"the GPU faulted on {unrefused}, which the simulator runs: give them their fault and rule"


DRIVER_MAPS = CAPTURE.parent / "tma_driver_maps_sm90.json"


def _rules():
    if not DRIVER_MAPS.exists():
        return []
    return json.loads(DRIVER_MAPS.read_text()).get("rules", [])


@pytest.mark.skipif(not _rules(), reason=f"no driver verdicts yet ({DRIVER_MAPS}: python -m flashsim.gpu.capture.tma)")
def test_tensor_map_rules_follow_the_driver():
    """flashsim.ptx.tensor_map_tiled accepts exactly the maps cuTensorMapEncodeTiled accepted (MAP_RULES, the
    driver's verdicts captured on the GPU machine), each refusal a ValueError naming a rule (never the array's
    bounds: the array given covers the region of every map the driver took)."""
    wrong = []
    rules = {name: args for name, args in T.MAP_RULES}
    # a capture made before the tool encoded rank-1 maps through libcuda holds cuda-python's refusal of its NULL
    # stride pointer there, not the driver's verdict on the map
    direct_rank1 = "rank1_encode" in json.loads(DRIVER_MAPS.read_text())
    for entry in _rules():
        a = rules[entry["rule"]]
        if len(a["dims"]) == 1 and not direct_rank1:
            continue
        esize = fp.tensormap.element_size(fp.tensormap.DATA_TYPES[a["data_type"]][1])
        extent = (
            (a["dims"][0] * esize + sum((d - 1) * st for d, st in zip(a["dims"][1:], a["strides"])))
            if a["dims"][0]
            else 0
        )
        buf = np.zeros(max(extent, 16) if extent < 1 << 26 else 16, np.uint8)
        try:
            fp.tensor_map_tiled(
                buf,
                data_type=a["data_type"],
                global_dim=a["dims"],
                global_strides=a["strides"],
                box_dim=a["box"],
                element_strides=a["element_strides"],
                swizzle=a["swizzle"],
                oob_fill=a["oob"],
                l2_promotion=a["l2"],
                interleave=a["interleave"],
            )
            ours = True
        except ValueError as exc:
            ours = "array's start" in str(exc)  # a bounds refusal: every rule passed, the region is not backed
            if ours and extent < 1 << 26:
                raise AssertionError(f"{entry['rule']}: the test's array does not cover the map: {exc}") from None
        if ours != entry["accepted"]:
            wrong.append(f"{entry['rule']}: driver {'accepts' if entry['accepted'] else 'refuses'}, flashsim not")
    assert not wrong, "; ".join(wrong)


_MULTICAST = """.version 8.3
.target sm_90a
.address_size 64
.visible .entry mc(.param .u64 tmap, .param .u64 out)
{
\t.reg .pred %p<4>;
\t.reg .b16 %rs<2>;
\t.reg .b32 %r<24>;
\t.reg .b64 %rd<8>;
\t.shared .align 1024 .b8 smem[2048];
\t.shared .align 8 .b64 bar;
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %cluster_ctarank;
\tmov.u32 %r3, smem;
\tmov.u32 %r8, bar;
\tsetp.ne.u32 %p1, %r1, 0;
\t@%p1 bra $Lsync;
\tmbarrier.init.shared::cta.b64 [%r8], 1;
\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 2048;
$Lsync:
\tfence.mbarrier_init.release.cluster;
\tbarrier.cluster.arrive;
\tbarrier.cluster.wait;
\tsetp.ne.u32 %p2, %r2, 0;
\tor.pred %p3, %p1, %p2;
\t@%p3 bra $Lwait;
\tld.param.u64 %rd1, [tmap];
\tmov.u16 %rs1, 3;
\tmov.u32 %r10, 0;
\tmov.u32 %r11, 8;
\tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster
\t\t[%r3], [%rd1, {%r10, %r11}], [%r8], %rs1;
$Lwait:
\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
\t@!%p3 bra $Lwait;
\tld.param.u64 %rd2, [out];
\tmul.wide.u32 %rd3, %r2, 2048;
\tadd.u64 %rd2, %rd2, %rd3;
\tshl.b32 %r4, %r1, 4;
\tadd.u32 %r5, %r3, %r4;
\tld.shared.v4.u32 {%r12, %r13, %r14, %r15}, [%r5];
\tcvt.u64.u32 %rd4, %r4;
\tadd.u64 %rd5, %rd2, %rd4;
\tst.global.v4.u32 [%rd5], {%r12, %r13, %r14, %r15};
\tbarrier.cluster.arrive;
\tbarrier.cluster.wait;
\tret;
}
"""


@pytest.mark.skipif(
    "cluster" not in inspect.signature(fp.launch).parameters, reason="launches have no clusters in this build"
)
def test_multicast_to_a_cluster_of_two():
    """Rank 0 multicasts one box to both CTAs of a 2-CTA cluster (ctaMask 0b11); each CTA's own mbarrier completes
    with the box's bytes and each CTA finds the same 128B-swizzled image."""
    case = _load_case(name="mc2")
    a = T.arrays(case)
    out = np.zeros((2, 2048), np.uint8)
    mod = fp.load(_MULTICAST)
    fp.launch(
        mod.kernel("mc"), 2, 128, [_map_buffer(_map(case, a["tensor"])), out], cluster=(2, 1, 1), check="racecheck"
    )
    want = expected_load(case, a["tensor"])
    assert np.array_equal(out[0], want) and np.array_equal(out[1], want)


_REMOTE = """.version 8.3
.target sm_90a
.address_size 64
.visible .entry remote(.param .u64 src, .param .u64 out)
{
\t.reg .pred %p<4>;
\t.reg .b32 %r<24>;
\t.reg .b64 %rd<8>;
\t.shared .align 128 .b8 buf[512];
\t.shared .align 128 .b8 dst[512];
\t.shared .align 8 .b64 bar;
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %cluster_ctarank;
\tmov.u32 %r3, buf;
\tmov.u32 %r4, dst;
\tmov.u32 %r8, bar;
\tld.param.u64 %rd1, [src];
\tmul.wide.u32 %rd7, %r2, 512;
\tadd.u64 %rd1, %rd1, %rd7;
\tshl.b32 %r5, %r1, 4;
\tcvt.u64.u32 %rd2, %r5;
\tadd.u64 %rd3, %rd1, %rd2;
\tld.global.v4.u32 {%r12, %r13, %r14, %r15}, [%rd3];
\tadd.u32 %r6, %r3, %r5;
\tst.shared.v4.u32 [%r6], {%r12, %r13, %r14, %r15};
\tadd.u32 %r6, %r4, %r5;
\tst.shared.v4.u32 [%r6], {%r12, %r13, %r14, %r15};
\tsetp.ne.u32 %p1, %r1, 0;
\t@%p1 bra $Lsync;
\tmbarrier.init.shared::cta.b64 [%r8], 1;
\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 512;
$Lsync:
\tfence.proxy.async;
\tfence.mbarrier_init.release.cluster;
\tbarrier.cluster.arrive;
\tbarrier.cluster.wait;
\t@%p1 bra $Lwait;
\tsetp.ne.u32 %p2, %r2, 0;
\t@%p2 bra $Lrank1;
\tmapa.shared::cluster.u32 %r9, %r4, 1;
\tmapa.shared::cluster.u32 %r10, %r8, 1;
\tcp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r9], [%r3], 512, [%r10];
\tbra $Lwait;
$Lrank1:
\tmapa.shared::cluster.u32 %r9, %r4, 0;
\tmapa.shared::cluster.u32 %r10, %r8, 0;
\tcp.reduce.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes.add.u32 [%r9], [%r3], 512, [%r10];
$Lwait:
\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [%r8], 0;
\t@!%p3 bra $Lwait;
\tld.param.u64 %rd4, [out];
\tmul.wide.u32 %rd5, %r2, 512;
\tadd.u64 %rd4, %rd4, %rd5;
\tadd.u32 %r6, %r4, %r5;
\tld.shared.v4.u32 {%r12, %r13, %r14, %r15}, [%r6];
\tadd.u64 %rd6, %rd4, %rd2;
\tst.global.v4.u32 [%rd6], {%r12, %r13, %r14, %r15};
\tbarrier.cluster.arrive;
\tbarrier.cluster.wait;
\tret;
}
"""


@pytest.mark.skipif(
    "cluster" not in inspect.signature(fp.launch).parameters, reason="launches have no clusters in this build"
)
def test_bulk_copy_and_reduce_into_the_other_cta():
    """Rank 0 copies its buffer into rank 1's shared memory, rank 1 adds its buffer into rank 0's (u32, wrapping):
    each completes on the destination CTA's mbarrier."""
    src = np.random.default_rng(4).integers(0, 2**32, (2, 128), dtype=np.uint32)
    out = np.zeros((2, 128), np.uint32)
    fp.launch(fp.load(_REMOTE).kernel("remote"), 2, 32, [src, out], cluster=(2, 1, 1), check="racecheck")
    assert np.array_equal(out[1], src[0]) and np.array_equal(out[0], src[0] + src[1])


def test_box_geometry_aliasing_is_decided_once_per_geometry():
    """A tensor store's aliasing check (every box element at its own global address) depends on the box's geometry
    only: dense rows and element strides alias nothing; a row stride shorter than the row's bytes, or a zero element
    stride's repeat of one element, alias; the answer holds for any box position (the addresses differ by a base)."""
    from flashsim.ptx.semantics.bulk import _box_distinct

    assert _box_distinct((16, 4), (1, 1), 4, (64,))  # 16 f32 per row, rows 64 bytes apart: dense
    assert _box_distinct((8, 4), (2, 1), 4, (64,))  # every other element of a row
    assert not _box_distinct((16, 4), (1, 1), 4, (32,))  # rows 32 bytes apart overlap their 64-byte neighbours
    assert not _box_distinct((4, 4, 2), (1, 1, 1), 4, (16, 32))  # planes 32 bytes apart: plane 1 is plane 0's rows 2..
