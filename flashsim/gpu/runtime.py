"""Drive the GPU through cuda.core: pick the device, load cubins, move arrays, launch, time.

One device (ordinal 0 unless CUDA_VISIBLE_DEVICES says otherwise) and one stream of this module per process:
every copy, launch and timing goes on that stream unless a caller names another one (``as_stream``: a cuda.core
Stream, a raw handle, a torch or cupy stream), so launches are ordered without extra work. Every call is
checked; failures raise GPUError naming the call or kernel. After a sticky error (illegal address, trap, ...)
the CUDA context is unusable: the error says so and later calls refuse to run instead of failing obscurely.
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass, field

import numpy as np

from ..errors import GPUError, UnsupportedConfig
from . import _dlpack

_INSTALL = "pip install 'cuda-core>=1.2' 'cuda-bindings>=13' (or: pip install 'flashsim[gpu]')"
_DEFAULT_SMEM = 48 * 1024
# errors after which the context cannot be used again (CUDA driver API documentation of CUresult)
_STICKY = (
    "ILLEGAL_ADDRESS",
    "ILLEGAL_MEMORY_ACCESS",
    "UNSPECIFIED_LAUNCH_FAILURE",
    "LAUNCH_FAILED",
    "ILLEGAL_INSTRUCTION",
    "MISALIGNED_ADDRESS",
    "INVALID_ADDRESS_SPACE",
    "INVALID_PC",
    "HARDWARE_STACK_ERROR",
    "ASSERT",
    "ECC_UNCORRECTABLE",
    "CONTEXT_IS_DESTROYED",
    "LAUNCH_TIMEOUT",
    "TENSOR_MEMORY_LEAK",
)

_state: dict = {"device": None, "stream": None, "sticky": None}
_TLS = threading.local()  # per thread: .bound once a context is known to be current there


# -- device ----------------------------------------------------------------------------------------


def gpu_available() -> tuple[bool, str]:
    """(True, device description) when a CUDA GPU can be used, else (False, why not). Never raises."""
    try:
        from cuda.bindings import driver
    except Exception as exc:  # ImportError, or a broken install
        return False, f"cuda-python is not installed ({exc}); {_INSTALL}"
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False, f"cuInit failed: {_result_name(err)} (no NVIDIA driver or no usable GPU)"
        err, count = driver.cuDeviceGetCount()
        if err != driver.CUresult.CUDA_SUCCESS or count == 0:
            return False, "the NVIDIA driver sees no CUDA device (check CUDA_VISIBLE_DEVICES and nvidia-smi)"
        err, dev = driver.cuDeviceGet(0)
        err2, name = driver.cuDeviceGetName(100, dev)
        label = name.split(b"\0", 1)[0].decode(errors="replace") if err2 == driver.CUresult.CUDA_SUCCESS else "GPU 0"
    except Exception as exc:  # libcuda.so missing: cuda.pathfinder raises at the first driver call
        return False, f"the NVIDIA driver library (libcuda) could not be loaded: {exc}"
    if _state["sticky"]:
        return False, f"the CUDA context of this process is unusable after an earlier error: {_state['sticky']}"
    return True, f"{label} ({count} device(s))"


def require_gpu():
    """The current cuda.core Device (made current on first use, and in each new thread that has no current
    context); GPUError saying what is missing otherwise."""
    if _state["sticky"]:
        raise GPUError(
            f"the CUDA context of this process is unusable after an earlier error ({_state['sticky']}); "
            "restart the process"
        )
    dev = _state["device"]
    if dev is not None:
        if not getattr(_TLS, "bound", False):
            _bind_thread(dev)
        return dev
    ok, why = gpu_available()
    if not ok:
        raise GPUError(f"no usable GPU: {why}")
    try:
        from cuda.core import Device

        dev = Device(0)
        dev.set_current()
        _state["stream"] = dev.create_stream()
    except Exception as exc:
        raise GPUError(f"could not open the GPU through cuda.core: {exc}") from exc
    _state["device"] = dev
    _TLS.bound = True
    return dev


def _bind_thread(dev) -> None:
    from cuda.bindings import driver

    ctx = _driver("cuCtxGetCurrent", driver.cuCtxGetCurrent())
    if ctx is None or int(ctx) == 0:  # a thread that never touched CUDA: a launch there would fail
        _checked("making the device current in this thread", dev.set_current)
    _TLS.bound = True


def current_arch() -> str:
    """Architecture of the current GPU, e.g. "sm_90" (GPUError without a GPU)."""
    dev = require_gpu()
    arch = _state.get("arch")
    if arch is None:
        arch = _state["arch"] = f"sm_{dev.arch}"
    return arch


def device_id() -> int:
    """Ordinal of the device this module runs on (the one ``require_gpu`` opened)."""
    dev = require_gpu()
    ordinal = _state.get("device_id")
    if ordinal is None:
        ordinal = _state["device_id"] = int(dev.device_id)
    return ordinal


def sm_count() -> int:
    """Multiprocessors of the current GPU (what split-KV's heuristic fills: flashsim.serving.splits)."""
    dev = require_gpu()
    count = _state.get("sm_count")
    if count is None:
        count = _state["sm_count"] = int(dev.properties.multiprocessor_count)
    return count


def opened() -> bool:
    """Whether this process has opened the GPU (``require_gpu`` ran)."""
    return _state["device"] is not None


def sticky_error() -> str | None:
    """The sticky error that made this process's CUDA context unusable, or None."""
    return _state["sticky"]


def default_stream():
    """The cuda.core Stream every copy and launch of this module uses."""
    require_gpu()
    return _state["stream"]


def synchronize() -> None:
    """Wait for all work on the module's stream; GPUError on a pending asynchronous error."""
    _checked("stream synchronize", lambda: default_stream().sync())


def synchronize_device() -> None:
    """Wait for all work on the device, whatever stream it is on (cuCtxSynchronize); GPUError on a pending error."""
    from cuda.bindings import driver

    require_gpu()
    _driver("device synchronize", driver.cuCtxSynchronize())


def mapped_host(nbytes: int) -> tuple[np.ndarray, int]:
    """Pinned host memory the device writes directly (cuMemHostAlloc, portable and device-mapped): (a uint8 numpy
    view the host reads without waiting for the GPU, the device address kernels write to). Never freed: for a
    process's few small records."""
    import ctypes

    from cuda.bindings import driver

    require_gpu()
    flags = driver.CU_MEMHOSTALLOC_PORTABLE | driver.CU_MEMHOSTALLOC_DEVICEMAP
    host = int(_driver("cuMemHostAlloc", driver.cuMemHostAlloc(int(nbytes), flags)))
    dev = int(_driver("cuMemHostGetDevicePointer", driver.cuMemHostGetDevicePointer(host, 0)))
    view = np.ctypeslib.as_array((ctypes.c_uint8 * int(nbytes)).from_address(host))
    return view, dev


def _result_name(err) -> str:
    return getattr(err, "name", str(err))


def _context_broken() -> str | None:
    """After a failure: the error every call now returns if the context is broken (sticky), else None."""
    if _state["device"] is None:
        return None
    try:
        from cuda.bindings import driver

        (err,) = driver.cuCtxSynchronize()
        if err == driver.CUresult.CUDA_SUCCESS:
            return None
        # only the sticky kinds: e.g. a failed stream capture also fails this call, and leaves the context usable
        name = _result_name(err)
        return name if any(s in name for s in _STICKY) else None
    except Exception:
        return None


def _raise(what: str, message: str, exc=None):
    sticky = next((s for s in _STICKY if s in message.upper().replace(" ", "_")), None) or _context_broken()
    if sticky:
        _state["sticky"] = f"{what}: {message.splitlines()[0] if message else sticky}"
        message += (
            "\nThis error is sticky: the CUDA context is now unusable; restart the process "
            "(run compute-sanitizer to find the faulting access)."
        )
    raise GPUError(f"{what} failed: {message}") from exc


def _checked(what: str, fn):
    """Run a cuda.core call, turning its exceptions into GPUError naming ``what``."""
    try:
        return fn()
    except GPUError:
        raise
    except Exception as exc:
        _raise(what, f"{type(exc).__name__}: {exc}", exc)


def _driver(what: str, result):
    """Check a cuda.bindings.driver return tuple; return the payload (None, a value, or a tuple)."""
    from cuda.bindings import driver

    err, *rest = result
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        _raise(what, f"{_result_name(err)}: {text.decode() if isinstance(text, bytes) else text}")
    return None if not rest else rest[0] if len(rest) == 1 else tuple(rest)


# -- streams ---------------------------------------------------------------------------------------

_STREAMS: dict[int, object] = {}  # raw handle -> cuda.core Stream wrapping it (no ownership)
_MAX_STREAMS = 256


def stream_handle(stream) -> int:
    """The raw CUstream address of ``stream``: an int, a cuda.core Stream, a torch.cuda.Stream (``cuda_stream``),
    a cupy Stream (``ptr``) or any object with ``__cuda_stream__``. ValueError for anything else."""
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, bool):
        if stream < 0:
            raise ValueError(f"stream handle must be a non-negative int, got {stream}")
        return int(stream)
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        info = proto() if callable(proto) else proto
        return int(info[1])
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        value = getattr(stream, attr, None)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
    raise ValueError(
        f"stream must be a cuda.core Stream, a torch or cupy stream, an object with __cuda_stream__ "
        f"or a raw CUstream handle (int), got {type(stream).__name__}"
    )


