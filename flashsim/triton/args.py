"""A Triton launch's arguments, as Triton's JIT and launcher treat them, turned into flashsim.ptx launch arguments.

Buffers: a numpy array, or a CPU torch tensor (seen through a numpy view of its storage, so the kernel writes into it
in place), becomes a ``Pointer``: what Triton's specializer reads (``data_ptr()``, the simulated device address, which
decides the divisibility-16 hint exactly as a CUDA pointer does; ``dtype``, a triton.language dtype) and what
flashsim.ptx launches (the numpy view at that address). Scalars stay Python values (numpy scalars become the Python
value of the same number, which Triton itself would refuse), so that Triton's own specializer gives them the type and
the hints it gives on a GPU: ints equal to 1 become constants, others ``i32`` / ``i64`` / ``u64`` with a
divisibility-16 hint where they are multiples of 16, floats ``fp32``, bools ``u1``.

After specialization, every value of the expanded signature (Triton's ``expand_signature``: a host TensorDescriptor
becomes its base pointer, shape, strides and flags where the target has no TMA, or a 128-byte tensor map followed by
its shape and strides where it has) is encoded as Triton's C launcher encodes it (driver.c: integers truncated to
their C type, fp16 rounded to nearest even, bf16 by dropping the low 16 bits of the float32, fp32 rounded from the
double), each named by its parameter for errors.
"""

from __future__ import annotations

import numpy as np

from ..ptx.memory import address
from .support import TritonArgumentError

__all__ = ["Pointer", "to_pointer", "convert", "encode", "tensor_descriptor", "NUMPY_TO_TRITON"]

# numpy dtype names (ml_dtypes' included) and torch dtype names -> triton.language dtype names
NUMPY_TO_TRITON = {
    "float16": "fp16",
    "float32": "fp32",
    "float64": "fp64",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
    "uint64": "uint64",
    "bool": "int1",
}


class Pointer:
    """A buffer argument: ``array`` (a numpy view of its bytes from its first element on, what flashsim.ptx passes
    by address), ``dtype`` (a triton.language dtype), ``source`` (what the user passed)."""

    __slots__ = ("array", "dtype", "source", "_address")

    def __init__(self, array: np.ndarray, dtype, source):
        self.array, self.dtype, self.source = array, dtype, source
        self._address = address(array)

    def data_ptr(self) -> int:
        return self._address

    def __repr__(self) -> str:
        return f"Pointer({self.dtype}, {self._address:#x})"


def _tl_dtype(name: str, where: str):
    import triton.language as tl

    tname = NUMPY_TO_TRITON.get(name)
    if tname is None:
        raise TritonArgumentError(
            f"{where}: element type {name} has no Triton equivalent (known: {', '.join(NUMPY_TO_TRITON)})"
        )
    dt = tl.dtype(tname)
    dt.is_floating_point = dt.is_floating()  # what TensorDescriptor asks of a base's dtype (torch's spelling)
    return dt


def _is_torch_tensor(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "untyped_storage")


def to_pointer(x, where: str, roots: dict) -> Pointer:
    """``x`` (numpy array or CPU torch tensor) as a Pointer; ``roots`` keeps one numpy view per torch storage within
    a launch, so that two tensors on one storage are one buffer, as on the GPU."""
    if isinstance(x, np.ndarray):
        if x.dtype.names is not None:
            raise TritonArgumentError(f"{where}: a structured array has no Triton element type")
        flat = x if x.ndim else x.reshape(1)
        return Pointer(flat, _tl_dtype(x.dtype.name, where), x)
    if _is_torch_tensor(x):
        import torch

        if x.device.type != "cpu":
            raise TritonArgumentError(
                f"{where}: a torch tensor on {x.device}; flashsim.triton runs on the CPU: pass it as a CPU tensor "
                "(tensor.cpu()) or a numpy array"
            )
        storage = x.untyped_storage()
        key = storage.data_ptr()
        raw = roots.get(key)
        if raw is None:
            whole = torch.empty(0, dtype=torch.uint8).set_(storage)
            raw = roots[key] = whole.numpy()
        offset = x.storage_offset() * x.element_size()
        view = raw[offset:] if offset < raw.size else raw[raw.size :]
        if view.size == 0:
            view = raw[-1:] if raw.size else np.zeros(1, np.uint8)
        return Pointer(view, _tl_dtype(str(x.dtype).removeprefix("torch."), where), x)
    raise TypeError


