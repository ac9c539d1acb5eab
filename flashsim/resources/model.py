"""``budget(config, arch)``: shared memory, registers and occupancy of one kernel configuration on one arch.

The shared memory is evaluated from sympy expressions (symbols.py), so ``budget()`` imports sympy when it is
called; importing this module does not (``import flashsim`` stays cheap).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..arch import Arch, get_arch
from ..config import KernelConfig
from .occupancy import Occupancy, occupancy, occupancy_expressions
from .registers import RegisterCount
from .registers import registers as count_registers
from .report import table

KB = 1024


@dataclass(frozen=True)
class Budget:
    """The resource budget of one configuration on one arch (``flashsim.budget``'s public contract).

    smem_bytes      dynamic + static shared memory of one block (the 1 KB the runtime reserves is not in it)
    breakdown       buffer name -> bytes (dynamic shared memory)
    cap_bytes       the arch's per-block opt-in cap
    fits            smem_bytes <= cap_bytes and at least one block can be resident
    blocks_per_sm   by the cuda_occupancy.h rules; occupancy = resident warps / max warps (0..1)
    registers       per thread (registers_source says whether ptxas counted them or they are estimated)
    expressions     the sympy expressions behind the numbers (see ``symbols`` / ``occupancy_expressions``)
    """

    config: KernelConfig
    arch: Arch
    breakdown: dict
    static_smem_bytes: int
    reg: RegisterCount
    occ: Occupancy
    expressions: dict = field(repr=False)
    label: str = ""

    @property
    def smem_bytes(self) -> int:
        return sum(self.breakdown.values()) + self.static_smem_bytes

    @property
    def cap_bytes(self) -> int:
        return self.arch.smem_per_block_optin

    @property
    def free_bytes(self) -> int:
        return self.cap_bytes - self.smem_bytes

    @property
    def fits(self) -> bool:
        return self.smem_bytes <= self.cap_bytes and self.occ.blocks_per_sm >= 1

    @property
    def blocks_per_sm(self) -> int:
        return self.occ.blocks_per_sm

    @property
    def occupancy(self) -> float:
        return self.occ.occupancy

    @property
    def registers(self) -> int:
        return self.reg.registers

    @property
    def registers_source(self) -> str:
        return self.reg.source

    @property
    def fragment_registers(self) -> dict:
        """Registers per thread of the live fragments (O, S, Q, m/l): the floor under ptxas's count."""
        from . import symbols

        return symbols.evaluate(symbols.fragment_register_expressions(), self.config)

    def table(self) -> str:

        return table(self)

    def __str__(self) -> str:
        return self.table()


def budget(
    config: KernelConfig | None = None,
    arch="sm_120",
    *,
    registers="auto",
    extra_buffers: dict | None = None,
    label: str = "",
) -> Budget:
    """The budget of ``config`` (default: KernelConfig.default(arch)) on ``arch``.

    registers: "auto" (ptxas count of an NVRTC build when possible, else the documented estimate),
    "compile" (a build is required), "estimate", or an int to use as is.
    extra_buffers: name -> sympy expression in flashsim.resources.symbols (what-ifs, e.g. the seed's S/P buffer).
    """
    import sympy as sp

    from . import symbols

    a = get_arch(arch)
    if config is None:
        config = KernelConfig.default(a.name)
    if not isinstance(config, KernelConfig):
        raise ValueError(f"config must be a flashsim.KernelConfig or None, got {type(config).__name__}")
    smem_expr = symbols.smem_expressions()
    if config.warp_split == 1:  # one ring, the block's own rows: the table's formulas without W_s
        smem_expr = {name: sp.sympify(e).subs(symbols.warp_split, 1) for name, e in smem_expr.items()}
    if extra_buffers:
        smem_expr.update(extra_buffers)
    breakdown = symbols.evaluate(smem_expr, config)
    if not extra_buffers and sum(breakdown.values()) != config.smem_bytes:  # same function, ints vs symbols
        raise AssertionError(
            f"symbolic shared memory {sum(breakdown.values())} != config.smem_bytes {config.smem_bytes}"
        )
    if (
        isinstance(registers, bool)
        or not isinstance(registers, (int, str))
        or (isinstance(registers, str) and registers not in ("auto", "compile", "estimate"))
    ):
        raise ValueError(f"registers must be 'auto', 'compile', 'estimate' or an int, got {registers!r}")
    if isinstance(registers, int):
        if not 1 <= registers <= a.regs_per_thread_max:
            raise ValueError(f"registers must be in 1..{a.regs_per_thread_max}, got {registers}")
        reg = RegisterCount(registers, "given")
    else:
        reg = count_registers(config, a.name, registers)
    static = int(getattr(reg.entry, "static_smem_bytes", 0) or 0)  # flash_fwd's own, not flash_combine's
    dynamic = sum(breakdown.values())
    occ = occupancy(a.name, config.threads, reg.registers, dynamic, static)
    occ_expr = occupancy_expressions(a.name)
    expressions = {
        "smem": smem_expr,
        "smem_total": sp.Add(*smem_expr.values()),
        "fragment_registers": symbols.fragment_register_expressions(),
        "occupancy": occ_expr,
        "symbols": symbols.SYMBOLS,
    }
    return Budget(config, a, breakdown, static, reg, occ, expressions, label)