def stream_from_handle(handle: int):
    """A cuda.core Stream for the raw handle (cached; it borrows the stream: its owner must keep it alive while
    work is enqueued). 0, the legacy default stream of torch and cupy, maps to cuda.core's LEGACY_DEFAULT_STREAM;
    2, cudaStreamPerThread, to PER_THREAD_DEFAULT_STREAM."""
    s = _STREAMS.get(handle)
    if s is None:
        from cuda.core import LEGACY_DEFAULT_STREAM, PER_THREAD_DEFAULT_STREAM, Stream

        if handle in (0, 1):  # NULL and CU_STREAM_LEGACY: the legacy default stream
            s = LEGACY_DEFAULT_STREAM
        elif handle == 2:  # CU_STREAM_PER_THREAD
            s = PER_THREAD_DEFAULT_STREAM
        else:
            s = _checked("wrapping a stream handle", lambda: Stream.from_handle(int(handle)))
        if len(_STREAMS) >= _MAX_STREAMS:
            _STREAMS.clear()
        _STREAMS[handle] = s
    return s


def as_stream(stream=None):
    """A cuda.core Stream for ``stream`` (None: this module's stream; see ``stream_handle`` for the forms)."""
    if stream is None:
        return default_stream()
    try:
        from cuda.core import Stream
    except ImportError as exc:
        raise GPUError(f"cuda-python is not installed ({exc}); {_INSTALL}") from exc
    if isinstance(stream, Stream):
        return stream
    return stream_from_handle(stream_handle(stream))


