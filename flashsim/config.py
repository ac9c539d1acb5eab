"""The kernel configuration: one description shared by the emulator, the budget model and the kernel build.

Every number that shapes the kernel lives here once. The CUDA source receives it as preprocessor
defines (``KernelConfig.defines``), the emulator tiles its loops with it, and the budget model
evaluates ``smem_buffers`` on sympy symbols or on these integers: the same formula both ways.
"""
from __future__ import annotations

from dataclasses import dataclass, replace, fields

from .arch import get_arch

F16_BYTES = 2
MMA_M, MMA_N, MMA_K = 16, 8, 16          # mma.sync.m16n8k16
SUPPORTED_HEAD_DIMS = (64, 128)
SUPPORTED_PV_ACCUM = ("f32", "f16", "f16x2")
SUPPORTED_STAGES = (2, 3)


def smem_buffers(block_m, kv_tile, head_dim, stages, elem_bytes=F16_BYTES):
    """Shared-memory buffers of one block, name -> bytes.

    Works on ints and on sympy symbols alike (flashsim.budget uses the latter). The Q tile is
    staged once and read into registers with ldmatrix (its space is reused to stage O in the
    epilogue); K and V go through a ring of ``stages`` slots filled by cp.async. S/P never
    leaves registers and O accumulates in registers: neither has a buffer.
    """
    return {
        "Q tile": block_m * head_dim * elem_bytes,
        "K ring": stages * kv_tile * head_dim * elem_bytes,
        "V ring": stages * kv_tile * head_dim * elem_bytes,
    }