def _descriptor(desc, where: str, roots: dict):
    """A TensorDescriptor whose base is a Pointer (Triton's specializer and launcher read its base's data_ptr)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    base = desc.base if isinstance(desc.base, Pointer) else to_pointer(desc.base, f"{where} (its base)", roots)
    try:
        return TensorDescriptor(
            base,
            [int(s) for s in desc.shape],
            [int(s) for s in desc.strides],
            [int(b) for b in desc.block_shape],
            desc.padding,
            desc.round_f32_to_tf32,
        )
    except AssertionError as exc:
        raise TritonArgumentError(f"{where}: not a valid TensorDescriptor: {exc}") from None


def tensor_descriptor(array, block_shape, padding: str = "zero", round_f32_to_tf32: bool = False):
    """A host ``triton.tools.tensor_descriptor.TensorDescriptor`` over a numpy array or CPU torch tensor (Triton's
    ``TensorDescriptor.from_tensor``, which needs a ``data_ptr()`` a numpy array lacks): shape and strides (in
    elements) of ``array``, ``block_shape`` the block one load / store moves."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    where = "tensor_descriptor"
    base = to_pointer(array, where, {}) if isinstance(array, np.ndarray) or _is_torch_tensor(array) else None
    if base is None:
        raise TritonArgumentError(f"{where}: a numpy array or a CPU torch tensor expected, got {type(array).__name__}")
    if isinstance(array, np.ndarray):
        shape, strides = array.shape, [s // array.itemsize for s in array.strides]
        if any(s % array.itemsize for s in array.strides):
            raise TritonArgumentError(f"{where}: strides {array.strides} are not whole elements")
    else:
        shape, strides = tuple(array.shape), list(array.stride())
    try:
        return TensorDescriptor(
            base, [int(x) for x in shape], [int(x) for x in strides], list(block_shape), padding, round_f32_to_tf32
        )
    except AssertionError as exc:
        raise TritonArgumentError(f"{where}: not a valid TensorDescriptor: {exc}") from None


def convert(value, where: str, roots: dict):
    """One argument as Triton's specializer should see it (module docstring); TritonArgumentError naming ``where``
    for values Triton cannot pass."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        raise TritonArgumentError(f"{where}: {value} does not fit 64 bits (Triton passes an int as i32, i64 or u64)")
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        if value.dtype.kind in "biuf":
            return convert(value.item(), where, roots)
        raise TritonArgumentError(f"{where}: a numpy scalar of type {value.dtype} has no Triton parameter type")
    if isinstance(value, tuple):
        return tuple(convert(v, f"{where}[{i}]", roots) for i, v in enumerate(value))
    if isinstance(value, Pointer):
        return value
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except ImportError:  # pragma: no cover - import_triton ran first
        TensorDescriptor = ()
    if isinstance(value, TensorDescriptor):
        return _descriptor(value, where, roots)
    try:
        return to_pointer(value, where, roots)
    except TypeError:
        pass
    if type(value).__name__ in ("JITFunction", "dtype", "constexpr"):  # constexpr-only values Triton accepts
        return value
    raise TritonArgumentError(
        f"{where}: {type(value).__name__} is not an argument Triton can pass (numpy arrays, CPU torch tensors, "
        "TensorDescriptors, Python ints / floats / bools, tuples of them)"
    )


_INTS = {
    "i1": np.int8,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u1": np.uint8,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
}


def encode(ty: str, value, where: str):
    """The launch argument for one expanded-signature entry of Triton type ``ty`` (driver.c's extract* rules)."""
    if ty.startswith("*"):
        if isinstance(value, Pointer):
            return value.array
        if value is None or (isinstance(value, int) and value == 0):
            return np.uint64(0)
        raise TritonArgumentError(f"{where}: expects a buffer ({ty}), got {type(value).__name__}")
    if ty == "nvTmaDesc":
        return value
    if ty in _INTS:
        if not isinstance(value, (bool, int, np.integer)):
            raise TritonArgumentError(f"{where}: expects an integer ({ty}), got {type(value).__name__}")
        dt = _INTS[ty]
        info = np.iinfo(dt)
        v = int(value)
        if not info.min <= v <= info.max:
            raise TritonArgumentError(f"{where}: {v} does not fit the kernel's {ty} parameter")
        return dt(v)
    if ty in ("fp16", "bf16", "fp32", "f32", "fp64"):
        if not isinstance(value, (bool, int, float, np.integer, np.floating)):
            raise TritonArgumentError(f"{where}: expects a float ({ty}), got {type(value).__name__}")
        v = float(value)
        if ty == "fp16":
            return np.float16(v)
        if ty == "bf16":  # driver.c: the float32's upper half (truncation, not rounding)
            return np.uint16(np.array(np.float32(v)).view(np.uint32) >> np.uint32(16))
        if ty == "fp64":
            return np.float64(v)
        with np.errstate(over="ignore"):  # a C cast: out of range becomes inf
            return np.float32(v)
    raise TritonArgumentError(f"{where}: Triton parameter type {ty!r} is not supported by flashsim.triton")