def bind_thread() -> None:
    """Make sure this thread can launch: the device's primary context is made current here if no context is (a
    thread that never touched CUDA has none). Cheap after the first call in a thread."""
    require_gpu()


def launch_config(grid, block, smem_bytes: int = 0, *, overlap_previous: bool = False):
    """A cuda.core LaunchConfig (validated dims), to build once and reuse for launches of the same shape.
    ``overlap_previous``: programmatic dependent launch (sm_90+): the kernel may start once the previous kernel on
    the stream has run griddepcontrol.launch_dependents, for a kernel that reads nothing the previous one writes."""
    from cuda.core import LaunchConfig

    g, b = _dims(grid, "grid"), _dims(block, "block")
    if not isinstance(smem_bytes, (int, np.integer)) or smem_bytes < 0:
        raise ValueError(f"smem_bytes must be a non-negative int, got {smem_bytes!r}")
    if overlap_previous:
        return LaunchConfig(grid=g, block=b, shmem_size=int(smem_bytes), programmatic_stream_serialization=True)
    return LaunchConfig(grid=g, block=b, shmem_size=int(smem_bytes))


def launch_failed(what: str, exc: BaseException):
    """Turn an exception from a launch into GPUError naming ``what`` (sticky errors are recorded)."""
    if isinstance(exc, GPUError):
        raise exc
    _raise(f"launching {what}", f"{type(exc).__name__}: {exc}", exc)


# -- memory ----------------------------------------------------------------------------------------


