"""Tensor maps: ``tensor_map_tiled`` (cuTensorMapEncodeTiled's arguments and rules) and the 128 bytes that carry a
map into a kernel.

A real CUtensorMap is an opaque 128-byte object whose layout only the driver knows. flashsim's encoding is its own
(``TensorMap.bytes``, decoded again by ``decode``); it is not the driver's and a driver-encoded map means nothing to
the simulator (and the reverse). It holds the fields ``tensormap.replace`` edits, in the units that instruction uses,
so that maps built or edited on the device (Triton's device-side descriptors start from 128 zero bytes in shared
memory) decode the same way as host-built ones:

    offset  size  field
    0       4     magic b"FSTM"
    4       1     version (1)
    5       1     rank - 1 (the PTX field is zero-based)
    6       1     element type, PTX's .elemtype code (tensormap.replace's Table: 0 .u8 ... 10 .bf16; not CUDA's enum)
    7       1     interleave (0 none, 1 16B, 2 32B)
    8       1     swizzle (0 none, 1 32B, 2 64B, 3 128B)
    9       1     swizzle atomicity (0: 16B, the only one of sm_90)
    10      1     fill mode (0 zero, 1 OOB-NaN)
    11      1     L2 promotion (0 none, 1 64B, 2 128B, 3 256B)
    16      8     global address (flashsim.ptx.address of the array)
    24      40    global dims, 5 x u64 (elements)
    64      32    global strides of dims 1..4, 4 x u64 (bytes)
    96      10    box dims, 5 x u16 (elements)
    106     5     element (traversal) strides, 5 x u8
    111-127       zero

Nothing of Triton's launcher workaround (it clears bit 21 of the driver map's second 8-byte word on old drivers for
small tensors) applies to this encoding: a launcher that does it to a flashsim map would break the header, so
front-ends pass flashsim maps unmodified.

Validation is cuTensorMapEncodeTiled's (CUDA 13 cuda.h): rank 1..5 (>= 3 with interleave); global address 16-byte
aligned (32 with 32B interleave); dims 1..2^32; strides multiples of 16 (32 with 32B interleave) below 2^40; box
dims 1..256, the inner box a multiple of 16 bytes without interleave and at most the swizzle span with a swizzle;
element strides 1..8; OOB-NaN fill only for floating-point types (the driver's verdicts on MAP_RULES,
flashsim.ptx.probes.tma, are held in tests/test_ptx_tma.py). Each
refusal is a ValueError naming the argument and the rule. ``tensor_map_tiled`` also refuses a map whose region
does not lie inside ``array`` (nothing is ever read or written outside the given arrays).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

import numpy as np

from ..layout import swizzle as swz
from .memory import _root, address

__all__ = ["tensor_map_tiled", "TensorMap", "decode", "MAGIC", "SIZE", "DATA_TYPES", "OOB_NAN", "element_size"]

MAGIC = b"FSTM"
VERSION = 1
SIZE = 128

# CUtensorMapDataType (cuda.h) -> PTX .elemtype code (PTX ISA, tensormap.replace's new_val table: the two differ from
# FLOAT64 on). The packed sub-byte types of sm_100 / sm_120 (13-15; cuda.h: "16 x U4" / "16 x U6" values, dim 0
# counting the values): 16U4_ALIGN8B (PTX .b4x16) packs two 4-bit values per byte alike in global and shared memory
# (CUTLASS's sm120 FP4 GEMMs load A and B so); 16U4_ALIGN16B (.b4x16_p64) and 16U6_ALIGN16B (.b6x16_p32) copy each
# group of 16 values (8 / 12 bytes in global memory) into 16 bytes of shared memory, leaving an 8 / 4-byte gap
# after it (what ldmatrix .b4x16_p64 / .b6x16_p32 read: CUTLASS's mxf8f6f4 GEMMs load FP4 / FP6 operands so).
# ``TensorMap.bytewise`` is the map the copy unit runs: bytes, or 16-value groups.
DATA_TYPES = {
    "UINT8": (0, 0),
    "UINT16": (1, 1),
    "UINT32": (2, 2),
    "INT32": (3, 3),
    "UINT64": (4, 4),
    "INT64": (5, 5),
    "FLOAT16": (6, 6),
    "FLOAT32": (7, 7),
    "FLOAT64": (8, 9),
    "BFLOAT16": (9, 10),
    "FLOAT32_FTZ": (10, 8),
    "TFLOAT32": (11, 11),
    "TFLOAT32_FTZ": (12, 12),
    "16U4_ALIGN8B": (13, 13),
    "16U4_ALIGN16B": (14, 14),
    "16U6_ALIGN16B": (15, 15),
}
PACKED_4BIT = frozenset({13})  # PTX .elemtype codes of two elements per byte, packed alike in global and shared
# PTX .elemtype codes of 16-value groups padded in shared memory: (bytes of a group in global memory, in shared)
PADDED_GROUPS = {14: (8, 16), 15: (12, 16)}
GROUP = 16  # values per group of the padded types
# the gap after each group in shared memory: cuda.h leaves its contents unstated; flashsim writes zeros there (no
# instruction that reads such a tile, ldmatrix .b4x16_p64 / .b6x16_p32, reads the gap)
GAP_FILL = 0
_PTX_SIZE = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 4, 9: 8, 10: 2, 11: 4, 12: 4}
_PTX_NAME = {0: "u8", 1: "u16", 2: "u32", 3: "s32", 4: "u64", 5: "s64", 6: "f16", 7: "f32", 8: "f32.ftz", 9: "f64"}
_PTX_NAME.update({10: "bf16", 11: "tf32", 12: "tf32.ftz", 13: "b4x16", 14: "b4x16_p64", 15: "b6x16_p32"})
FLOATING = frozenset({6, 7, 8, 9, 10, 11, 12})
# The OOB-NaN of each floating element size, as the H100 writes it (tests/data/ptx_tma/tma_sm90.npz: the f32, f16
# and bf16 NaN-fill cases): the halfword 0x7FF7 repeated over the element, whatever its type (0x7FF7 is a NaN of
# f16 and bf16, 0x7FF77FF7 of f32), not the canonical NaN the arithmetic gives; f64 follows the same
# pattern (0x7FF77FF77FF77FF7, a NaN too): the load2d_f64_nan case shows it.
OOB_NAN = {2: 0x7FF7, 4: 0x7FF77FF7, 8: 0x7FF77FF77FF77FF7}

_INTERLEAVE = {"NONE": 0, "16B": 1, "32B": 2}
_SWIZZLE = {"NONE": 0, "32B": 1, "64B": 2, "128B": 3}
_SWIZZLE_SM100 = {"128B_ATOM_32B": 4, "128B_ATOM_32B_FLIP_8B": 5, "128B_ATOM_64B": 6}
_L2 = {"NONE": 0, "L2_64B": 1, "L2_128B": 2, "L2_256B": 3, "64B": 1, "128B": 2, "256B": 3}
_OOB = {"NONE": 0, "NAN_REQUEST_ZERO_FMA": 1}
_PREFIX = {
    "data_type": "CU_TENSOR_MAP_DATA_TYPE_",
    "interleave": "CU_TENSOR_MAP_INTERLEAVE_",
    "swizzle": "CU_TENSOR_MAP_SWIZZLE_",
    "l2_promotion": "CU_TENSOR_MAP_L2_PROMOTION_",
    "oob_fill": "CU_TENSOR_MAP_FLOAT_OOB_FILL_",
}


def element_size(elemtype: int) -> int:
    """Bytes of one element of PTX .elemtype code ``elemtype``."""
    return _PTX_SIZE[elemtype]


@dataclass(frozen=True)
class TensorMap:
    """A tiled tensor map (``tensor_map_tiled`` or ``decode``): fields in tensormap.replace's units, dims innermost
    first. ``bytes`` (128) is what a kernel receives: pass the TensorMap itself for a ``.param .align 64 .b8 p[128]``
    parameter, or put ``bytes`` in a struct parameter or a global buffer."""

    rank: int
    elemtype: int  # PTX .elemtype code
    global_address: int
    global_dim: tuple
    global_strides: tuple  # bytes, dims 1..rank-1
    box_dim: tuple
    element_strides: tuple
    interleave: int = 0
    swizzle: int = 0
    swizzle_atomicity: int = 0
    fill: int = 0
    l2_promotion: int = 0
    grouped: bool = False  # a padded map's copy-unit view: dim 0 counts 16-value groups (``bytewise``)

    @property
    def element_size(self) -> int:
        """Bytes of an element in shared memory (a padded map's group: 16)."""
        if self.elemtype in PADDED_GROUPS and self.grouped:
            return PADDED_GROUPS[self.elemtype][1]
        if self.elemtype in PACKED_4BIT or self.elemtype in PADDED_GROUPS:
            raise ValueError("a packed sub-byte tensor map has no whole-byte elements: copy through its bytewise() map")
        return _PTX_SIZE[self.elemtype]

    @property
    def global_element_size(self) -> int:
        """Bytes of an element in global memory (a padded map's group: 8 or 12)."""
        if self.elemtype in PADDED_GROUPS and self.grouped:
            return PADDED_GROUPS[self.elemtype][0]
        return self.element_size

    @property
    def _per_unit(self) -> int:
        """Values of the map per element of its bytewise view along dim 0."""
        return 2 if self.elemtype in PACKED_4BIT else GROUP if self.elemtype in PADDED_GROUPS else 1

    def bytewise(self) -> TensorMap:
        """The map the copy unit runs: a 16U4_ALIGN8B map as the UINT8 map of its bytes (dim 0's extent and box
        halved), a padded map with dim 0 in 16-value groups (``grouped``; ``element_size`` 16 bytes in shared memory,
        ``global_element_size`` 8 or 12 in global memory); any other map itself. A coordinate along dim 0 converts
        with ``byte_coordinate``."""
        k = self._per_unit
        if k == 1 or self.grouped:
            return self
        return replace(
            self,
            elemtype=0 if self.elemtype in PACKED_4BIT else self.elemtype,
            grouped=self.elemtype in PADDED_GROUPS,
            global_dim=(self.global_dim[0] // k, *self.global_dim[1:]),
            box_dim=(self.box_dim[0] // k, *self.box_dim[1:]),
        )

    def byte_coordinate(self, c0: int) -> int:
        """Dim 0's coordinate ``c0`` (in values) in the bytewise map; ValueError for one inside a byte (a packed 4-bit
        map's odd one) or a group (a padded map's one off a multiple of 16)."""
        k = 1 if self.grouped else self._per_unit
        if c0 % k:
            what = "odd (mid-byte)" if k == 2 else f"not a multiple of {k} (inside a group of the padded type)"
            raise ValueError(f"the innermost coordinate {c0} of a packed {self.type_name} tensor map is {what}")
        return c0 // k

    @property
    def type_name(self) -> str:
        return _PTX_NAME[self.elemtype]

    @property
    def swizzle_mode(self) -> str:
        """flashsim.layout.swizzle's name of the swizzle ("none", "32B", "64B", "128B")."""
        return swz.from_tensor_map(self.swizzle)

    @property
    def box_elements(self) -> tuple:
        """Elements of the box along each dim: boxDim[i] / elementStrides[i] rounded up (dim 0's stride is ignored
        without interleave: TMA has no stride in dim 0, cuda.h)."""
        out = []
        for i, (b, e) in enumerate(zip(self.box_dim, self.element_strides)):
            out.append(b if (i == 0 and self.interleave == 0) else -(-b // e))
        return tuple(out)

    @property
    def box_bytes(self) -> int:
        """Bytes a copy of the box moves (and completes on an mbarrier), out-of-bound elements included."""
        return int(np.prod(self.box_elements)) * self.element_size

    @property
    def shared_chunks(self) -> np.ndarray:
        """Logical offsets (before the swizzle) of the box's 16-byte chunks from a copy's shared address: rows padded
        to the swizzle span (flashsim.layout.swizzle.box_chunks)."""
        n = self.box_elements
        return swz.box_chunks(n[0] * self.element_size, int(np.prod(n[1:])), self.swizzle_mode)

    @property
    def bytes(self) -> bytes:
        head = struct.pack(
            "<4s8B",
            MAGIC,
            VERSION,
            self.rank - 1,
            self.elemtype,
            self.interleave,
            self.swizzle,
            self.swizzle_atomicity,
            self.fill,
            self.l2_promotion,
        )
        pad = lambda t, n: tuple(t) + (0,) * (n - len(t))  # noqa: E731
        out = bytearray(SIZE)
        out[0:12] = head
        out[16:24] = struct.pack("<Q", self.global_address)
        out[24:64] = struct.pack("<5Q", *pad(self.global_dim, 5))
        out[64:96] = struct.pack("<4Q", *pad(self.global_strides, 4))
        out[96:106] = struct.pack("<5H", *pad(self.box_dim, 5))
        out[106:111] = struct.pack("<5B", *pad(self.element_strides, 5))
        return bytes(out)

    def __bytes__(self) -> bytes:
        return self.bytes

    def check(self) -> None:
        """cuTensorMapEncodeTiled's rules (module docstring): ValueError naming the argument and the rule."""
        _validate(self)


def decode(raw) -> TensorMap:
    """The TensorMap of 128 bytes made by ``TensorMap.bytes`` (possibly edited by tensormap.replace); ValueError
    when they are not one (no magic, another version) or break a rule."""
    raw = bytes(raw)
    if len(raw) != SIZE:
        raise ValueError(f"a tensor map has {SIZE} bytes, got {len(raw)}")
    if raw[:4] != MAGIC:
        if not any(raw):
            raise ValueError("the tensor map is 128 zero bytes (no field was ever set)")
        raise ValueError(
            "not a flashsim tensor map (no FSTM magic): maps must come from flashsim.ptx.tensor_map_tiled or "
            "tensormap.replace; a driver-encoded CUtensorMap is opaque to the simulator"
        )
    if raw[4] != VERSION:
        raise ValueError(f"flashsim tensor map version {raw[4]}, this simulator reads version {VERSION}")
    rank = raw[5] + 1
    if not 1 <= rank <= 5:
        raise ValueError(f"rank {rank}: tensorRank must be 1..5")
    dims = struct.unpack("<5Q", raw[24:64])
    strides = struct.unpack("<4Q", raw[64:96])
    box = struct.unpack("<5H", raw[96:106])
    es = struct.unpack("<5B", raw[106:111])
    tm = TensorMap(
        rank=rank,
        elemtype=raw[6],
        global_address=struct.unpack("<Q", raw[16:24])[0],
        global_dim=dims[:rank],
        global_strides=strides[: rank - 1],
        box_dim=box[:rank],
        element_strides=es[:rank],
        interleave=raw[7],
        swizzle=raw[8],
        swizzle_atomicity=raw[9],
        fill=raw[10],
        l2_promotion=raw[11],
    )
    _validate(tm)
    return tm


def blank() -> bytes:
    """The header of a map whose fields are all zero: what tensormap.replace starts from on 128 zero bytes."""
    out = bytearray(SIZE)
    out[0:5] = MAGIC + bytes([VERSION])
    return bytes(out)


def _enum(value, table: dict, what: str, extra: dict | None = None) -> int:
    """A CUDA enum given as its integer or its name (with or without CUDA's prefix, any case)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        name = value.upper()
        if name.startswith(_PREFIX[what]):
            name = name[len(_PREFIX[what]) :]
        if name in table:
            return table[name]
        if extra and name in extra:
            return extra[name]
        raise ValueError(f"{what}: unknown name {value!r} (one of {', '.join(sorted(table))})")
    raise ValueError(f"{what}: a CUDA enum value (int) or its name expected, got {value!r}")


def _ints(value, what: str, n: int) -> tuple:
    try:
        out = tuple(int(v) for v in value)
    except TypeError:
        raise ValueError(f"{what}: a sequence of {n} integers expected, got {value!r}") from None
    if len(out) != n:
        raise ValueError(f"{what}: {n} entries expected, got {len(out)}")
    return out


def tensor_map_tiled(
    array,
    *,
    data_type,
    global_dim,
    global_strides,
    box_dim,
    element_strides=None,
    interleave=0,
    swizzle=0,
    l2_promotion=0,
    oob_fill=0,
) -> TensorMap:
    """cuTensorMapEncodeTiled for the simulator: a tiled map of ``array`` (a numpy array; its device address is
    flashsim.ptx.address(array)). Dims innermost first; ``global_strides`` in bytes, rank - 1 of them; ``box_dim``
    and ``element_strides`` (default all 1) rank of them; enums as CUDA's integers or names ("FLOAT16",
    "CU_TENSOR_MAP_SWIZZLE_128B", ...). ValueError naming the argument and the rule for anything the driver
    refuses, and for a region outside ``array``."""
    if not isinstance(array, np.ndarray):
        raise ValueError(f"array: a numpy array expected, got {type(array).__name__}")
    cuda_types = {name: c for name, (c, _p) in DATA_TYPES.items()}
    dt = _enum(data_type, cuda_types, "data_type")
    to_ptx = {c: p for c, p in DATA_TYPES.values()}
    if dt not in to_ptx:
        raise ValueError(f"data_type {dt}: not a CUtensorMapDataType")
    try:
        rank = len(global_dim)
    except TypeError:
        raise ValueError(f"global_dim: a sequence of 1..5 sizes expected, got {global_dim!r}") from None
    if not 1 <= rank <= 5:
        raise ValueError(f"global_dim: tensorRank {rank} must be 1..5")
    dims = _ints(global_dim, "global_dim", rank)
    strides = _ints(global_strides, "global_strides", rank - 1)
    box = _ints(box_dim, "box_dim", rank)
    es = (1,) * rank if element_strides is None else _ints(element_strides, "element_strides", rank)
    sw = _enum(swizzle, _SWIZZLE, "swizzle", _SWIZZLE_SM100)
    if sw in _SWIZZLE_SM100.values():
        raise ValueError(f"swizzle {sw}: the 128B_ATOM swizzles are sm_100's (sm_90 has NONE, 32B, 64B, 128B)")
    tm = TensorMap(
        rank=rank,
        elemtype=to_ptx[dt],
        global_address=address(array),
        global_dim=dims,
        global_strides=strides,
        box_dim=box,
        element_strides=es,
        interleave=_enum(interleave, _INTERLEAVE, "interleave"),
        swizzle=sw,
        fill=_enum(oob_fill, _OOB, "oob_fill"),
        l2_promotion=_enum(l2_promotion, _L2, "l2_promotion"),
    )
    _validate(tm)
    # the region must lie in the array's buffer: its last element's byte is the sum of (dim - 1) * stride
    root = _root(array)
    start, end = address(root), address(root) + root.nbytes
    tb = tm.bytewise()
    last = tb.global_address + (tb.global_dim[0] - 1) * tb.global_element_size
    last += sum((d - 1) * s for d, s in zip(dims[1:], strides))
    if not (start <= tm.global_address and last + tb.global_element_size <= end):
        ends = last + tb.global_element_size - tm.global_address
        raise ValueError(
            f"global_dim / global_strides: the region ends {ends} bytes after "
            f"the array's start, past the {end - tm.global_address} bytes of its buffer from there"
        )
    return tm


def _validate(tm: TensorMap) -> None:
    if tm.elemtype in PACKED_4BIT and not tm.grouped:
        # cuda.h: globalDim[0] a multiple of 2; the box whole bytes too (the byte map's rules below check the rest)
        for name, n in (("global_dim[0]", tm.global_dim[0]), ("box_dim[0]", tm.box_dim[0])):
            if n % 2:
                raise ValueError(f"{name} = {n}: a packed 4-bit map (16U4_ALIGN8B) counts whole bytes of 2 elements")
        tm = tm.bytewise()
    elif tm.elemtype in PADDED_GROUPS and not tm.grouped:
        # cuda.h (CUDA 13): a 32-byte aligned address, globalDim[0] a multiple of 128, strides multiples of 32,
        # boxDim[0] 128, no interleave, loads with SWIZZLE_NONE or _128B (or the sm_100 128B_ATOM_32B, refused here)
        name = _PTX_NAME[tm.elemtype]
        rules = (
            (tm.global_address % 32 == 0, f"global address {tm.global_address:#x}: must be 32-byte aligned"),
            (tm.global_dim[0] % 128 == 0, f"global_dim[0] = {tm.global_dim[0]}: must be a multiple of 128"),
            (all(st % 32 == 0 for st in tm.global_strides), f"global_strides {tm.global_strides}: multiples of 32"),
            (tm.box_dim[0] == 128, f"box_dim[0] = {tm.box_dim[0]}: must be 128"),
            (tm.interleave == 0, "interleave: must be NONE"),
            (tm.swizzle in (0, 3), f"swizzle {tm.swizzle}: must be NONE or 128B"),
        )
        for ok, why in rules:
            if not ok:
                raise ValueError(f"a padded {name} map (16U{4 if tm.elemtype == 14 else 6}_ALIGN16B): {why}")
        tm = tm.bytewise()
    rank = tm.rank
    if tm.elemtype not in _PTX_SIZE and not tm.grouped:
        raise ValueError(f"data_type (PTX .elemtype {tm.elemtype}): not a PTX .elemtype code")
    if tm.interleave not in (0, 1, 2):
        raise ValueError(f"interleave {tm.interleave}: must be NONE (0), 16B (1) or 32B (2)")
    if tm.swizzle not in (0, 1, 2, 3):
        raise ValueError(f"swizzle {tm.swizzle}: must be NONE (0), 32B (1), 64B (2) or 128B (3) on sm_90")
    if tm.swizzle_atomicity != 0:
        raise ValueError(f"swizzle atomicity {tm.swizzle_atomicity}: only 16B (0) on sm_90 (the others are sm_100's)")
    if tm.l2_promotion not in (0, 1, 2, 3):
        raise ValueError(f"l2_promotion {tm.l2_promotion}: must be 0..3")
    if tm.fill not in (0, 1):
        raise ValueError(f"oob_fill {tm.fill}: must be NONE (0) or NAN_REQUEST_ZERO_FMA (1)")
    if tm.fill == 1 and tm.elemtype not in FLOATING:
        raise ValueError(f"oob_fill NAN_REQUEST_ZERO_FMA: only for floating-point data types, not {tm.type_name}")
    if tm.interleave and rank < 3:
        raise ValueError(f"global_dim: tensorRank {rank} must be >= 3 with an interleave")
    # cuda.h says an INTERLEAVE_32B map must use SWIZZLE_32B, but the driver (580.159) encodes one with SWIZZLE_NONE
    # too (tests/data/ptx_tma/tma_driver_maps_sm90.json, "rules"): the encoding follows the driver; a copy through an
    # interleaved map is refused at the instruction anyway
    align = 32 if tm.interleave == 2 else 16
    if tm.global_address % align:
        raise ValueError(f"global address {tm.global_address:#x}: must be {align}-byte aligned")
    for i, d in enumerate(tm.global_dim):
        if not 1 <= d <= 1 << 32:
            raise ValueError(f"global_dim[{i}] = {d}: must be 1..2^32")
    for i, s in enumerate(tm.global_strides):
        # 0 is a multiple of 16 and the driver takes it: CUTLASS 3's host code encodes a batch mode of extent 1
        # with stride 0 in every sm90 GEMM's A / B / C / D maps
        if s % align or not 0 <= s < 1 << 40:
            raise ValueError(f"global_strides[{i}] = {s}: must be a multiple of {align} below 2^40")
    for i, b in enumerate(tm.box_dim):
        if not 1 <= b <= 256:
            raise ValueError(f"box_dim[{i}] = {b}: must be 1..256")
    for i, e in enumerate(tm.element_strides):
        if not 1 <= e <= 8:
            raise ValueError(f"element_strides[{i}] = {e}: must be 1..8")
    inner = tm.box_dim[0] * tm.element_size
    if tm.interleave == 0 and inner % 16:
        raise ValueError(f"box_dim[0] = {tm.box_dim[0]}: the inner box ({inner} bytes) must be a multiple of 16 bytes")
    span = swz.span_bytes(tm.swizzle_mode)
    if tm.interleave == 0 and span and inner > span:
        raise ValueError(
            f"box_dim[0] = {tm.box_dim[0]}: the inner box ({inner} bytes) must be at most the swizzle span "
            f"({span} bytes for SWIZZLE_{tm.swizzle_mode})"
        )


# tensormap.replace's fields: name -> (byte offset, struct format, entries: 1, or how many ordinals)
FIELDS = {
    ".global_address": (16, "<Q", 1),
    ".rank": (5, "<B", 1),
    ".box_dim": (96, "<H", 5),
    ".global_dim": (24, "<Q", 5),
    ".global_stride": (64, "<Q", 4),
    ".element_stride": (106, "<B", 5),
    ".elemtype": (6, "<B", 1),
    ".interleave_layout": (7, "<B", 1),
    ".swizzle_mode": (8, "<B", 1),
    ".swizzle_atomicity": (9, "<B", 1),
    ".fill_mode": (10, "<B", 1),
}
_FIELD3_LIMIT = {".elemtype": 15, ".interleave_layout": 2, ".swizzle_mode": 4, ".swizzle_atomicity": 3}
_FIELD3_LIMIT[".fill_mode"] = 1


def replace_field(raw, field: str, ordinal: int | None, value: int) -> bytes:
    """The 128 bytes ``raw`` with ``field`` (ordinal ``ordinal`` of the per-dimension fields) set to ``value``, as
    tensormap.replace does (PTX ISA: .rank takes rank - 1, the enum fields PTX's codes). 128 zero bytes are a map
    whose fields are all zero (Triton's device-side descriptors start from them); anything else without the magic
    is refused (ValueError)."""
    raw = bytes(raw)
    if raw[:4] != MAGIC:
        if any(raw):
            raise ValueError("tensormap.replace on 128 bytes that are neither a flashsim tensor map nor zero")
        raw = blank()
    offset, fmt, entries = FIELDS[field]
    k = 0 if ordinal is None else int(ordinal)
    if not 0 <= k < entries:
        raise ValueError(f"tensormap.replace{field}: ordinal {k} outside 0..{entries - 1}")
    width = struct.calcsize(fmt)
    if field in _FIELD3_LIMIT and not 0 <= value <= _FIELD3_LIMIT[field]:
        raise ValueError(f"tensormap.replace{field}: value {value} is not one of the ISA's codes")
    if field == ".rank" and not 0 <= value <= 4:
        raise ValueError(f"tensormap.replace.rank: value {value} outside 0..4 (rank - 1)")
    if not 0 <= value < 1 << (8 * width):
        raise ValueError(f"tensormap.replace{field}: value {value} does not fit the field")
    out = bytearray(raw)
    out[offset + k * width : offset + (k + 1) * width] = struct.pack(fmt, value)
    return bytes(out)
