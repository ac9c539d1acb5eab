"""The GPU's SM clock and power while something ran, sampled through NVML (the driver's libnvidia-ml), for benchmarks.

Why: on random data the H200 runs the attention kernels at its software power cap, 6-11% under the top clock that
the mma.sync ceiling probe keeps on its constant operands; with constant inputs the same kernel runs at the top clock
with the same work per clock (benchmarks/experiments/power_clock/). A rate and its share of the ceiling mean more with
the clocks both ran at: ``flashsim bench kernel`` prints them, and the share at equal clocks.

``Sampler`` (a context manager) reads the SM clock (MHz), the power (W) and the clock event reasons of the process's
GPU every ``period_s`` seconds on a thread of its own, stamping each sample with time.time(); ``window(t0, t1)``
averages the samples taken between two such times. The power is NVML's reading, which the driver averages over about a
second on the H200: over a window of a few hundred milliseconds it lags (it read 262-599 W for timings that
nvidia-smi's sustained samples put at 670 W), so flashsim bench reports the clock and the power-cap flag only.
Without NVML (no driver library, another vendor's GPU, a call that fails) the sampler is inert: ``available`` is
False, ``why`` says why, and every window is None.
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass

NVML_CLOCK_SM = 1  # nvmlClockType_t
SW_POWER_CAP = 0x4  # nvmlClocksEventReasonSwPowerCap (clocks_event_reasons in nvidia-smi)


@dataclass(frozen=True)
class Window:
    """Samples between two times: mean / min / max SM clock (MHz), mean power (W), the OR of the clock event reasons,
    and how many samples."""

    mhz: float
    mhz_min: float
    mhz_max: float
    watts: float
    reasons: int
    samples: int

    @property
    def power_capped(self) -> bool:
        return bool(self.reasons & SW_POWER_CAP)


def summarize(samples, t0: float, t1: float) -> Window | None:
    """The samples (t, mhz, watts, reasons) with t0 <= t <= t1 as a Window; None if there are none."""
    sel = [s for s in samples if t0 <= s[0] <= t1]
    if not sel:
        return None
    mhz = [s[1] for s in sel]
    reasons = 0
    for s in sel:
        reasons |= s[3]
    return Window(sum(mhz) / len(mhz), min(mhz), max(mhz), sum(s[2] for s in sel) / len(sel), reasons, len(sel))


def _nvml():
    for name in ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("the NVIDIA management library (libnvidia-ml) could not be loaded")


def _pci_bus_id() -> str | None:
    """The PCI bus id of flashsim.gpu.runtime's device ("0000:1B:00.0"), or None."""
    try:
        from cuda.bindings import driver

        from . import runtime as rt

        dev = rt.require_gpu()
        err, bus = driver.cuDeviceGetPCIBusId(32, int(dev.device_id))
        if int(err) != 0:
            return None
        return bus.decode() if isinstance(bus, bytes) else str(bus)
    except Exception:  # noqa: BLE001 - only a way to pick the device; index 0 is the fallback
        return None


class Sampler:
    """``with Sampler() as s: ...; s.window(t0, t1)``: SM clock and power samples of this process's GPU."""

    def __init__(self, period_s: float = 0.05):
        self.period_s = period_s
        self.samples: list[tuple[float, float, float, int]] = []
        self.available, self.why = False, ""
        self._stop = threading.Event()
        self._thread = None
        self._lib = self._handle = None

    def __enter__(self):
        try:
            lib = _nvml()
            if lib.nvmlInit_v2() != 0:
                raise OSError("nvmlInit failed")
            self._lib = lib  # initialised: __exit__ shuts NVML down again, whatever follows
            handle = ctypes.c_void_p()
            bus = _pci_bus_id()
            found = bus is not None and lib.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(handle)) == 0
            if not found:
                count = ctypes.c_uint()
                if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0 or count.value != 1:
                    raise OSError(f"cannot tell which of the GPUs NVML lists is this process's (bus id {bus})")
                if lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(handle)) != 0:
                    raise OSError("nvmlDeviceGetHandleByIndex failed")
            self._handle = handle
            self._read()  # fails here, not in the thread, if a query is unsupported
        except Exception as e:  # noqa: BLE001 - clocks are context; a benchmark runs without them
            self.why = f"no clock samples: {e}"
            return self
        self.available = True
        self._thread = threading.Thread(target=self._run, name="flashsim-clocks", daemon=True)
        self._thread.start()
        return self

    def _read(self) -> tuple[float, float, float, int]:
        lib, h = self._lib, self._handle
        mhz, mw, reasons = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        if lib.nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, ctypes.byref(mhz)) != 0:
            raise OSError("nvmlDeviceGetClockInfo failed")
        if lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(mw)) != 0:
            raise OSError("nvmlDeviceGetPowerUsage failed")
        get_reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )  # the older name
        if get_reasons is None or get_reasons(h, ctypes.byref(reasons)) != 0:
            reasons.value = 0
        return time.time(), float(mhz.value), mw.value / 1000.0, int(reasons.value)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self._read())
            except Exception:  # noqa: BLE001 - a lost sample is not an error
                pass
            self._stop.wait(self.period_s)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._lib is not None:
            self._lib.nvmlShutdown()

    def window(self, t0: float, t1: float) -> Window | None:
        """The samples taken between time.time() values t0 and t1 (None without NVML or without a sample)."""
        return summarize(list(self.samples), t0, t1) if self.available else None
