"""Kernel launches from a prebuilt parameter array: cuLaunchKernelEx through cuda.bindings, for a launch a front-end
repeats with the same kernel, grid and scalars and only new addresses (the serving calls' decode loop).

cuda.core's ``launch`` packs every argument anew and builds the driver's launch configuration on each call: about
5 us of host time per launch of flash_fwd's 39 arguments on an H100 host (benchmarks/experiments/serving_host_time).
A ``PackedLaunch`` does that once: each argument has an 8-byte slot (every parameter of these kernels is at most 8
bytes: the driver reads the parameter's own size from the slot's start, little-endian), the array of the slots'
addresses the driver takes as ``kernelParams`` is built once, the scalars are written once, and a call writes only
the addresses that change (``set``) before ``driver_launch``. The driver copies the parameters when the launch is
enqueued (and a CUDA graph capture records them by value), so the slots may be rewritten as soon as it returns;
callers that share a PackedLaunch between threads hold a lock from the writes to the launch.
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
        self._native = None  # (driver CUlaunchConfig, function handle): built at the first real launch

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

    def native(self):
        """(the driver's CUlaunchConfig for ``config``, the kernel's handle as a CUfunction), built once (the driver
        takes a library's CUkernel where a CUfunction goes, as cuda.core's launch passes it)."""
        if self._native is None:
            from cuda.bindings import driver

            self._native = (native_config(self.config), driver.CUfunction(int(self.kernel.handle)))
        return self._native


def native_config(config):
    """cuda.bindings' CUlaunchConfig for a cuda.core LaunchConfig without clusters (grid, block, dynamic shared
    memory and, when set, the programmatic stream serialization attribute); hStream is set per launch."""
    from cuda.bindings import driver

    if getattr(config, "cluster", None) is not None:
        raise ValueError("a packed launch takes no thread-block clusters")
    c = driver.CUlaunchConfig()
    c.gridDimX, c.gridDimY, c.gridDimZ = (int(x) for x in config.grid)
    c.blockDimX, c.blockDimY, c.blockDimZ = (int(x) for x in config.block)
    c.sharedMemBytes = int(config.shmem_size or 0)
    attrs = []
    if getattr(config, "programmatic_stream_serialization", False):
        attr = driver.CUlaunchAttribute()
        attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        attrs.append(attr)
    c.attrs = attrs
    c.numAttrs = len(attrs)
    return c


_DRIVER: list = []  # cuda.bindings.driver, imported at the first launch (an import statement per launch costs)


def driver_launch(p: PackedLaunch, stream: int) -> None:
    """Enqueue ``p`` on the raw CUstream handle ``stream`` (cuLaunchKernelEx); GPUError naming the kernel on failure
    (sticky errors recorded by flashsim.gpu.runtime)."""
    if not _DRIVER:
        from cuda.bindings import driver

        _DRIVER.append(driver)
    driver = _DRIVER[0]
    config, function = p._native if p._native is not None else p.native()
    config.hStream = stream
    (err,) = driver.cuLaunchKernelEx(config, function, p.params_addr, 0)
    if err:  # CUresult is an int: CUDA_SUCCESS is 0
        rt._driver(f"launching {p.what}", (err,))
