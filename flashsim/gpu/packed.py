"""Kernel launches from a prebuilt parameter array: one cuLaunchKernelEx per launch, for a launch a front-end repeats
with the same kernel, grid and scalars and only new addresses (the serving calls' decode loop).

cuda.core's ``launch`` packs every argument anew and builds the driver's launch configuration on each call: about
5 us of host time per launch of flash_fwd's 39 arguments on an H100 host (benchmarks/experiments/serving_host_time).
A ``PackedLaunch`` does that once: each argument has an 8-byte slot (every parameter of these kernels is at most 8
bytes: the driver reads the parameter's own size from the slot's start, little-endian), the array of the slots'
addresses the driver takes as ``kernelParams`` is built once, the scalars are written once, and a call writes only
the addresses that change (``set``) before ``driver_launch``. The driver copies the parameters when the launch is
enqueued (and a CUDA graph capture records them by value), so the slots may be rewritten as soon as it returns;
callers that share a PackedLaunch between threads hold a lock from the writes to the launch.

The driver call itself: libcuda's ``cuLaunchKernelEx`` through ctypes, with the driver's ``CUlaunchConfig`` (and its
``CUlaunchAttribute`` array) built once per launch as C structures laid out as CUDA 13.0's cuda.h declares them
(``LaunchConfig``, ``LaunchAttribute``): a call sets the stream field and passes four integers. That is the same
entry point cuda.bindings' ``cuLaunchKernelEx`` resolves (the default, legacy-default-stream one), without its
per-call argument objects and result enum (benchmarks/experiments/serving_host_time). Where ctypes cannot open
libcuda.so.1 (another platform, a driver library under another name) the launch goes through cuda.bindings instead,
with the same configuration.
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import runtime as rt

SLOT = 8  # bytes per parameter slot


class PackedLaunch:
    """One kernel's launch with its parameters in preallocated slots: ``kernel`` (runtime.Kernel's cuda.core
    Kernel), ``config`` (the cuda.core LaunchConfig it mirrors: grid, block, dynamic shared memory, programmatic
    stream serialization), ``types`` the numpy dtype of each parameter (numpy scalars keep theirs, Python ints are
    u64 addresses), ``what`` the kernel's description for errors."""

    __slots__ = ("kernel", "config", "types", "what", "slots", "params", "params_addr", "_native")

    def __init__(self, kernel, config, args, what: str):
        self.kernel, self.config, self.what = kernel, config, what
        self.types = tuple(a.dtype if isinstance(a, np.generic) else np.dtype(np.uint64) for a in args)
        if any(t.itemsize > SLOT for t in self.types):
            raise ValueError(f"{what}: a parameter wider than {SLOT} bytes cannot be packed")
        n = max(len(self.types), 1)
        self.slots = (ctypes.c_uint64 * n)()
        raw = np.frombuffer(self.slots, np.uint8)
        for i, (a, t) in enumerate(zip(args, self.types)):
            raw[i * SLOT : i * SLOT + t.itemsize] = np.asarray(a, t).reshape(1).view(np.uint8)
        base = ctypes.addressof(self.slots)
        self.params = (ctypes.c_void_p * n)(*(base + SLOT * i for i in range(n)))
        self.params_addr = ctypes.addressof(self.params)
        self._native = None  # Native: built at the first real launch

    def with_config(self, config) -> PackedLaunch:
        """The same kernel and parameter slots under another LaunchConfig (one write of the addresses serves
        both)."""
        other = PackedLaunch.__new__(PackedLaunch)
        other.kernel, other.config, other.types, other.what = self.kernel, config, self.types, self.what
        other.slots, other.params, other.params_addr, other._native = self.slots, self.params, self.params_addr, None
        return other

    def values(self) -> tuple:
        """The parameters as numpy scalars of their types, read back from the slots (what the driver is given)."""
        raw = np.frombuffer(self.slots, np.uint8)
        return tuple(raw[i * SLOT : i * SLOT + t.itemsize].view(t)[0] for i, t in enumerate(self.types))

    def native(self) -> Native:
        """The driver call's prepared arguments (``Native``), built once."""
        if self._native is None:
            self._native = Native.of(self)
        return self._native


# -- the driver's launch configuration as C structures (CUDA 13.0 cuda.h) ----------------------------------------

CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6  # cuda.h: enum CUlaunchAttributeID_enum


class LaunchAttributeValue(ctypes.Union):
    """cuda.h's ``CUlaunchAttributeValue``: a union padded to 64 bytes (``char pad[64]``) whose largest-aligned member
    (CUaccessPolicyWindow's base pointer) makes it 8-byte aligned; the one member used here is
    ``programmaticStreamSerializationAllowed`` (an int at its start)."""

    _fields_ = [
        ("pad", ctypes.c_char * 64),
        ("align", ctypes.c_void_p),
        ("programmaticStreamSerializationAllowed", ctypes.c_int),
    ]