@dataclass(frozen=True)
class KernelConfig:
    """Compile-time shape of the FlashAttention forward kernel.

    head_dim   d, 64 or 128
    warps      warps per block
    m_tiles    m16 tiles per warp (1 or 2): a warp owns 16 * m_tiles query rows, a block 16 * m_tiles * warps.
               Two tiles let one K / V fragment from shared memory feed two mma's (half the shared-memory
               traffic per flop); Q is then re-read from shared memory instead of held in registers.
    kv_tile    keys per KV tile (Bc), a multiple of 16 (pairs of n8 score tiles form one k16 P slice)
    stages     slots in the K/V cp.async ring (2 or 3)
    pv_accum   accumulation of P@V: "f32" (f32 mma accumulator), "f16" (the O accumulator is f16: half the
               registers, and the f16 mma rate, 2x the f32 one on GeForce Blackwell), or "f16x2" (two levels: each KV
               tile's P V is accumulated by the f16 mma from zero, then added to an f32 O: the f16 mma rate with f32
               accuracy across tiles; O costs the f32 registers)
    causal     bottom-right aligned causal mask (as FlashAttention-2)
    """
    head_dim: int = 128
    warps: int = 8
    m_tiles: int = 1
    kv_tile: int = 64
    stages: int = 2
    pv_accum: str = "f32"
    causal: bool = False

    def __post_init__(self):
        self.validate()

    # ---- derived -------------------------------------------------------------------------
    @property
    def o_f16(self) -> bool:
        """The O accumulator is f16 (pv_accum "f16"); otherwise f32."""
        return self.pv_accum == "f16"

    @property
    def pv_mma_f16(self) -> bool:
        """The P@V mma accumulates in f16 (pv_accum "f16" or "f16x2"), so its result can overflow f16's range."""
        return self.pv_accum in ("f16", "f16x2")

    @property
    def block_m(self) -> int:
        """Query rows per block."""
        return MMA_M * self.m_tiles * self.warps

    @property
    def warp_m(self) -> int:
        """Query rows per warp."""
        return MMA_M * self.m_tiles

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def score_ntiles(self) -> int:
        """n8 tiles of the S = Q K^T accumulator per warp."""
        return self.kv_tile // MMA_N

    @property
    def out_ntiles(self) -> int:
        """n8 tiles of the O accumulator per warp."""
        return self.head_dim // MMA_N

    @property
    def qk_ksteps(self) -> int:
        """k16 steps of Q K^T (over the head dimension)."""
        return self.head_dim // MMA_K

    @property
    def pv_ksteps(self) -> int:
        """k16 steps of P V (over the keys of one tile)."""
        return self.kv_tile // MMA_K

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory the kernel asks for at launch."""
        return sum(smem_buffers(self.block_m, self.kv_tile, self.head_dim, self.stages).values())

    # ---- checks and build ----------------------------------------------------------------
    def validate(self) -> None:
        if self.head_dim not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"head_dim must be one of {SUPPORTED_HEAD_DIMS}, got {self.head_dim}")
        if not (isinstance(self.warps, int) and 1 <= self.warps <= 16):
            raise ValueError(f"warps must be an int in 1..16, got {self.warps!r}")
        if self.m_tiles not in (1, 2):
            raise ValueError(f"m_tiles must be 1 or 2, got {self.m_tiles!r}")
        if not (isinstance(self.kv_tile, int) and self.kv_tile >= 16 and self.kv_tile % 16 == 0
                and self.kv_tile <= 256):
            raise ValueError(f"kv_tile must be a multiple of 16 in 16..256, got {self.kv_tile!r}")
        if self.stages not in SUPPORTED_STAGES:
            raise ValueError(f"stages must be one of {SUPPORTED_STAGES}, got {self.stages!r}")
        if self.pv_accum not in SUPPORTED_PV_ACCUM:
            raise ValueError(f"pv_accum must be one of {SUPPORTED_PV_ACCUM}, got {self.pv_accum!r}")
        if not isinstance(self.causal, bool):
            raise ValueError(f"causal must be a bool, got {self.causal!r}")

    def fits(self, arch="sm_120") -> bool:
        """True if the dynamic shared memory fits the arch's per-block opt-in cap."""
        return self.smem_bytes <= get_arch(arch).smem_per_block_optin

    def defines(self) -> dict[str, int]:
        """Preprocessor defines of the kernel build: the only way numbers reach kernel/*.cu."""
        return {
            "FS_HEAD_DIM": self.head_dim,
            "FS_WARPS": self.warps,
            "FS_M_TILES": self.m_tiles,
            "FS_KV_TILE": self.kv_tile,
            "FS_STAGES": self.stages,
            "FS_PV_F16": int(self.pv_accum == "f16"),
            "FS_PV_F16X2": int(self.pv_accum == "f16x2"),
            "FS_CAUSAL": int(self.causal),
        }

    def with_(self, **changes) -> "KernelConfig":
        return replace(self, **changes)

    @classmethod
    def default(cls, arch="sm_120", **overrides) -> "KernelConfig":
        """The default configuration for an arch; keyword overrides win over it.

        sm_90 / sm_100 (227 KB per block): the tile shapes that were fastest on the H200
        (benchmarks/RESULTS.md, "tile shapes"): 4 warps x 2 m16 tiles and a 2-stage ring; kv_tile 64, except 32
        for d=128 with f32 P@V (kv_tile 64 spills there). sm_100 is untested and takes sm_90's choice.
        Elsewhere (sm_120, sm_8x: about 99 KB) the seed's block: 8 warps x 16 rows, kv_tile 64, 2 stages =
        96 KB at d=128, with a third stage where the cap allows it.
        """
        a = get_arch(arch)
        head_dim = overrides.get("head_dim", cls.head_dim)
        if a.smem_per_block_optin > 200 * 1024:
            acc = overrides.get("pv_accum", cls.pv_accum)
            # d=128: f32 P@V needs kv_tile 32 to stay under 255 registers without spills; f16 P@V fits kv_tile 64.
            # f16x2 (f32 O plus the f16 tile accumulators) spills with 2 m16 tiles at kv_tile 64 (ptxas, NVRTC 13):
            # 8 warps x 1 tile at d=128 (243 registers), kv_tile 32 at d=64 (218); not yet tuned on the H200.
            if acc == "f16x2":
                tuned = dict(warps=8, m_tiles=1, kv_tile=64, stages=2) if head_dim == 128 else \
                    dict(warps=4, m_tiles=2, kv_tile=32, stages=2)
            elif head_dim == 128:
                tuned = dict(warps=4, m_tiles=2, kv_tile=64 if acc == "f16" else 32, stages=2)
            else:
                tuned = dict(warps=4, m_tiles=2, kv_tile=64, stages=2)
            return cls(**{**tuned, **overrides})
        base = cls(**{k: v for k, v in overrides.items() if k != "stages"})
        if "stages" in overrides:
            return base.with_(stages=overrides["stages"])
        deeper = base.with_(stages=3)
        return deeper if deeper.smem_bytes <= a.smem_per_block_optin else base

    def describe(self) -> str:
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self))