@dataclass(eq=False)
class DeviceArray:
    """A C-contiguous array in GPU memory: ours (a cuda.core Buffer) or borrowed zero-copy via DLPack."""

    ptr: int
    shape: tuple
    dtype: np.dtype
    owner: object = field(repr=False, default=None)  # keeps the memory alive (Buffer, or the DLPack producer)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def to_numpy(self) -> np.ndarray:
        """Copy to a new host array (waits for the module's stream first)."""
        from cuda.bindings import driver

        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            stream = default_stream()
            _driver(
                "cuMemcpyDtoHAsync", driver.cuMemcpyDtoHAsync(out.ctypes.data, self.ptr, self.nbytes, stream.handle)
            )
            synchronize()
        return out

    def copy_from(self, x: np.ndarray) -> None:
        """Overwrite with host array ``x`` (same shape and dtype)."""
        from cuda.bindings import driver

        x = np.ascontiguousarray(x)
        if x.shape != self.shape or x.dtype != self.dtype:
            raise ValueError(f"x must have shape {self.shape} and dtype {self.dtype}, got {x.shape} {x.dtype}")
        if self.nbytes:
            _driver(
                "cuMemcpyHtoDAsync",
                driver.cuMemcpyHtoDAsync(self.ptr, x.ctypes.data, self.nbytes, default_stream().handle),
            )
            synchronize()

    def zero_(self) -> DeviceArray:
        """Fill with zero bytes."""
        from cuda.bindings import driver

        if self.nbytes:
            _driver("cuMemsetD8Async", driver.cuMemsetD8Async(self.ptr, 0, self.nbytes, default_stream().handle))
        return self

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_dlpack.KDL_CUDA, int(require_gpu().device_id))

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Zero-copy DLPack export; our stream is drained first, so any consumer stream sees finished data."""
        if copy:
            raise BufferError("DeviceArray exports zero-copy only (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"DeviceArray lives on {self.__dlpack_device__()}, not {tuple(dl_device)}")
        synchronize()
        return _dlpack.make_capsule(self.ptr, self.shape, self.dtype, self.__dlpack_device__(), self)

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr=0x{self.ptr:x})"


def _shape_tuple(shape) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(s, (int, np.integer)) and s >= 0 for s in shape):
        raise ValueError(f"shape must be non-negative ints, got {shape!r}")
    return tuple(int(s) for s in shape)


def empty(shape, dtype) -> DeviceArray:
    """Uninitialised GPU array of ``shape`` and ``dtype`` (contents undefined: zero_() it if needed)."""
    shape, dtype = _shape_tuple(shape), np.dtype(dtype)
    dev = require_gpu()
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = _checked(f"allocating {nbytes} bytes", lambda: dev.allocate(max(nbytes, 1), stream=_state["stream"]))
    return DeviceArray(int(buf.handle), shape, dtype, buf)


def _c_contiguous_strides(shape, itemsize=1) -> tuple[int, ...]:
    strides, acc = [], itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def _from_dlpack_device(x) -> DeviceArray:
    """Borrow a GPU tensor (torch, cupy, ...) zero-copy; ValueError unless C-contiguous and on our device."""
    from cuda.core.utils import StridedMemoryView

    dev = require_gpu()
    stream_ptr = int(default_stream().handle)
    importer = getattr(StridedMemoryView, "from_dlpack", None) or StridedMemoryView  # older cuda.core: constructor
    view = _checked("DLPack import", lambda: importer(x, stream_ptr=stream_ptr))
    shape = tuple(int(s) for s in view.shape)
    if view.strides is not None:
        strides = tuple(int(s) for s in view.strides)
        expect = _c_contiguous_strides(shape)
        if any(a != b for a, b, n in zip(strides, expect, shape) if n > 1):
            raise ValueError(
                f"GPU array must be C-contiguous: shape {shape} has element strides {strides}, "
                f"expected {expect} (call .contiguous() / cupy.ascontiguousarray first)"
            )
    if int(view.device_id) != int(dev.device_id):
        raise ValueError(f"GPU array lives on device {view.device_id}, but flashsim uses device {dev.device_id}")
    dtype = view.dtype
    if dtype is None:
        raise ValueError(f"GPU array of type {type(x).__name__} has a dtype numpy cannot describe")
    return DeviceArray(int(view.ptr), shape, np.dtype(dtype), (view, x))


def to_device(x) -> DeviceArray:
    """A DeviceArray holding ``x``: numpy (or any host array) is copied, C-contiguous; a DeviceArray is returned
    as is; a GPU tensor with ``__dlpack__`` (torch, cupy) is borrowed zero-copy and must be C-contiguous."""
    from cuda.bindings import driver

    if isinstance(x, DeviceArray):
        return x
    if hasattr(x, "__dlpack_device__") and not isinstance(x, np.ndarray):
        try:
            dev_type = int(x.__dlpack_device__()[0])
        except Exception as exc:
            raise ValueError(f"x of type {type(x).__name__}: __dlpack_device__ failed: {exc}") from exc
        if dev_type in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
            return _from_dlpack_device(x)
    host = np.ascontiguousarray(np.asarray(x))
    if host.dtype == object:
        raise ValueError(f"x must be a numeric array, got dtype object from {type(x).__name__}")
    out = empty(host.shape, host.dtype)
    if host.nbytes:
        _driver(
            "cuMemcpyHtoDAsync",
            driver.cuMemcpyHtoDAsync(out.ptr, host.ctypes.data, host.nbytes, _state["stream"].handle),
        )
        synchronize()
    return out


# -- kernels ---------------------------------------------------------------------------------------


@dataclass(eq=False)
class Kernel:
    """A loaded kernel: ``kernel`` is cuda.core's Kernel; ``entry`` its resource record from the build."""

    kernel: object
    name: str
    build: object
    entry: object = None
    _max_dyn_smem_set: int = field(default=_DEFAULT_SMEM, repr=False)
    _param_sizes: object = field(default=None, repr=False)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, {self.build.arch})"


