"""What the numerics need to know about the engine that runs them, passed to every routine as an argument.

The numerics are written once against an array namespace (flashsim.numerics.xp), and most of them need nothing
else: the namespace of the inputs decides numpy or JAX. A few engines trace the same routines into a form that
differs: the fused Pallas kernel (flashsim.emulator.engine_pallas) cannot slice, gather from or index a value, may
run what PTX defines exactly as one inline instruction, and keeps the SFU tables in device memory; XLA on a GPU
converts f32 <-> f64 as IEEE says, so those conversions may be native there. Every such difference is a field of
``Target``, and the engine passes its Target down explicitly: no routine reads ambient state (a context variable, a
global switch or the environment) to decide how to compute. ``PLAIN`` is the target of eager numpy and plain JAX.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

__all__ = ["Target", "PLAIN"]


@dataclass(frozen=True, eq=False)
class Target:
    """How the numerics are traced and run (see the module docstring). Hashable: engines key compiled programs on it.

    fused               traced into one fused Pallas / Triton kernel: ``xp.pieces`` splits, ``xp.lookup`` loads from
                        a table in memory, an mma chain reads its operands back through ``stage``
    stage               the fused kernel's staging memory for mma chains (``xp.staged``), or None
    inline_ptx          that kernel is compiled for an NVIDIA GPU: operations that PTX defines exactly (IEEE
                        arithmetic with an explicit rounding, conversions) may be one inline instruction (``xp.ptx``)
    native_conversions  f32 -> f64 widening is exact and f64 -> f32 narrowing rounds to nearest even with gradual
                        underflow on this backend (XLA on NVIDIA GPUs; not XLA's CPU, which flushes subnormals)
    sfu_tables          ((arch name, function), arrays) pairs: the SFU tables as the engine holds them (device
                        arrays passed into a jitted program), read instead of the model's own host arrays
    mma_threads         threads of the numpy engine's compiled tensor-core kernel; None: the CPUs this process may
                        use, at most 8 (flashsim.settings)
    """

    fused: bool = False
    stage: Callable | None = None
    inline_ptx: bool = False
    native_conversions: bool = False
    sfu_tables: tuple = field(default=())
    mma_threads: int | None = None

    def tables(self, arch_name: str, function: str):
        """The SFU tables this target holds for (arch, function), or None: the model then reads its own arrays."""
        for key, arrays in self.sfu_tables:
            if key == (arch_name, function):
                return arrays
        return None

    def with_tables(self, arch_name: str, function: str, arrays) -> Target:
        """This target holding ``arrays`` as the SFU tables of (arch, function)."""
        kept = tuple((k, a) for k, a in self.sfu_tables if k != (arch_name, function))
        return replace(self, sfu_tables=kept + (((arch_name, function), tuple(arrays)),))

    def _identity(self) -> tuple:  # the tables are arrays: identified by object, as a compiled program's arguments
        tables = tuple((k, tuple(id(a) for a in arrays)) for k, arrays in self.sfu_tables)
        return (self.fused, self.stage, self.inline_ptx, self.native_conversions, self.mma_threads, tables)

    def __hash__(self):
        return hash(self._identity())

    def __eq__(self, other):
        return isinstance(other, Target) and self._identity() == other._identity()


PLAIN = Target()