class LaunchAttribute(ctypes.Structure):
    """cuda.h's ``CUlaunchAttribute``: ``CUlaunchAttributeID id`` (an enum: 4 bytes), ``char pad[8 - sizeof(id)]``,
    ``CUlaunchAttributeValue value``: 72 bytes."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", LaunchAttributeValue)]


class LaunchConfig(ctypes.Structure):
    """cuda.h's ``CUlaunchConfig``: grid and block dimensions and ``sharedMemBytes`` (seven unsigned ints), ``CUstream
    hStream``, ``CUlaunchAttribute *attrs``, ``unsigned int numAttrs``: 56 bytes on a 64-bit host."""

    _fields_ = [
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.POINTER(LaunchAttribute)),
        ("numAttrs", ctypes.c_uint),
    ]


def launch_fields(config) -> tuple:
    """(grid, block, dynamic shared memory bytes, attributes as (id, value) pairs) of a cuda.core LaunchConfig without
    clusters or cooperative launch: what both forms of the driver's configuration are built from."""
    if getattr(config, "cluster", None) is not None:
        raise ValueError("a packed launch takes no thread-block clusters")
    if getattr(config, "is_cooperative", False):
        raise ValueError("a packed launch takes no cooperative launch")
    attrs = []
    if getattr(config, "programmatic_stream_serialization", False):
        attrs.append((CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1))
    grid, block = tuple(int(x) for x in config.grid), tuple(int(x) for x in config.block)
    return grid, block, int(config.shmem_size or 0), tuple(attrs)


def c_config(config) -> tuple[LaunchConfig, object]:
    """(the C ``CUlaunchConfig`` of a cuda.core LaunchConfig, its attribute array: keep it alive with it); hStream
    is set per launch."""
    grid, block, smem, attrs = launch_fields(config)
    c = LaunchConfig(*grid, *block, smem)
    array = (LaunchAttribute * max(len(attrs), 1))()
    for slot, (ident, value) in zip(array, attrs):
        slot.id = ident
        slot.value.programmaticStreamSerializationAllowed = value
    c.attrs = ctypes.cast(array, ctypes.POINTER(LaunchAttribute)) if attrs else None
    c.numAttrs = len(attrs)
    return c, array


def native_config(config):
    """cuda.bindings' CUlaunchConfig for a cuda.core LaunchConfig (the fallback launch's); hStream set per launch."""
    from cuda.bindings import driver

    grid, block, smem, attrs = launch_fields(config)
    c = driver.CUlaunchConfig()
    c.gridDimX, c.gridDimY, c.gridDimZ = grid
    c.blockDimX, c.blockDimY, c.blockDimZ = block
    c.sharedMemBytes = smem
    out = []
    for ident, value in attrs:
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID(ident)
        attr.value.programmaticStreamSerializationAllowed = value
        out.append(attr)
    c.attrs = out
    c.numAttrs = len(out)
    return c


# -- the driver call --------------------------------------------------------------------------------------------


def _ctypes_launch():
    """libcuda's cuLaunchKernelEx as a ctypes function of four pointer-sized integers (config, function, kernel
    parameters, extra) returning the CUresult, or None where ctypes cannot open libcuda.so.1 (the library
    cuda.bindings loaded: dlopen gives the same one back). The exported name is the legacy-default-stream entry point,
    the one cuda.bindings resolves (CU_GET_PROC_ADDRESS_DEFAULT)."""
    try:
        fn = ctypes.CDLL("libcuda.so.1").cuLaunchKernelEx  # releases the GIL during the call, as cuda.bindings does
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_void_p,) * 4
    fn.restype = ctypes.c_int
    return fn


def _bindings_launch(config, function, params, extra):
    """The fallback: cuda.bindings' cuLaunchKernelEx (``config`` its CUlaunchConfig, ``function`` a CUfunction); the
    CUresult as an int."""
    from cuda.bindings import driver

    return int(driver.cuLaunchKernelEx(config, function, params, 0)[0])


_LAUNCHER: list = []  # [the ctypes function or None], chosen at the first launch


class Native:
    """What ``driver_launch`` passes the driver for one PackedLaunch: ``call`` (the ctypes cuLaunchKernelEx, or the
    cuda.bindings fallback), ``config`` (whose ``hStream`` a launch sets), ``config_arg`` and ``function`` (what
    ``call`` takes for them), ``keep`` (what must outlive the configuration: its attribute array)."""

    __slots__ = ("call", "config", "config_arg", "function", "keep")

    @classmethod
    def of(cls, p: PackedLaunch) -> Native:
        if not _LAUNCHER:
            _LAUNCHER.append(_ctypes_launch())
        n = cls()
        handle = int(p.kernel.handle)  # a library's CUkernel, taken where a CUfunction goes (as cuda.core passes it)
        if _LAUNCHER[0] is not None:
            n.call = _LAUNCHER[0]
            n.config, n.keep = c_config(p.config)
            n.config_arg, n.function = ctypes.addressof(n.config), handle
        else:
            from cuda.bindings import driver

            n.call, n.keep = _bindings_launch, None
            n.config = n.config_arg = native_config(p.config)
            n.function = driver.CUfunction(handle)
        return n


def driver_launch(p: PackedLaunch, stream: int) -> None:
    """Enqueue ``p`` on the raw CUstream handle ``stream`` (cuLaunchKernelEx); GPUError naming the kernel on failure
    (sticky errors recorded by flashsim.gpu.runtime)."""
    n = p._native
    if n is None:
        n = p.native()
    n.config.hStream = stream
    err = n.call(n.config_arg, n.function, p.params_addr, None)
    if err:  # CUDA_SUCCESS is 0
        _failed(p, err)


def _failed(p: PackedLaunch, err: int) -> None:
    """GPUError for a launch's CUresult ``err`` (runtime._driver: its name and message, sticky errors recorded); a
    code this cuda.bindings does not know is named by its number."""
    from cuda.bindings import driver

    try:
        err = driver.CUresult(err)
    except ValueError:
        pass
    rt._driver(f"launching {p.what}", (err,))
