"""The Target (flashsim.numerics.target) a JAX program of the emulator is traced for, from the devices it runs on."""

from __future__ import annotations

from ..numerics.target import Target
from ..settings import EngineOptions


def native_conversions(devices, options: EngineOptions) -> bool:
    """Whether a JAX program for ``devices`` converts f32 <-> f64 with XLA's own instructions: every device a GPU
    (XLA keeps f32 subnormals there; 9% faster on the H200, same bits: benchmarks/experiments/jax_ieee_cvt/), unless
    ``options.jax_native_conversions`` is off (A/B measurements)."""
    return options.jax_native_conversions and all(dev.platform == "gpu" for dev in devices)


def jax_target(devices, options: EngineOptions) -> Target:
    """The Target of the scan engine's and the epilogue's programs on ``devices``."""
    return Target(native_conversions=native_conversions(devices, options))
