"""The 8-bit ldmatrix / stmatrix forms of sm_100a / sm_120a in flashsim.ptx with arch="sm_120": ldmatrix.m8n16
(.b8x16 from .b4x16_p64 / .b6x16_p32), ldmatrix.m16n16.trans (.b8 and both packed formats), stmatrix.m16n8.trans.b8.
The register maps are held to CuTe's SM100 copy atoms (cute/atom/copy_traits_sm100.hpp, stated here with
flashsim.layout.cute), both as flashsim.layout.ldmatrix's tables and through hand-written PTX run by the simulator
with the rows placed at random in shared memory; the packed rows are decoded by the PTX ISA's format description
written here (16 codes little-endian in the first 8 / 12 bytes, the rest padding), each code in flashsim's reading of
its 8-bit container (layout.ldmatrix.CONTAINER_SHIFT). ptxas -arch=sm_120a assembles every form used here and refuses
the forms the simulator refuses."""

from __future__ import annotations

import functools
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ptx_matrix import HEADER, ROWS, WARPS, smem_kernel, vec

from flashsim import ptx
from flashsim.layout import ldmatrix as L
from flashsim.layout.cute import Layout

HEADER_120 = ".version 8.8\n.target sm_120a\n.address_size 64\n"

# CuTe's SM100 copy traits: (thread, value) -> bit of the copied block; the source of LDSM is the rows the lanes point
# at (128 bits each), its destination the registers (32 bits each); STSM swaps the two.
LDSM_T = {  # ldmatrix.m16n16.x{1,2}.trans.b8: SM100_U8x8_LDSM_T, SM100_U8x16_LDSM_T
    1: (
        Layout(((2, 2, 4, 2), 128), ((128, 1024, 256, 0), 1)),
        Layout(((4, 8), (8, 2, 2, 2)), ((256, 8), (1, 128, 64, 1024))),
    ),
    2: (
        Layout(((2, 2, 4, 2), 128), ((128, 1024, 256, 2048), 1)),
        Layout(((4, 8), (8, 2, 2, 4)), ((256, 8), (1, 128, 64, 1024))),
    ),
}
LDSM_N_DU8x16 = {  # ldmatrix.m8n16.x{1,2,4}.b8x16.{b4x16_p64,b6x16_p32}: SM100_SU4_DU8x16_x*_LDSM_N (and SU6)
    1: (Layout(((8, 4), 128), ((128, 0), 1)), Layout((32, 32), (32, 1))),
    2: (Layout(((16, 2), 128), ((128, 0), 1)), Layout((32, (32, 2)), (32, (1, 1024)))),
    4: (Layout((32, 128), (128, 1)), Layout((32, (32, 4)), (32, (1, 1024)))),
}
STSM_T = {  # stmatrix.m16n8.x{1,2,4}.trans.b8: SM100_U8x4_STSM_T, SM100_U8x8_STSM_T, SM100_U8x16_STSM_T (regs, rows)
    1: (Layout(((4, 8), (8, 2, 2)), ((256, 8), (1, 128, 64))), Layout(((8, 4), 128), ((128, 0), 1))),
    2: (Layout(((4, 8), (8, 2, 2, 2)), ((256, 8), (1, 128, 64, 1024))), Layout(((16, 2), 128), ((128, 0), 1))),
    4: (Layout(((4, 8), (8, 2, 2, 4)), ((256, 8), (1, 128, 64, 1024))), Layout((32, 128), (128, 1))),
}
CUTE = {"m16n16": LDSM_T, "m8n16": LDSM_N_DU8x16}


