"""Export memory as a DLPack capsule (legacy "dltensor"), with ctypes only.

cuda.core 1.2.0 has no producer for an arbitrary (pointer, shape, dtype), so DeviceArray builds the
DLManagedTensor itself: torch.from_dlpack / cupy.from_dlpack / numpy.from_dlpack take it zero-copy. The
owner object (the allocation) is kept alive until the consumer calls the deleter, or until the capsule
is dropped unconsumed. The same code exports host memory (device type CPU), which is how it is tested
without a GPU.
"""

from __future__ import annotations

import ctypes

import numpy as np

KDL_CPU, KDL_CUDA, KDL_CUDA_MANAGED = 1, 2, 13
_INT, _UINT, _FLOAT, _BFLOAT, _BOOL = 0, 1, 2, 4, 6


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

_CAPSULE_NAME = b"dltensor"
_USED_NAME = b"used_dltensor"
_py = ctypes.pythonapi
_py.PyCapsule_New.restype = ctypes.py_object
_py.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_py.PyCapsule_IsValid.restype = ctypes.c_int
_py.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_py.PyCapsule_GetPointer.restype = ctypes.c_void_p
_py.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

# address of a live DLManagedTensor -> (the struct, shape array, owner): keeps everything alive until deleted
_LIVE: dict[int, tuple] = {}


def _delete(managed_ptr) -> None:
    try:
        _LIVE.pop(ctypes.cast(managed_ptr, ctypes.c_void_p).value, None)
    except Exception:  # never raise into C (interpreter shutdown)
        pass


_DELETER_FN = _DELETER(_delete)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule) -> None:
    """Capsule dropped without a consumer (still named "dltensor"): free what it holds."""
    try:
        if _py.PyCapsule_IsValid(capsule, _CAPSULE_NAME):
            _delete(ctypes.c_void_p(_py.PyCapsule_GetPointer(capsule, _CAPSULE_NAME)))
    except Exception:
        pass


def dtype_code(dtype: np.dtype) -> tuple[int, int]:
    """(DLPack type code, bits) of a numpy dtype; ValueError for types DLPack cannot describe."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        return _BFLOAT, 16
    kind = {"i": _INT, "u": _UINT, "f": _FLOAT, "b": _BOOL}.get(dtype.kind)
    if kind is None:
        raise ValueError(f"dtype {dtype} has no DLPack equivalent (expected int, uint, float, bfloat16 or bool)")
    return kind, dtype.itemsize * 8


def make_capsule(ptr: int, shape: tuple[int, ...], dtype, device: tuple[int, int], owner) -> object:
    """A "dltensor" capsule viewing C-contiguous memory at ``ptr``; ``owner`` lives as long as the view."""
    code, bits = dtype_code(dtype)
    ndim = len(shape)
    shape_arr = (ctypes.c_int64 * max(ndim, 1))(*shape)
    managed = _DLManagedTensor()
    t = managed.dl_tensor
    t.data = ctypes.c_void_p(int(ptr))
    t.device = _DLDevice(int(device[0]), int(device[1]))
    t.ndim = ndim
    t.dtype = _DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    t.strides = ctypes.POINTER(ctypes.c_int64)()  # NULL: compact row-major
    t.byte_offset = 0
    managed.manager_ctx = None
    managed.deleter = _DELETER_FN
    address = ctypes.addressof(managed)
    _LIVE[address] = (managed, shape_arr, owner)
    return _py.PyCapsule_New(address, _CAPSULE_NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def live_count() -> int:
    """How many exported views are still alive (tests: the deleter must run)."""
    return len(_LIVE)
