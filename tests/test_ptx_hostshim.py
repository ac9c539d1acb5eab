"""flashsim.ptx.hostshim: the C shim, built as a shared library and called through ctypes with
cuTensorMapEncodeTiled's argument types, logs each call and tags the map; patch_params puts tensor_map_tiled's map
of the logged arguments where the tags are, and refuses what it cannot place."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

import flashsim.ptx as fptx
from flashsim.ptx import hostshim

CC = shutil.which("cc") or shutil.which("gcc")
u64, u32 = ctypes.c_uint64, ctypes.c_uint32


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    if CC is None:
        pytest.skip("needs a C compiler (cc) to build the shim")
    lib = tmp_path_factory.mktemp("shim") / "libshim.so"
    subprocess.run([CC, "-shared", "-fPIC", "-O1", str(hostshim.SHIM_SOURCE), "-o", str(lib), "-ldl"], check=True)
    fn = ctypes.CDLL(str(lib)).cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, u32, ctypes.c_void_p] + [ctypes.c_void_p] * 4 + [ctypes.c_int] * 4
    return fn


def _encode(shim, array, rank, dims, strides, box, swizzle=3):
    """One call as CUTLASS makes it (FLOAT16 = 6, L2 128B = 2); the 128-byte map it wrote."""
    out = (ctypes.c_ubyte * 128)(*([0xAA] * 128))
    d, s = (u64 * rank)(*dims), (u64 * max(rank - 1, 1))(*strides)
    b, e = (u32 * rank)(*box), (u32 * rank)(*([1] * rank))
    rc = shim(out, 6, rank, fptx.address(array), d, s, b, e, 0, swizzle, 2, 0)
    return rc, bytes(out)


def test_shim_logs_each_call_and_tags_the_map(shim, tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("FLASHSIM_TENSORMAP_LOG", str(log))
    monkeypatch.delenv("FLASHSIM_TENSORMAP_MODE", raising=False)
    a = np.zeros((64, 128), np.float16)
    rc, raw = _encode(shim, a, 3, (128, 64, 1), (256, 0), (64, 32, 1))
    assert rc == 0 and raw[:8] == hostshim.TAG and raw[12:] == bytes(116)
    rc2, raw2 = _encode(shim, a[8:], 2, (128, 56), (256,), (64, 8), swizzle=0)
    assert rc2 == 0 and int.from_bytes(raw2[8:12], "little") == int.from_bytes(raw[8:12], "little") + 1
    first, second = hostshim.read_log(log)
    assert first["global_address"] == fptx.address(a) and second["global_address"] == fptx.address(a[8:])
    assert (first["global_dim"], first["global_strides"], first["box_dim"]) == ([128, 64, 1], [256, 0], [64, 32, 1])
    assert (second["rank"], second["swizzle"], second["l2_promotion"], second["data_type"]) == (2, 0, 2, 6)


def test_shim_refuses_bad_rank_and_unknown_mode(shim, tmp_path, monkeypatch):
    monkeypatch.delenv("FLASHSIM_TENSORMAP_LOG", raising=False)
    a = np.zeros(64, np.float16)
    assert _encode(shim, a, 6, (1,) * 6, (16,) * 5, (1,) * 6)[0] != 0
    monkeypatch.setenv("FLASHSIM_TENSORMAP_MODE", "bogus")
    assert _encode(shim, a, 1, (64,), (), (64,))[0] != 0


def _record(index, array, **kw):
    r = dict(index=index, data_type=6, rank=2, global_address=fptx.address(array), global_dim=[128, 64])
    r.update(global_strides=[256], box_dim=[64, 32], element_strides=[1, 1], interleave=0, swizzle=3)
    r.update(l2_promotion=2, oob_fill=0)
    return r | kw


def test_patch_params_places_tensor_map_tiled_maps_at_the_tags():
    a, b = np.zeros((64, 128), np.float16), np.zeros((32, 128), np.float16)
    records = [_record(0, a), _record(1, b[16:], global_dim=[128, 16], box_dim=[64, 16])]
    params = bytearray(b"\x11" * 64 + bytes(128) * 2 + b"\x22" * 8)
    for slot, index in ((64, 1), (192, 0)):
        params[slot : slot + 12] = hostshim.TAG + index.to_bytes(4, "little")
    out = hostshim.patch_params(bytes(params), records, [a, b])
    want_b = fptx.tensor_map_tiled(
        b[16:], data_type=6, global_dim=(128, 16), global_strides=(256,), box_dim=(64, 16), swizzle=3, l2_promotion=2
    )
    want_a = fptx.tensor_map_tiled(
        a, data_type=6, global_dim=(128, 64), global_strides=(256,), box_dim=(64, 32), swizzle=3, l2_promotion=2
    )
    assert out[64:192] == want_b.bytes and out[192:320] == want_a.bytes
    assert out[:64] == params[:64] and out[320:] == params[320:]
    # a list of parameters (a kernel taking its maps as separate arguments): each patched, untagged ones kept
    listed = hostshim.patch_params([b"\x33" * 12, bytes(params[192:320]), bytes(params[64:192])], records, [a, b])
    assert listed == [b"\x33" * 12, want_a.bytes, want_b.bytes]


def test_patch_params_refuses_what_it_cannot_place():
    a = np.zeros((64, 128), np.float16)
    tagged = hostshim.TAG + (3).to_bytes(4, "little") + bytes(116)
    with pytest.raises(ValueError, match="call 3, but the log has 1"):
        hostshim.patch_params(tagged, [_record(0, a)], [a])
    with pytest.raises(ValueError, match="no tagged tensor map"):
        hostshim.patch_params(bytes(256), [_record(0, a)], [a])
    with pytest.raises(ValueError, match="no tagged tensor map"):
        hostshim.patch_params([bytes(256), bytes(8)], [_record(0, a)], [a])
    other = np.zeros(16, np.float16)
    with pytest.raises(ValueError, match="lies in none of the given arrays"):
        hostshim.patch_params(hostshim.TAG + bytes(120), [_record(0, a)], [other])
    with pytest.raises(ValueError, match=r"call 0: box_dim\[1\] = 300"):
        hostshim.patch_params(hostshim.TAG + bytes(120), [_record(0, a, box_dim=[64, 300])], [a])


def test_read_log_wants_one_run(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"index": 0}\n{"index": 0}\n')
    with pytest.raises(ValueError, match="line 2 is call 0, not 1"):
        hostshim.read_log(log)
