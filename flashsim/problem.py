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
from .config import SUPPORTED_HEAD_DIMS, SUPPORTED_PV_ACCUM, SUPPORTED_QUANT, KernelConfig, pv_accums
from .constants import FP8_F16_KEYS
from .masking import Window, key_range
from .settings import EngineOptions

LOG2E = 1.4426950408889634  # log2(e) in float64
GRID_YZ_MAX = 65535  # CUDA grid y (heads) and z (batch) limits
INT32_MAX = 2**31 - 1  # the kernel takes nq, nk as int and computes row indices in int
LAYOUTS = ("bhnd", "bnhd")  # (B, H, N, d) as torch SDPA; (B, N, H, d) as flash_attn
DTYPES = {"float16": "f16", "bfloat16": "bf16"}  # input dtype name -> KernelConfig.dtype


@dataclass(frozen=True)
class Options:
    """The options of one attention call, checked and with defaults filled in (``resolve_options``): what the
    emulator and the GPU runner both run with, and part of the GPU runner's cache keys (hashable)."""

    causal: bool = False
    pv_accum: str = "f32"
    config: KernelConfig | None = None
    softmax_scale: float | None = None
    window_size: tuple = (-1, -1)  # FlashAttention-2's (left, right), -1 unbounded; causal has right = 0
    softcap: float = 0.0  # 0: off
    layout: str = "bhnd"
    quant: str = "none"  # flashsim.config.SUPPORTED_QUANT: "none", "int8", "int8-fp8" or "nvfp4"

    @property
    def local(self) -> bool:
        """A sliding window beyond what causal masks: the kernel is built with window bounds (config.local)."""
        left, right = self.window_size
        return left >= 0 or (right >= 0 and not self.causal)

    def kernel_config(self, arch: str, head_dim: int, dtype: str, **tiling) -> KernelConfig:
        """The arch's default KernelConfig for these options, head dim and element type ("f16" / "bf16"); ``tiling``
        (warps, m_tiles, kv_tile, stages) overrides the default tiling. The one place options become a config."""
        return KernelConfig.default(
            arch,
            head_dim=head_dim,
            causal=self.causal,
            pv_accum=self.pv_accum,
            dtype=dtype,
            local=self.local,
            softcap=self.softcap > 0,
            layout=self.layout,
            quant=self.quant,
            **tiling,
        )