def cute_map(rows_layout: Layout, regs_layout: Layout, registers: int) -> np.ndarray:
    """For each (lane, register, byte): (row-giving lane, byte of its row) by a pair of CuTe layouts."""
    row_bits = rows_layout.table().reshape(128, 32).T  # [thread, bit of its row]
    owner = {}
    for t in range(32):
        for b in range(0, 128, 8):
            owner.setdefault(int(row_bits[t, b]), (t, b // 8))  # stride-0 threads repeat the first ones
    reg_bits = regs_layout.table().reshape(-1, 32).T  # [thread, bit of its registers]
    out = np.zeros((32, registers, 4, 2), np.int64)
    for t in range(32):
        for r in range(registers):
            for k in range(4):
                out[t, r, k] = owner[int(reg_bits[t, 32 * r + 8 * k])]
    return out


def registers(shape: str, num: int) -> int:
    return num * (2 if shape == "m16n16" else 1)


@pytest.mark.parametrize("shape, num", [("m16n16", 1), ("m16n16", 2), ("m8n16", 1), ("m8n16", 2), ("m8n16", 4)])
def test_ldmatrix_maps_are_cutes(shape, num):
    src, dst = CUTE[shape][num]
    want = cute_map(src, dst, registers(shape, num))
    row, elem = L.b8_map(shape, num)
    assert np.array_equal(row, want[..., 0]) and np.array_equal(elem, want[..., 1])


@pytest.mark.parametrize("num", [1, 2, 4])
def test_stmatrix_maps_are_cutes(num):
    regs, rows = STSM_T[num]
    want = cute_map(rows, regs, num)
    row, elem = L.b8_map("m16n8", num)
    assert np.array_equal(row, want[..., 0]) and np.array_equal(elem, want[..., 1])


def test_m16n16_trans_gives_four_consecutive_columns_of_two_rows():
    """The ISA's words for Figure 105: lane l holds columns 4 (l % 4) .. 4 (l % 4) + 3 of rows l / 4 and l / 4 + 8 of
    the transposed matrix (row r of the matrix in memory is its column r)."""
    row, elem = L.b8_map("m16n16", 1)
    lane = np.arange(32)[:, None, None]
    assert set(map(tuple, np.stack([elem, row], -1).reshape(32, -1, 2)[0])) == {
        (r, c) for r in (0, 8) for c in range(4)
    }
    assert np.array_equal(np.sort(row.reshape(32, -1), axis=1)[:, ::2], 4 * (lane[:, 0] % 4) + np.arange(4))
    assert np.array_equal(
        np.unique(elem.reshape(32, -1), axis=1), np.stack([lane[:, 0, 0] // 4, lane[:, 0, 0] // 4 + 8], 1)
    )


# -- the packed formats, as the ISA describes them (written here) ----------------------------------------------------


def isa_elements(rows: np.ndarray, fmt: str) -> np.ndarray:
    """(..., 16) uint8 rows -> their 16 elements, each in the low bits of a byte: .b8 the bytes; .b4x16_p64 the nibbles
    of bytes 0-7, element 2i low in byte i; .b6x16_p32 six bits each of bytes 0-11 little-endian."""
    if fmt == ".b8":
        return rows
    bits, shift = (4, 0) if fmt == ".b4x16_p64" else (6, 0)
    flat = rows.reshape(-1, 16)
    out = np.zeros((flat.shape[0], 16), np.uint8)
    for i, r in enumerate(flat):
        value = int.from_bytes(bytes(r[: 2 * bits].tolist()), "little")
        out[i] = [((value >> (bits * e)) & ((1 << bits) - 1)) << shift for e in range(16)]
    return out.reshape(rows.shape)


def test_unpack_rows_matches_the_isa_formats():
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 256, (64, 16), dtype=np.uint8)
    for fmt in L.FORMAT_BITS:
        assert np.array_equal(L.unpack_rows(rows, fmt), isa_elements(rows, fmt)), fmt
    assert not (L.unpack_rows(rows, ".b4x16_p64") & 0xF0).any()  # container bits 4-7 zero
    assert not (L.unpack_rows(rows, ".b6x16_p32") & 0xC0).any()


# -- through the simulator -------------------------------------------------------------------------------------------


@functools.cache
def kernel(body: str, regs_in: int, regs_out: int):
    text = smem_kernel(body, regs_in, regs_out).replace(HEADER, HEADER_120)
    return ptx.load(text, arch="sm_120", contraction="none").kernel("k")


def launch(body: str, regs_in: int, regs_out: int, rows, sel, rin):
    rout = np.zeros((32 * WARPS, max(regs_out, 1)), np.uint32)
    out = np.zeros_like(rows)
    ptx.launch(kernel(body, regs_in, regs_out), (1,), (32 * WARPS,), [rows, sel, rin, rout, out])
    return rout, out


LOADS = [
    ("m16n16", num, fmt, space)
    for num in (1, 2)
    for fmt in (".b8", ".b4x16_p64", ".b6x16_p32")
    for space in (".shared", ".shared::cta", "")
] + [
    ("m8n16", num, fmt, space) for num in (1, 2, 4) for fmt in (".b4x16_p64", ".b6x16_p32") for space in (".shared", "")
]


def load_insn(shape, num, fmt, space) -> str:
    types = fmt if fmt == ".b8" else f".b8x16{fmt}"
    trans = ".trans" if shape == "m16n16" else ""
    addr = "{addr}" if space else "{gaddr}"
    return f"ldmatrix.sync.aligned.{shape}.x{num}{trans}{space}{types} {vec('d', registers(shape, num))}, [{addr}];"


@pytest.mark.parametrize("shape, num, fmt, space", LOADS)
@settings(max_examples=2, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_ldmatrix_against_cute(shape, num, fmt, space, seed):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 256, (ROWS * WARPS, 16), dtype=np.uint8).view(np.uint16)
    sel = np.concatenate([rng.permutation(ROWS)[:32] for _ in range(WARPS)]).astype(np.uint32)
    n = registers(shape, num)
    rout, _ = launch(load_insn(shape, num, fmt, space), 0, n, rows, sel, np.zeros((32 * WARPS, 1), np.uint32))
    where = cute_map(*CUTE[shape][num], n)
    elements = isa_elements(rows.view(np.uint8), fmt)
    for w in range(WARPS):
        lanes = sel[32 * w + where[..., 0]] + w * ROWS  # (32, n, 4) the rows the owning lanes point at
        want = elements[lanes, where[..., 1]].astype(np.uint32)
        want = want[..., 0] | want[..., 1] << 8 | want[..., 2] << 16 | want[..., 3] << 24
        np.testing.assert_array_equal(rout[32 * w : 32 * w + 32], want)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("space", [".shared", ""])
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_stmatrix_against_cute(num, space, seed):
    rng = np.random.default_rng(seed)
    rows = np.zeros((ROWS * WARPS, 8), np.uint16)
    sel = np.concatenate([rng.permutation(ROWS)[:32] for _ in range(WARPS)]).astype(np.uint32)
    rin = rng.integers(0, 1 << 32, (32 * WARPS, num), dtype=np.uint64).astype(np.uint32)
    addr = "{addr}" if space else "{gaddr}"
    body = f"stmatrix.sync.aligned.m16n8.x{num}.trans{space}.b8 [{addr}], {vec('r', num)};"
    _, out = launch(body, num, 0, rows, sel, rin)
    want = np.zeros((ROWS * WARPS, 16), np.uint8)
    where = cute_map(*STSM_T[num][::-1], num)
    for w in range(WARPS):
        for t in range(32):
            for j in range(num):
                for k in range(4):
                    lane, byte = where[t, j, k]
                    want[w * ROWS + sel[32 * w + lane], byte] = (int(rin[32 * w + t, j]) >> (8 * k)) & 0xFF
    np.testing.assert_array_equal(out.view(np.uint8), want)


def test_padding_is_not_read():
    rng = np.random.default_rng(11)
    rows = rng.integers(0, 256, (ROWS * WARPS, 16), dtype=np.uint8)
    sel = np.tile(np.arange(32, dtype=np.uint32), WARPS)
    for fmt, data in ((".b4x16_p64", 8), (".b6x16_p32", 12)):
        noisy = rows.copy()
        noisy[:, data:] = rng.integers(0, 256, (ROWS * WARPS, 16 - data), dtype=np.uint8)
        quiet = rows.copy()
        quiet[:, data:] = 0
        body = load_insn("m8n16", 4, fmt, ".shared")
        a, _ = launch(body, 0, 4, noisy.view(np.uint16), sel, np.zeros((64, 1), np.uint32))
        b, _ = launch(body, 0, 4, quiet.view(np.uint16), sel, np.zeros((64, 1), np.uint32))
        assert np.array_equal(a, b), fmt


# -- what ptxas accepts, and what the simulator refuses --------------------------------------------------------------

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA 13.0) is not on PATH")


def _ptxas(text: str, arch: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "probe.ptx"
    path.write_text(text)
    return subprocess.run(["ptxas", f"-arch={arch}", str(path), "-o", "/dev/null"], capture_output=True, text=True)


@needs_ptxas
def test_ptxas_accepts_every_form_here(tmp_path):
    bodies = [load_insn(*form) for form in LOADS]
    bodies += [
        f"stmatrix.sync.aligned.m16n8.x{n}.trans{s}.b8 [{{addr}}], {vec('r', n)};"
        for n in (1, 2, 4)
        for s in ("", ".shared")
    ]
    text = smem_kernel("\n".join(bodies), 4, 4).replace(HEADER, HEADER_120)
    done = _ptxas(text, "sm_120a", tmp_path)
    assert done.returncode == 0, done.stderr


REFUSED = [  # each refused by ptxas 13.0 -arch=sm_120a (its message) and by the simulator
    ("ldmatrix.sync.aligned.m16n16.x1.shared.b8 {%d0, %d1}, [%sa];", "Modifier '.trans' require"),
    ("ldmatrix.sync.aligned.m8n16.x1.trans.shared.b8x16.b4x16_p64 {%d0}, [%sa];", "Modifier .trans not allowed"),
    ("ldmatrix.sync.aligned.m8n16.x1.shared.b8 {%d0}, [%sa];", "Unexpected number of instruction types"),
    ("ldmatrix.sync.aligned.m8n16.x1.shared.b8x16 {%d0}, [%sa];", "format conversion"),
    ("stmatrix.sync.aligned.m16n8.x1.shared.b8 [%sa], {%d0};", "Modifier '.trans' require"),
    ("stmatrix.sync.aligned.m16n8.x2.trans.shared.b8x16.b4x16_p64 [%sa], {%d0, %d1};", "Unexpected instruction types"),
    ("ldmatrix.sync.aligned.m16n16.x2.trans.shared.b16 {%d0, %d1, %d2, %d3}, [%sa];", "Incorrect instruction type"),
    ("ldmatrix.sync.aligned.m8n8.x1.shared.b8 {%d0}, [%sa];", "Incorrect instruction type"),
]


def _module(body: str, target: str = "sm_120a") -> str:
    return "\n".join(
        [".version 8.8", f".target {target}", ".address_size 64", ".visible .entry k()", "{"]
        + [".shared .align 16 .b8 smem[512];", ".reg .b32 %sa, %d<4>;", "mov.u32 %sa, smem;", body, "ret;", "}"]
    )


@needs_ptxas
@pytest.mark.parametrize("insn, message", REFUSED)
def test_ptxas_refusals_are_refusals(insn, message, tmp_path):
    done = _ptxas(_module(insn), "sm_120a", tmp_path)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    assert ptx.load(_module(insn), arch="sm_120").kernel("k").program.unsupported, f"the simulator accepts {insn}"


@pytest.mark.parametrize("arch", ["sm_90", "sm_89"])
@pytest.mark.parametrize(
    "insn",
    [
        "ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%d0, %d1}, [%sa];",
        "ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b6x16_p32 {%d0}, [%sa];",
        "stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [%sa], {%d0};",
    ],
)
def test_refused_before_sm_100(arch, insn):
    program = ptx.load(_module(insn, "sm_90a"), arch=arch).kernel("k").program
    assert any(f"refused on {arch} (accepted on sm_100, sm_120" in str(e) for e in program.unsupported)


@needs_ptxas
def test_ptxas_refuses_them_on_sm_90a(tmp_path):
    done = _ptxas(
        _module("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%d0, %d1}, [%sa];", "sm_90a"), "sm_90a", tmp_path
    )
    assert done.returncode != 0 and "not supported on .target 'sm_90a'" in done.stderr


def test_b4x16_p64_leaves_e2m1_in_the_low_nibble():
    """CUTLASS (cute/atom/mma_traits_sm120.hpp, fp4_shift_A / fp4_shift_B): ldmatrix .b4x16_p64 leaves each FP4 code in
    bits 0-3 of its byte, 0b0000ABCD, and a kernel shifts it to 0b00ABCD00 for kind::f8f6f4; FP6 stays as loaded. The
    shifted byte, read as e2m3 (ml_dtypes as the independent decoder), is the e2m1 code's value."""
    codes = np.arange(16, dtype=np.uint8)
    row = np.tile(np.array([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE], np.uint8), 2)  # elements 0..15
    container = L.unpack_rows(row, ".b4x16_p64")
    assert np.array_equal(container, codes)
    as_e2m3 = (container << 2).view(ml_dtypes.float6_e2m3fn).astype(np.float32)
    assert np.array_equal(as_e2m3, codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32))
