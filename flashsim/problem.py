"""The attention problem: argument checks and derived scalars shared by the emulator and the GPU runner.

Both executions of the kernel (flashsim.attention on the CPU, flashsim.gpu.attention on the GPU) call
``prepare`` so they accept and reject exactly the same inputs and feed the kernel exactly the same scalars.
Nothing is cast or guessed: an argument that is the wrong type, out of range, or that contradicts ``config`` is an
error naming it. The emulator also calls ``check_emulator_memory`` (and the float64 reference
``check_reference_memory``) so that a problem too large for this machine is refused, with the estimate, before
anything is allocated.
"""
from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass

import numpy as np

from .arch import get_arch
from .config import KernelConfig, SUPPORTED_HEAD_DIMS, SUPPORTED_PV_ACCUM
from .masking import keys_visited

LOG2E = 1.4426950408889634  # log2(e) in float64
GRID_YZ_MAX = 65535         # CUDA grid y (heads) and z (batch) limits
INT32_MAX = 2 ** 31 - 1     # the kernel takes nq, nk as int and computes row indices in int


@dataclass(frozen=True)
class Problem:
    batch: int
    heads: int
    nq: int
    nk: int
    head_dim: int
    config: KernelConfig
    arch: str
    softmax_scale: np.float32      # what the kernel receives
    scale_log2: np.float32         # softmax_scale * log2(e), rounded once to f32 on the host

    @property
    def q_blocks(self) -> int:
        return -(-self.nq // self.config.block_m)

    def kv_tiles(self) -> np.ndarray:
        """KV tiles each query block visits, (q_blocks,) int: the kernel's n_tiles, causal skipping included."""
        bm, bc = self.config.block_m, self.config.kv_tile
        keys = keys_visited(np.arange(self.q_blocks) * bm, bm, self.nq, self.nk, self.config.causal)
        return -(-keys // bc)


def scales(softmax_scale, head_dim: int) -> tuple[np.float32, np.float32]:
    """(softmax_scale, scale_log2) as float32, the values the kernel is launched with.

    ``softmax_scale``: None (1/sqrt(head_dim)) or a real number (not a bool, not a string). It is checked after
    rounding to float32, as the kernel receives it: 1e-46 (0 in f32) and 1e39 (inf in f32) are refused, and so is
    a scale whose scale * log2(e) overflows f32."""
    softmax_scale = _scale_value(softmax_scale)
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(head_dim)
    s = float(softmax_scale)
    with np.errstate(over="ignore", under="ignore"):
        s32 = np.float32(s)
        s_log2 = np.float32(float(s32) * LOG2E)
    if not (math.isfinite(s) and np.isfinite(s32) and s32 > 0):
        why = "" if not math.isfinite(s) or s <= 0 else f" (it is {float(s32)!r} as the kernel's float32)"
        raise ValueError(f"softmax_scale must be a positive finite number (as a float32), got {softmax_scale!r}{why}")
    if not np.isfinite(s_log2):
        raise ValueError(f"softmax_scale={softmax_scale!r} is too large: softmax_scale * log2(e) overflows float32")
    return s32, s_log2


def _shape_of(x, name):
    shape = getattr(x, "shape", None)
    if shape is None:
        raise ValueError(f"{name} must be an array of shape (B, H, N, d), got {type(x).__name__}")
    return tuple(int(s) for s in shape)


def _dtype_name(x) -> str:
    dt = getattr(x, "dtype", None)
    return str(dt).replace("torch.", "")


def resolve_options(causal, pv_accum, config, softmax_scale=None):
    """(causal, pv_accum, config, softmax_scale) with the defaults filled in, the one rule for every caller
    (prepare, and the GPU runner's fast paths before their cache keys): ``causal`` a bool or None (TypeError
    otherwise), ``pv_accum`` one of SUPPORTED_PV_ACCUM or None; None means "not given": the config's value, or
    False / "f32" without a config; given values must agree with ``config`` (ValueError naming both).
    ``softmax_scale``: None, or a real number (TypeError otherwise; its value is checked by ``scales``), returned
    as a float."""
    if causal is not None and not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__} {causal!r}")
    if pv_accum is not None and (not isinstance(pv_accum, str) or pv_accum not in SUPPORTED_PV_ACCUM):
        raise ValueError(f"pv_accum must be one of {SUPPORTED_PV_ACCUM}, got {pv_accum!r}")
    if config is not None:
        if not isinstance(config, KernelConfig):
            raise ValueError(f"config must be a flashsim.KernelConfig, got {type(config).__name__}")
        if causal is not None and bool(causal) != config.causal:
            raise ValueError(f"causal={bool(causal)} contradicts config.causal={config.causal} "
                             "(leave causal out, or pass the config's value)")
        if pv_accum is not None and pv_accum != config.pv_accum:
            raise ValueError(f"pv_accum={pv_accum!r} contradicts config.pv_accum={config.pv_accum!r} "
                             "(leave pv_accum out, or pass the config's value)")
        causal, pv_accum = config.causal, config.pv_accum
    else:
        causal = False if causal is None else bool(causal)
        pv_accum = "f32" if pv_accum is None else pv_accum
    return causal, pv_accum, config, _scale_value(softmax_scale)


def _scale_value(softmax_scale) -> float | None:
    """``softmax_scale`` as a float (None stays None); TypeError for anything but a real number (bools and strings
    included). Its value is checked by ``scales``, after rounding to float32."""
    if softmax_scale is None:
        return None
    if isinstance(softmax_scale, (bool, np.bool_)) or not (
            isinstance(softmax_scale, numbers.Real)
            or (isinstance(softmax_scale, np.ndarray) and softmax_scale.ndim == 0
                and softmax_scale.dtype.kind in "iuf")):
        raise TypeError(f"softmax_scale must be a real number (or None for 1/sqrt(d)), "
                        f"got {type(softmax_scale).__name__} {softmax_scale!r}")
    return float(softmax_scale)


def prepare(q, k, v, *, causal=None, softmax_scale=None, pv_accum=None, arch="sm_90", config=None) -> Problem:
    """Validate q, k, v and the options; return the Problem both executions run.

    q (B, H, Nq, d), k and v (B, H, Nk, d), float16. ``causal`` (a bool) and ``pv_accum`` ("f32" or "f16"):
    None means "not given": the config's value, or False / "f32" without a config. ``config`` (a KernelConfig)
    fixes the tiling; its head_dim must be d, and a causal / pv_accum given here must agree with it. The
    configuration must fit the arch's shared memory per block (the GPU could not launch it).
    """
    arch_name = get_arch(arch).name
    causal, pv_accum, config, _ = resolve_options(causal, pv_accum, config)
    shapes = {}
    for name, x in (("q", q), ("k", k), ("v", v)):
        shape = _shape_of(x, name)
        if len(shape) != 4:
            raise ValueError(f"{name} must have 4 dimensions (B, H, N, d), got shape {shape}")
        dt = getattr(x, "dtype", None)
        if isinstance(dt, np.dtype) and dt.kind == "f" and dt.itemsize == 2 and not dt.isnative:
            raise ValueError(f"{name} is float16 in the other byte order ({dt.str}); the kernel reads native "
                             f"float16 bits: pass {name}.astype(np.float16)")
        if _dtype_name(x) != "float16":
            raise ValueError(f"{name} must be float16, got {_dtype_name(x)} (nothing is cast silently)")
        shapes[name] = shape
    (b, h, nq, d), (bk, hk, nk, dk), _ = shapes["q"], shapes["k"], shapes["v"]
    if shapes["k"] != shapes["v"]:
        raise ValueError(f"k and v must have the same shape, got k {shapes['k']} and v {shapes['v']}")
    if (bk, hk, dk) != (b, h, d):
        raise ValueError(f"k must be (B, H, Nk, d) with B={b}, H={h}, d={d} of q, got {shapes['k']}")
    if nq == 0 or nk == 0:
        raise ValueError(f"sequence lengths must be >= 1, got Nq={nq}, Nk={nk}")
    if b == 0 or h == 0:
        raise ValueError(f"batch and heads must be >= 1, got B={b}, H={h}")
    if d not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dim d={d} is not supported by the kernel; supported: {SUPPORTED_HEAD_DIMS}")
    if h > GRID_YZ_MAX or b > GRID_YZ_MAX:
        raise ValueError(f"heads H={h} and batch B={b} must each be <= {GRID_YZ_MAX} (the CUDA grid's y and z)")
    if config is None:
        config = KernelConfig.default(arch_name, head_dim=d, causal=causal, pv_accum=pv_accum)
    elif config.head_dim != d:
        raise ValueError(f"config.head_dim={config.head_dim} does not match the inputs' head dim d={d}")
    cap = get_arch(arch_name).smem_per_block_optin
    if config.smem_bytes > cap:
        from .gpu.errors import UnsupportedConfig     # a ValueError; imported here (flashsim.gpu imports this module)
        raise UnsupportedConfig(f"the configuration needs {config.smem_bytes} B of shared memory per block but "
                                f"{arch_name} allows at most {cap} B ({config.describe()})")
    if nq + nk + config.block_m > INT32_MAX:
        raise ValueError(f"Nq={nq} and Nk={nk} are too long: Nq + Nk + {config.block_m} must be < 2^31 "
                         "(the kernel computes row indices in 32-bit ints)")
    s32, s_log2 = scales(softmax_scale, d)
    return Problem(b, h, nq, nk, d, config, arch_name, s32, s_log2)


# ---- memory: refuse a problem this machine cannot hold, before allocating it -----------------------------------

# The numpy engine's temporaries, measured with tracemalloc on engine_numpy.py (sm_90 default configurations and
# the extreme tiles BM=16 with BC=16 and BC=256; the estimate is 1.0-1.5 times the measured peak, and
# tests/test_problem_checks.py checks that it stays above a measured peak):
CHUNK_BYTES_PER_SCORE = 60         # one KV step of a chunk, per score element (chunk units x BM x BC) ...
CHUNK_BYTES_PER_SCORE_D_BM = 25    # ... plus this times d / BM (each block's K and V tiles gathered and decoded)
CHUNK_SCRATCH = 16 << 20           # the tensor-core model's own chunked scratch
EPILOGUE_BYTES_PER_OUT = 56        # kernel_program.epilogue on a chunk's blocks: per padded output element
EPILOGUE_CHUNK_LEFT = 0.5          # part of the last chunk's temporaries still alive during the epilogue


def emulator_peak_bytes(prob: Problem, max_tile_elems: int | None = None, backend: str = "numpy") -> int:
    """Estimated peak memory of flashsim.attention on ``prob``: the caller's inputs, the inputs padded to whole tiles,
    the outputs, a chunk's state (m, l, O), and the larger of the engine's two phases on a chunk: a KV step (its
    temporaries grow with the chunk's score elements, at most ``max_tile_elems``) or the epilogue. backend="jax": only what the host
    holds whatever the device (inputs, padded inputs, outputs). An estimate: 1.0 to 1.5 times the peak measured on
    the numpy engine."""
    cfg = prob.config
    bh, d, bm, bc = prob.batch * prob.heads, prob.head_dim, cfg.block_m, cfg.kv_tile
    units = bh * prob.q_blocks
    rows = units * bm                                         # padded query rows
    tiles = max(int(prob.kv_tiles().max(initial=0)), 1)
    inputs = 2 * bh * (prob.nq + 2 * prob.nk) * d             # the caller's f16 q, k, v
    padded = 2 * (rows * d + 2 * bh * tiles * bc * d)         # q, k, v padded to tiles (engine_numpy.pad_rows)
    outputs = 2 * bh * prob.nq * d + 4 * bh * prob.nq         # o f16 and lse f32 as returned
    if backend != "numpy":
        return int(inputs + padded + 2 * outputs)
    if max_tile_elems is None:
        from .emulator import engine_numpy
        max_tile_elems = getattr(engine_numpy, "DEFAULT_MAX_TILE_ELEMS", 1 << 22)
    # engine_numpy: chunks of units (each at most max_tile_elems score elements), one after the other, each from
    # its initial state through its epilogue; the outputs of every block are allocated up front
    chunk_units = min(units, max(1, int(max_tile_elems) // (bm * bc)))
    chunk_rows = chunk_units * bm
    state = chunk_rows * (4 + 16 + 8) + chunk_rows * d * (2 if cfg.pv_accum == "f16" else 4) + 24 * units
    padded_out = 2 * rows * d + 4 * rows                       # the engine's padded o and lse
    per_chunk = (CHUNK_BYTES_PER_SCORE + CHUNK_BYTES_PER_SCORE_D_BM * d / bm) * chunk_rows * bc
    step_phase = per_chunk + min(CHUNK_SCRATCH, per_chunk)
    epilogue_phase = EPILOGUE_CHUNK_LEFT * per_chunk + EPILOGUE_BYTES_PER_OUT * chunk_rows * d
    return int(inputs + padded + padded_out + state + outputs + max(step_phase, epilogue_phase))


def reference_peak_bytes(prob: Problem) -> int:
    """Estimated peak memory of flashsim.reference_attention: the float64 copies of q, k, v and o, and about three
    float64 (B, H, Nq, Nk) score arrays alive at once (scores, masked scores, exponentials) plus the mask."""
    bh, nq, nk, d = prob.batch * prob.heads, prob.nq, prob.nk, prob.head_dim
    return int(2 * bh * (nq + 2 * nk) * d + 8 * bh * (2 * nq + 2 * nk) * d + 25 * bh * nq * nk + 2 * nq * nk)


def _cgroup_limit() -> int | None:
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            return int(text)
    return None


def memory_limit() -> tuple[int | None, str]:
    """(bytes, where that number comes from): $FLASHSIM_MAX_BYTES if set, else this machine's physical memory (or
    the container's cgroup limit, if smaller); (None, ...) where neither can be read."""
    env = os.environ.get("FLASHSIM_MAX_BYTES")
    if env is not None and env.strip():
        try:
            value = int(float(env))
        except ValueError:
            raise ValueError(f"FLASHSIM_MAX_BYTES must be a number of bytes, got {env!r}") from None
        if value <= 0:
            raise ValueError(f"FLASHSIM_MAX_BYTES must be positive, got {env!r}")
        return value, "FLASHSIM_MAX_BYTES"
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        phys = None
    cg = _cgroup_limit()
    if cg is not None and (phys is None or cg < phys):
        return cg, "the container's memory limit"
    return (phys, "this machine's memory") if phys else (None, "unknown")


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:.1f} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:.1f} MiB"


def check_memory(need: int, what: str) -> None:
    """ValueError (one line, with the estimate) if ``need`` bytes exceed the memory limit (``memory_limit``)."""
    limit, source = memory_limit()
    if limit is not None and need > limit:
        raise ValueError(f"{what} would need about {_gib(need)} of memory ({need} B, estimated) but {source} is "
                         f"{_gib(limit)}: use fewer heads/batch or shorter sequences (FLASHSIM_MAX_BYTES overrides)")


def check_emulator_memory(prob: Problem, backend: str = "numpy", max_tile_elems: int | None = None) -> None:
    """Refuse (ValueError with the estimate) a problem whose emulation cannot fit in memory; call before running."""
    shape = f"{prob.batch}x{prob.heads}x{prob.nq}x{prob.nk}x{prob.head_dim}"
    check_memory(emulator_peak_bytes(prob, max_tile_elems, backend), f"emulating {shape} ({backend})")


def check_reference_memory(prob: Problem) -> None:
    """Refuse (ValueError with the estimate) a problem whose float64 reference cannot fit in memory."""
    shape = f"{prob.batch}x{prob.heads}x{prob.nq}x{prob.nk}x{prob.head_dim}"
    check_memory(reference_peak_bytes(prob), f"the float64 reference of {shape}")