@dataclass(frozen=True)
class Problem:
    batch: int
    heads: int  # query heads Hq
    heads_kv: int  # key / value heads Hkv (Hq % Hkv == 0; each serves Hq / Hkv query heads)
    nq: int
    nk: int
    head_dim: int
    config: KernelConfig
    arch: str
    softmax_scale: np.float32  # the score scale, as the kernel's float32
    scale_log2: np.float32  # what scores are multiplied by inside ex2: softmax_scale (or softcap) * log2(e)
    lse_scale: np.float32  # LSE = lse_scale * m + ln(l): softmax_scale, or softcap with soft-capping
    cap_scale: np.float32  # softmax_scale / softcap (scores are tanh(q.k * cap_scale)); 0 without softcap
    window: Window | None  # sliding window in kernel form (config.local), else None
    layout: str = "bhnd"

    @property
    def q_blocks(self) -> int:
        return -(-self.nq // self.config.block_m)

    @property
    def group(self) -> int:
        """Query heads per key / value head."""
        return self.heads // self.heads_kv

    def per_query_head(self, x: np.ndarray) -> np.ndarray:
        """``x`` (B, Hkv, ...) with each key / value head repeated to the query heads it serves (B, Hq, ...)."""
        return np.repeat(x, self.group, axis=1) if self.group > 1 else x

    def kv_tile_range(self) -> tuple[np.ndarray, np.ndarray]:
        """(first tile, number of tiles) each query block visits, (q_blocks,) int each: the kernel's loop bounds,
        causal and window skipping included."""
        bm, bc = self.config.block_m, self.config.kv_tile
        first, end = key_range(np.arange(self.q_blocks) * bm, bm, self.nq, self.nk, self.config.causal, self.window)
        t0 = first // bc
        return t0, np.maximum(0, -(-end // bc) - t0)

    def kv_span(self) -> int:
        """KV tiles that K and V must be padded to (at least 1): the end of the furthest tile any block visits."""
        first, n = self.kv_tile_range()
        return max(int((first + n).max(initial=0)), 1)


def scales(softmax_scale, head_dim: int, softcap: float = 0.0):
    """(softmax_scale, scale_log2, lse_scale, cap_scale) as float32, the values the kernel is launched with.

    ``softmax_scale``: None (1/sqrt(head_dim)) or a real number (not a bool, not a string). It is checked after
    rounding to float32, as the kernel receives it: 1e-46 (0 in f32) and 1e39 (inf in f32) are refused, and so is
    a scale whose scale * log2(e) overflows f32. With ``softcap`` > 0 (FlashAttention-2's rule) the scores are
    c * tanh(s / c) with s = softmax_scale * q.k: the kernel computes t = tanh(q.k * cap_scale), cap_scale =
    softmax_scale / c rounded once from the float32 scale and cap, and runs the softmax on c * t (scale_log2 =
    c * log2(e), lse_scale = c)."""
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
    if not softcap:
        if not np.isfinite(s_log2):
            raise ValueError(f"softmax_scale={softmax_scale!r} is too large: softmax_scale * log2(e) overflows float32")
        return s32, s_log2, s32, np.float32(0.0)
    with np.errstate(over="ignore", under="ignore"):
        c32 = np.float32(softcap)
        c_log2 = np.float32(float(c32) * LOG2E)
        cap = np.float32(float(s32) / float(c32)) if c32 > 0 else np.float32(np.inf)
    if not (np.isfinite(c32) and c32 > 0 and np.isfinite(c_log2)):
        raise ValueError(
            f"softcap={softcap!r} must be a positive finite float32 whose softcap * log2(e) is finite "
            f"(it is {float(c32)!r} as the kernel's float32)"
        )
    if not (np.isfinite(cap) and cap > 0):
        raise ValueError(
            f"softmax_scale / softcap = {s} / {softcap!r} is {float(cap)!r} as a float32: choose "
            "values whose ratio is a normal float32"
        )
    return s32, c_log2, c32, cap


def _shape_of(x, name):
    shape = getattr(x, "shape", None)
    if shape is None:
        raise ValueError(f"{name} must be an array of shape (B, H, N, d), got {type(x).__name__}")
    return tuple(int(s) for s in shape)


def _dtype_name(x) -> str:
    dt = getattr(x, "dtype", None)
    return str(dt).replace("torch.", "")


def _is_int(x) -> bool:
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def _window_value(window_size, causal: bool) -> tuple[int, int]:
    """``window_size`` as (left, right) ints, causal's right bound applied (ValueError naming the argument)."""
    if window_size is None:
        window_size = (-1, -1)
    if (
        isinstance(window_size, (str, bytes))
        or not hasattr(window_size, "__len__")
        or len(window_size) != 2
        or not all(_is_int(w) for w in window_size)
    ):
        raise ValueError(f"window_size must be a pair of ints (left, right), -1 for unbounded, got {window_size!r}")
    left, right = (int(w) for w in window_size)
    if left < -1 or right < -1:
        raise ValueError(f"window_size values must be >= -1 (-1: unbounded), got {window_size!r}")
    if causal:
        if right > 0:
            raise ValueError(
                f"window_size={window_size!r} with causal=True: a causal window's right bound is 0 "
                "(pass right 0 or -1, or causal=False)"
            )
        right = 0
    return left, right


def _softcap_value(softcap) -> float:
    if softcap is None:
        return 0.0
    if isinstance(softcap, (bool, np.bool_)) or not (
        isinstance(softcap, numbers.Real)
        or (isinstance(softcap, np.ndarray) and softcap.ndim == 0 and softcap.dtype.kind in "iuf")
    ):
        raise TypeError(f"softcap must be a real number (0 for none), got {type(softcap).__name__} {softcap!r}")
    value = float(softcap)
    if not (value >= 0) or not math.isfinite(value):
        raise ValueError(f"softcap must be a finite number >= 0 (0: no soft-capping), got {softcap!r}")
    return value


def _quant_value(quant) -> str | None:
    """``quant`` checked (None stays None: "not given"); ValueError naming it for anything but SUPPORTED_QUANT."""
    if quant is None:
        return None
    if not isinstance(quant, str) or quant not in SUPPORTED_QUANT:
        raise ValueError(f"quant must be one of {SUPPORTED_QUANT}, got {quant!r}")
    return quant


def resolve_options(
    causal=None, pv_accum=None, config=None, softmax_scale=None, window_size=None, softcap=None, layout=None, quant=None
) -> Options:
    """The Options of a call with the defaults filled in, the one rule for every caller (prepare, and the GPU
    runner's fast paths before their cache keys): ``causal`` a bool or None (TypeError otherwise), ``pv_accum`` one
    of SUPPORTED_PV_ACCUM or None; None means "not given": the config's value, or False / "f32" without a config;
    given values must agree with ``config`` (ValueError naming both), and so must the window (config.local) and the
    soft-capping (config.softcap). ``softmax_scale``: None, or a real number (TypeError otherwise; its value is
    checked by ``scales``), returned as a float. ``window_size`` (left, right) ints >= -1 (None: (-1, -1)),
    right 0 under causal; ``softcap`` a real >= 0 (None: 0); ``layout`` "bhnd" (default) or "bnhd"; ``quant``
    one of SUPPORTED_QUANT (None: the config's, else "none"), not with softcap."""
    if causal is not None and not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__} {causal!r}")
    if pv_accum is not None and (not isinstance(pv_accum, str) or pv_accum not in SUPPORTED_PV_ACCUM):
        raise ValueError(f"pv_accum must be one of {SUPPORTED_PV_ACCUM}, got {pv_accum!r}")
    if layout is None:
        layout = "bhnd"
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    softcap = _softcap_value(softcap)
    quant = _quant_value(quant)
    if config is not None:
        if not isinstance(config, KernelConfig):
            raise ValueError(f"config must be a flashsim.KernelConfig, got {type(config).__name__}")
        if causal is not None and bool(causal) != config.causal:
            raise ValueError(
                f"causal={bool(causal)} contradicts config.causal={config.causal} "
                "(leave causal out, or pass the config's value)"
            )
        if pv_accum is not None and pv_accum != config.pv_accum:
            raise ValueError(
                f"pv_accum={pv_accum!r} contradicts config.pv_accum={config.pv_accum!r} "
                "(leave pv_accum out, or pass the config's value)"
            )
        if quant is not None and quant != config.quant:
            raise ValueError(
                f"quant={quant!r} contradicts config.quant={config.quant!r} "
                "(leave quant out, or pass the config's value)"
            )
        causal, pv_accum, quant = config.causal, config.pv_accum, config.quant
    else:
        causal = False if causal is None else bool(causal)
        pv_accum = "f32" if pv_accum is None else pv_accum
        quant = "none" if quant is None else quant
    if quant != "none" and softcap > 0:
        raise ValueError(
            f"quant={quant!r} does not combine with softcap={softcap!r}: K is smoothed by its mean over "
            "tokens, a per-row shift of the scores that softmax ignores and softcap's tanh does not"
        )
    opts = Options(
        causal,
        pv_accum,
        config,
        _scale_value(softmax_scale),
        _window_value(window_size, causal),
        softcap,
        layout,
        quant,
    )
    if config is not None:
        if opts.local != config.local:
            raise ValueError(
                f"window_size={opts.window_size} contradicts config.local={config.local} (a window "
                "beyond causal needs a config built with local=True, and only then)"
            )
        if (softcap > 0) != config.softcap:
            raise ValueError(f"softcap={softcap!r} contradicts config.softcap={config.softcap}")
        if layout != config.layout:
            raise ValueError(
                f"layout={layout!r} contradicts config.layout={config.layout!r} (the kernel is built for one layout)"
            )
    return opts


def _scale_value(softmax_scale) -> float | None:
    """``softmax_scale`` as a float (None stays None); TypeError for anything but a real number (bools and strings
    included). Its value is checked by ``scales``, after rounding to float32."""
    if softmax_scale is None:
        return None
    if isinstance(softmax_scale, (bool, np.bool_)) or not (
        isinstance(softmax_scale, numbers.Real)
        or (isinstance(softmax_scale, np.ndarray) and softmax_scale.ndim == 0 and softmax_scale.dtype.kind in "iuf")
    ):
        raise TypeError(
            f"softmax_scale must be a real number (or None for 1/sqrt(d)), "
            f"got {type(softmax_scale).__name__} {softmax_scale!r}"
        )
    return float(softmax_scale)


def to_bhnd(x, layout: str):
    """(B, H, N, d) view of ``x`` given in ``layout`` (a transposed view for "bnhd"; numpy, JAX or torch)."""
    return x if layout == "bhnd" else x.transpose(0, 2, 1, 3) if not hasattr(x, "permute") else x.permute(0, 2, 1, 3)


def dims(shape, layout: str) -> tuple[int, int, int, int]:
    """(B, H, N, d) of a 4-d shape in ``layout``."""
    b, x, y, d = shape
    return (b, x, y, d) if layout == "bhnd" else (b, y, x, d)


def refuse_warp_split(config: KernelConfig, call: str) -> None:
    """ValueError naming ``call`` when it gets a warp_split configuration, which only a KV-cache decode runs (a
    block's warps splitting each row's keys: flashsim.attention_with_kvcache)."""
    if config.warp_split > 1:
        raise ValueError(
            f"{call} got config.warp_split={config.warp_split}, which splits each row's keys over a block's warps: a "
            "KV-cache decode configuration (flashsim.attention_with_kvcache); pass a config without warp_split"
        )


def prepare(q, k, v, opts: Options | None = None, *, arch="sm_90", **options) -> Problem:
    """Validate q, k, v and the options; return the Problem both executions run.

    q (B, Hq, Nq, d), k and v (B, Hkv, Nk, d) with Hq % Hkv == 0 (layout "bnhd": (B, N, H, d)); all float16 or all
    bfloat16. ``opts``: resolved Options, or the keyword ``options`` of ``resolve_options`` (causal, pv_accum,
    config, softmax_scale, window_size, softcap, layout, quant). ``config`` (a KernelConfig) fixes the tiling; its
    head_dim and dtype must be the inputs', and options given here must agree with it. The configuration must fit
    the arch's shared memory per block (the GPU could not launch it).
    """
    arch_name = get_arch(arch).name
    if opts is None:
        opts = resolve_options(**options)
    elif options:
        raise TypeError(f"prepare: pass Options or keyword options, not both ({', '.join(options)})")
    layout = opts.layout
    form = "(B, H, N, d)" if layout == "bhnd" else "(B, N, H, d)"
    shapes, dtypes = {}, {}
    for name, x in (("q", q), ("k", k), ("v", v)):
        shape = _shape_of(x, name)
        if len(shape) != 4:
            raise ValueError(f"{name} must have 4 dimensions {form} (layout={layout!r}), got shape {shape}")
        dt = getattr(x, "dtype", None)
        if isinstance(dt, np.dtype) and dt.kind == "f" and dt.itemsize == 2 and not dt.isnative:
            raise ValueError(
                f"{name} is float16 in the other byte order ({dt.str}); the kernel reads native "
                f"float16 bits: pass {name}.astype(np.float16)"
            )
        if _dtype_name(x) not in DTYPES:
            raise ValueError(f"{name} must be float16 or bfloat16, got {_dtype_name(x)} (nothing is cast silently)")
        shapes[name], dtypes[name] = dims(shape, layout), _dtype_name(x)
    if len(set(dtypes.values())) != 1:
        raise ValueError(
            f"q, k and v must have one dtype, got q {dtypes['q']}, k {dtypes['k']}, v {dtypes['v']} "
            "(nothing is cast silently)"
        )
    dtype = DTYPES[dtypes["q"]]
    (b, h, nq, d), (bk, hk, nk, dk), _ = shapes["q"], shapes["k"], shapes["v"]
    if shapes["k"] != shapes["v"]:
        raise ValueError(f"k and v must have the same shape, got k {shapes['k']} and v {shapes['v']} (as {form})")
    if (bk, dk) != (b, d):
        raise ValueError(f"k must be {form} with B={b} and d={d} of q, got {_shape_of(k, 'k')}")
    if nq == 0 or nk == 0:
        raise ValueError(f"sequence lengths must be >= 1, got Nq={nq}, Nk={nk}")
    if b == 0 or h == 0 or hk == 0:
        raise ValueError(f"batch and heads must be >= 1, got B={b}, Hq={h}, Hkv={hk}")
    if h % hk:
        raise ValueError(
            f"the query heads Hq={h} must be a multiple of the key/value heads Hkv={hk} (MQA / GQA: "
            "each k/v head serves Hq / Hkv query heads)"
        )
    if d not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dim d={d} is not supported by the kernel: it must be a multiple of 32 from 32 to 256")
    if h > GRID_YZ_MAX or b > GRID_YZ_MAX:
        raise ValueError(f"heads H={h} and batch B={b} must each be <= {GRID_YZ_MAX} (the CUDA grid's y and z)")
    if opts.quant in ("int8-fp8", "nvfp4") and (dtype != "f16" or opts.pv_accum not in pv_accums(dtype, opts.quant)):
        raise ValueError(
            f"quant={opts.quant!r} runs P@V in FP8 on float16 inputs with pv_accum in "
            f"{pv_accums('f16', opts.quant)} (f32, or f16 over {FP8_F16_KEYS} keys at a time then f32; "
            f"an f16 O over the whole row has no overflow bound): got {dtypes['q']} inputs and "
            f"pv_accum={opts.pv_accum!r} (use quant='int8' for the others)"
        )
    if opts.pv_accum not in pv_accums(dtype):
        raise ValueError(
            f"pv_accum={opts.pv_accum!r} needs float16 inputs: mma.sync has no bf16 accumulator, so "
            "bfloat16 runs P@V with pv_accum='f32'"
        )
    config = opts.config
    if config is None:
        config = opts.kernel_config(arch_name, d, dtype)
    elif config.head_dim != d:
        raise ValueError(f"config.head_dim={config.head_dim} does not match the inputs' head dim d={d}")
    elif config.dtype != dtype:
        raise ValueError(f"config.dtype={config.dtype!r} does not match the inputs' dtype {dtypes['q']}")
    config.check_arch(arch_name)  # quant "nvfp4": sm_120 only
    refuse_warp_split(config, "flashsim.attention")
    cap = get_arch(arch_name).smem_per_block_optin
    if config.smem_bytes > cap:
        from .errors import UnsupportedConfig  # a ValueError; imported here (flashsim.gpu imports this module)

        raise UnsupportedConfig(
            f"the configuration needs {config.smem_bytes} B of shared memory per block but "
            f"{arch_name} allows at most {cap} B ({config.describe()})"
        )
    if nq + nk + config.block_m > INT32_MAX // 2:
        raise ValueError(
            f"Nq={nq} and Nk={nk} are too long: Nq + Nk + {config.block_m} must be < 2^30 "
            "(the kernel computes row and window positions in 32-bit ints)"
        )
    s32, s_log2, lse_scale, cap_scale = scales(opts.softmax_scale, d, opts.softcap)
    window = Window.from_user(opts.window_size, nq, nk) if config.local else None
    return Problem(b, h, hk, nq, nk, d, config, arch_name, s32, s_log2, lse_scale, cap_scale, window, layout)


# ---- memory: refuse a problem this machine cannot hold, before allocating it -----------------------------------


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


def memory_limit(max_bytes: int | None = None) -> tuple[int | None, str]:
    """(bytes, where that number comes from): ``max_bytes`` if given, else EngineOptions' default
    ($FLASHSIM_MAX_BYTES, flashsim.settings), else this machine's physical memory (or the container's cgroup limit,
    if smaller); (None, ...) where none can be read."""
    if max_bytes is None:
        max_bytes = EngineOptions.from_environment().max_bytes
    if max_bytes is not None:
        return int(max_bytes), "max_bytes (EngineOptions / FLASHSIM_MAX_BYTES)"
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        phys = None
    cg = _cgroup_limit()
    if cg is not None and (phys is None or cg < phys):
        return cg, "the container's memory limit"
    return (phys, "this machine's memory") if phys else (None, "unknown")


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def check_memory(need: int, what: str, max_bytes: int | None = None) -> None:
    """ValueError (one line, with the estimate) if ``need`` bytes exceed the memory limit (``memory_limit``)."""
    limit, source = memory_limit(max_bytes)
    if limit is not None and need > limit:
        raise ValueError(
            f"{what} would need about {_gib(need)} of memory ({need} B, estimated) but {source} is "
            f"{_gib(limit)}: use fewer heads/batch or shorter sequences (EngineOptions.max_bytes, whose default is "
            "$FLASHSIM_MAX_BYTES, overrides)"
        )


def check_reference_memory(prob: Problem, max_bytes: int | None = None) -> None:
    """Refuse (ValueError with the estimate) a problem whose float64 reference cannot fit in memory."""
    check_memory(reference_peak_bytes(prob), f"the float64 reference of {shape_text(prob)}", max_bytes)


def shape_text(prob: Problem) -> str:
    """B x H x Nq x Nk x d, for messages."""
    return f"{prob.batch}x{prob.heads}x{prob.nq}x{prob.nk}x{prob.head_dim}"