_MODULES: dict[str, object] = {}


def cubin_runs_on(build_arch: str, device_arch: str) -> bool:
    """A cubin runs on the same major version with an equal or newer minor; "a"/"f" builds need the exact GPU."""

    def split(a):
        digits = a.split("_", 1)[1]
        suffix = digits[-1] if digits[-1] in "af" else ""
        digits = digits.rstrip("af")
        return int(digits[:-1]), int(digits[-1]), suffix

    bmaj, bmin, bsuf = split(build_arch)
    dmaj, dmin, _ = split(device_arch)
    return bmaj == dmaj and (bmin == dmin if bsuf == "a" else bmin <= dmin)


def load(build, kernel_name: str) -> Kernel:
    """Load ``kernel_name`` (extern "C" name or a name expression of the build) from ``build``'s cubin."""
    from cuda.core import ObjectCode

    dev = require_gpu()
    want = f"sm_{dev.arch}"
    if not cubin_runs_on(build.arch, want):
        raise UnsupportedConfig(f"build is for {build.arch} but the GPU is {want}: compile with arch={want!r}")
    obj = _MODULES.get(build.key)
    if obj is None:
        obj = _checked("loading the cubin", lambda: ObjectCode.from_cubin(build.cubin, name=build.source_name))
        _MODULES[build.key] = obj
    try:
        entry = build.entry(kernel_name)
    except KeyError:
        entry = None
        if kernel_name not in build.lowered_names and build.entry_points:
            # an empty entry-point table means ptxas said nothing (no -v log): then trust the cubin's symbols
            known = sorted(set(build.entry_points) | set(build.lowered_names))
            raise ValueError(
                f"kernel_name {kernel_name!r} is not in this build; known: {', '.join(known) or 'none'}"
                " (templates must be listed in name_expressions)"
            ) from None
    symbol = build.lowered_names.get(kernel_name) or (entry.mangled if entry is not None else kernel_name)
    k = _checked(f"getting kernel {kernel_name!r} ({symbol})", lambda: obj.get_kernel(symbol))
    # No parameter-size probe (Kernel.arguments_info): cuKernelGetParamInfo fails with "invalid argument" on
    # library-loaded kernels here and compute-sanitizer reports every such call as an error.
    sizes = None
    static = entry.static_smem_bytes if entry is not None else 0
    # without the opt-in attribute, static + dynamic shared memory must stay within 48 KB
    return Kernel(k, kernel_name, build, entry, _max_dyn_smem_set=max(0, _DEFAULT_SMEM - static), _param_sizes=sizes)


def _dims(value, what: str) -> tuple[int, ...]:
    dims = (value,) if isinstance(value, (int, np.integer)) else tuple(value)
    if not 1 <= len(dims) <= 3 or not all(isinstance(d, (int, np.integer)) and d >= 1 for d in dims):
        raise ValueError(f"{what} must be 1 to 3 positive ints, got {value!r}")
    return tuple(int(d) for d in dims)


def _kernel_args(kernel: Kernel, args) -> list:
    out = []
    for i, a in enumerate(args):
        if isinstance(a, DeviceArray):
            out.append(np.uint64(a.ptr))
        elif isinstance(a, np.generic) and a.dtype.kind in "iufb":
            out.append(a)
        else:
            raise ValueError(
                f"argument {i} of {kernel.name}: expected a DeviceArray or a numpy scalar "
                f"(np.int32(..), np.float32(..)), got {type(a).__name__} (host arrays: rt.to_device)"
            )
    if kernel._param_sizes is not None:
        if len(out) != len(kernel._param_sizes):
            raise ValueError(f"{kernel.name} takes {len(kernel._param_sizes)} arguments, got {len(out)}")
        for i, (a, size) in enumerate(zip(out, kernel._param_sizes)):
            if a.dtype.itemsize != size:
                raise ValueError(
                    f"argument {i} of {kernel.name}: the kernel expects {size} bytes, "
                    f"got {a.dtype} ({a.dtype.itemsize} bytes)"
                )
    return out


