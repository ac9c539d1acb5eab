"""Kernel parameters built by a project's own host code, with flashsim's tensor maps inside.

CUTLASS 3, FlashAttention-3 and DeepGEMM pass their TMA descriptors inside a by-value Params struct that their host
code fills, calling the driver's ``cuTensorMapEncodeTiled`` on the way. The driver's 128-byte encoding is opaque
(and there is no driver without a GPU), while flashsim.ptx reads maps in its own encoding (flashsim.ptx.tensormap).
So rather than restate a project's Params layout by hand, run its host code, with this module's C file in place of
the driver's function:

1. Link ``SHIM_SOURCE`` (tensormap_shim.c, plain C, no CUDA headers) into the host program; the program must call
   ``cuTensorMapEncodeTiled`` by name (CUTLASS: define CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL, a host-only switch
   that leaves the device code, so the PTX, unchanged) rather than through cudaGetDriverEntryPoint.
2. Run it with ``FLASHSIM_TENSORMAP_LOG=<file>`` and device pointers that are ``flashsim.ptx.address(array)``
   values, and have it write the kernel's parameter bytes (and its grid, block, cluster, shared memory). Each map
   it encodes is a tag (``TAG``, the call's index) and a JSON line of the call's arguments in the log.
3. ``patch_params(params, read_log(file), arrays)`` (one struct parameter's bytes, or a list of every parameter's)
   replaces each tagged map by ``flashsim.ptx.tensor_map_tiled``'s map of the same arguments, over the array holding
   the map's global address; the result goes to ``flashsim.ptx.launch`` as the kernel's parameter(s).

With ``FLASHSIM_TENSORMAP_MODE=forward`` the same program calls the driver's function (libcuda.so.1) after logging,
so one build runs on the GPU for real and says which maps it asked for. Why a shim and not a decoder of driver maps:
the driver's format is undocumented and may change between releases, while the arguments are CUDA's public API, and
``tensor_map_tiled`` checks them by the driver's rules (a map the driver would refuse is refused here too).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np

from ..memory import _root, address
from ..tensormap import SIZE, tensor_map_tiled

__all__ = ["SHIM_SOURCE", "TAG", "read_log", "tensor_map", "patch_params"]

SHIM_SOURCE = pathlib.Path(__file__).with_name("tensormap_shim.c")
TAG = b"FSHOSTTM"
_ALIGN = 64  # CUtensorMap is declared alignas(64): a struct member holding one starts at a multiple of 64


def read_log(path) -> list[dict]:
    """The calls the shim logged in ``path`` (one JSON object per line), in call order."""
    records = [json.loads(line) for line in pathlib.Path(path).read_text().splitlines() if line.strip()]
    for i, r in enumerate(records):
        if r.get("index") != i:
            raise ValueError(f"{path}: line {i + 1} is call {r.get('index')}, not {i}: one log per run expected")
    return records


def _holder(arrays, where: int, what: str) -> np.ndarray:
    """A byte view of the array (of ``arrays``) whose buffer holds device address ``where``, starting there."""
    for array in arrays:
        root = _root(array)
        base = address(root)
        if base <= where < base + root.nbytes:
            return root.reshape(-1).view(np.uint8)[where - base :]
    raise ValueError(f"{what}: global address {where:#x} lies in none of the given arrays")


def tensor_map(record: dict, arrays):
    """``tensor_map_tiled`` of one logged call, over the array of ``arrays`` that holds its global address."""
    what = f"cuTensorMapEncodeTiled call {record['index']}"
    try:
        return tensor_map_tiled(
            _holder(arrays, int(record["global_address"]), what),
            data_type=record["data_type"],
            global_dim=record["global_dim"],
            global_strides=record["global_strides"],
            box_dim=record["box_dim"],
            element_strides=record["element_strides"],
            interleave=record["interleave"],
            swizzle=record["swizzle"],
            l2_promotion=record["l2_promotion"],
            oob_fill=record["oob_fill"],
        )
    except ValueError as exc:
        raise ValueError(f"{what}: {exc}") from None


def _patch(raw: bytes, records: list[dict], arrays) -> tuple[bytes, int]:
    out = bytearray(raw)
    found = 0
    for offset in range(0, len(out) - SIZE + 1, _ALIGN):
        if out[offset : offset + len(TAG)] != TAG:
            continue
        index = int.from_bytes(out[offset + 8 : offset + 12], "little")
        if index >= len(records):
            raise ValueError(f"params offset {offset}: a map of call {index}, but the log has {len(records)} calls")
        out[offset : offset + SIZE] = tensor_map(records[index], arrays).bytes
        found += 1
    return bytes(out), found


def patch_params(params, records: list[dict], arrays):
    """``params`` (one parameter's bytes, or a list of them, one per kernel parameter) with every tagged map (at a
    64-byte multiple of its parameter) replaced by the simulator's map of its logged call; ValueError for a tag of a
    call the log lacks, and for params holding no tag at all (nothing to patch means the host code did not go
    through the shim)."""
    single = isinstance(params, (bytes, bytearray))
    done = [_patch(bytes(p), records, arrays) for p in ([params] if single else params)]
    if not sum(found for _raw, found in done):
        raise ValueError("params hold no tagged tensor map: was the host program linked with the shim?")
    return done[0][0] if single else [raw for raw, _found in done]