def set_dynamic_smem(kernel: Kernel, smem_bytes: int) -> None:
    """Allow ``kernel`` ``smem_bytes`` of dynamic shared memory (the opt-in attribute above 48 KB); UnsupportedConfig
    beyond the device's limit. Launches do it themselves; callers that cache a launch do it once up front."""
    _set_dynamic_smem(kernel, int(smem_bytes))


def _set_dynamic_smem(kernel: Kernel, smem_bytes: int) -> None:
    from cuda.bindings import driver

    dev = require_gpu()
    if "optin" not in _state:
        _state["optin"] = int(dev.properties.max_shared_memory_per_block_optin)
    optin = _state["optin"]
    static = kernel.entry.static_smem_bytes if kernel.entry is not None else 0
    if smem_bytes + static > optin:
        raise UnsupportedConfig(
            f"{kernel.name} asks for {smem_bytes} B dynamic + {static} B static shared memory "
            f"per block; this GPU ({dev.name}, sm_{dev.arch}) allows at most {optin} B"
        )
    if smem_bytes > kernel._max_dyn_smem_set:
        handle = kernel.kernel.handle
        if not isinstance(handle, driver.CUkernel):
            handle = driver.CUkernel(int(handle))
        attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        _driver(
            f"setting {kernel.name}'s dynamic shared memory to {smem_bytes} B",
            driver.cuKernelSetAttribute(attr, int(smem_bytes), handle, driver.CUdevice(int(dev.device_id))),
        )
        kernel._max_dyn_smem_set = smem_bytes


def launch(kernel: Kernel, grid, block, *args, smem_bytes: int = 0, stream=None, sync: bool = True) -> None:
    """Launch ``kernel`` on ``grid`` x ``block`` with ``args`` (DeviceArray -> pointer, numpy scalars by value).

    smem_bytes: dynamic shared memory per block (the opt-in attribute is set when above 48 KB). stream: anything
    ``as_stream`` takes (default: the module's). sync: wait for completion, so that errors surface here naming the
    kernel.
    """
    from cuda.core import LaunchConfig
    from cuda.core import launch as _launch

    if not isinstance(kernel, Kernel):
        raise ValueError(f"kernel must come from flashsim.gpu.runtime.load, got {type(kernel).__name__}")
    require_gpu()
    g, b = _dims(grid, "grid"), _dims(block, "block")
    if not isinstance(smem_bytes, (int, np.integer)) or smem_bytes < 0:
        raise ValueError(f"smem_bytes must be a non-negative int, got {smem_bytes!r}")
    kargs = _kernel_args(kernel, args)
    _set_dynamic_smem(kernel, int(smem_bytes))
    s = as_stream(stream)
    what = f"kernel {kernel.name} (grid {g}, block {b}, {int(smem_bytes)} B dynamic smem)"
    _checked(
        f"launching {what}",
        lambda: _launch(s, LaunchConfig(grid=g, block=b, shmem_size=int(smem_bytes)), kernel.kernel, *kargs),
    )
    if sync:
        _checked(f"running {what}", s.sync)


def timed(fn, warmup: int = 3, reps: int = 20) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` runs, by CUDA events on the module's stream, after ``warmup``.

    ``fn`` should enqueue its work on the default stream (``launch(..., sync=False)``); it may also synchronise.
    """
    from cuda.core import EventOptions

    if warmup < 0 or reps < 1:
        raise ValueError(f"warmup must be >= 0 and reps >= 1, got {warmup}, {reps}")
    stream = default_stream()
    for _ in range(warmup):
        fn()
    synchronize()
    opts = EventOptions(timing_enabled=True)
    times = []
    for _ in range(reps):
        start = _checked("recording an event", lambda: stream.record(options=opts))
        fn()
        end = _checked("recording an event", lambda: stream.record(options=opts))
        _checked("timing", end.sync)
        times.append(float(end - start))
    return statistics.median(times)
