"""The serving problem: argument checks and derived scalars shared by the emulator and the GPU runner.

``prepare_kvcache`` (FlashAttention-2's ``flash_attn_with_kvcache``) and ``prepare_varlen`` (``flash_attn_varlen``)
check shapes, dtypes and options and return a ``ServingProblem``: what both executions run, hashable (the GPU
runner's plan cache key), index values apart. ``SequenceIndex`` holds those values (cache_seqlens, block_table,
cu_seqlens) as host arrays; ``check_indices`` checks them (flashsim.serving.indices: the rules the GPU's check kernel
applies on the device, so that GPU index tensors are never copied to the host), naming the argument. The kernel
clamps every index it reads as well, so that even an unchecked or bad call never reads out of bounds.

Decisions (each checked here and documented in docs/serving.md):
* Layout: FlashAttention-2's (B, N, H, d) (``layout`` None or "bnhd"); lse (B, Hq, Nq) for a KV cache, (Hq, total_q)
  for a variable-length batch.
* quant: "none" only (the quantization pass smooths K by its mean over one dense sequence).
* Page sizes: powers of two from 16 to 256 (vLLM's 16 up to FlashAttention-2's 256): the kernel splits a key index
  into page and slot with a shift and a mask.
* GQA packing: on for a KV cache whenever Hq > Hkv (each K / V tile is then read once per group); varlen is not
  packed (its sequences are prefill-long).
* num_splits: a KV cache only (varlen has no such argument in FlashAttention-2's contract); 1 is the single pass,
  None FlashAttention-2's heuristic (flashsim.serving.splits) over the key tiles of ``max_seqlen_k`` (the longest
  row the caller states, FlashAttention's name for it) or, without it, of the cache's capacity: never of the lengths
  themselves, which may live on the GPU (reading them back would wait for it); an explicit count at most the key
  tiles of the cache's capacity. A row longer than the stated max_seqlen_k is an index error.
* Empty sequences: a KV-cache row with cache_seqlens 0, or a varlen sequence with no keys, has O = 0 and
  LSE = +inf; a varlen sequence with no query rows has no output rows.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .. import tuning
from ..arch import get_arch
from ..config import SUPPORTED_HEAD_DIMS, KernelConfig, pv_accums
from ..errors import UnsupportedConfig
from ..masking import Window
from ..problem import DTYPES, GRID_YZ_MAX, INT32_MAX, Options, refuse_warp_split, resolve_options, scales
from ..tuning import (
    DECODE_KV_TILES,
    WARP_SPLIT_MAX,
    WARP_SPLIT_MIN_TILE,
    WARP_SPLIT_PAGED_MIN_FILL,
    WARP_SPLIT_PAGED_STAGES,
    WARP_SPLIT_PAGED_WARPS,
    decode_tiling,
)
from .indices import index_error, index_flag
from .splits import MAX_SPLITS, choose_splits, resident_slots, sm_count_of

PAGE_SIZES = (16, 32, 64, 128, 256)
KINDS = ("kvcache", "varlen")


@dataclass(frozen=True)
class ServingProblem:
    """One serving call's shapes, options and kernel configuration (index values apart: ``SequenceIndex``).

    nq_cap / nk_cap: the rows and keys one sequence can have (KV cache: Nq and the cache's capacity, N_cache or
    max_pages * page_size; varlen: max_seqlen_q and max_seqlen_k); q_total / k_total: the rows of q and of the K / V
    arrays (B * Nq and B * N_cache or num_pages * page_size; varlen total_q and total_k); page_size 0 without pages;
    seqlens: cache_seqlens given (else every KV-cache row holds nk_cap keys); max_seqlen_k: the longest row the
    call states (a KV cache's max_seqlen_k, nk_cap when not stated; varlen: nk_cap)."""

    kind: str
    batch: int
    heads: int
    heads_kv: int
    head_dim: int
    nq_cap: int
    nk_cap: int
    q_total: int
    k_total: int
    page_size: int
    num_pages: int
    max_pages: int
    seqlens: bool
    max_seqlen_k: int
    num_splits: int
    config: KernelConfig
    arch: str
    softmax_scale: np.float32
    scale_log2: np.float32
    lse_scale: np.float32
    cap_scale: np.float32
    window: Window | None

    @property
    def group(self) -> int:
        return self.heads // self.heads_kv

    @property
    def rows_cap(self) -> int:
        """Rows of one sequence per grid head: nq_cap, times the group with GQA packing."""
        return self.nq_cap * self.group if self.config.pack_gqa else self.nq_cap

    @property
    def grid_heads(self) -> int:
        """The grid's y: K / V heads with GQA packing, else query heads."""
        return self.heads_kv if self.config.pack_gqa else self.heads

    @property
    def q_blocks(self) -> int:
        return -(-self.rows_cap // self.config.block_m)

    @property
    def grid(self) -> tuple[int, int, int]:
        """flash_fwd's grid: (q blocks, grid heads, batch x num_splits)."""
        return (self.q_blocks, self.grid_heads, self.batch * self.num_splits)

    @property
    def seqlen_limit(self) -> int:
        """The most keys a KV-cache row may have: the capacity, or the smaller max_seqlen_k the call states."""
        return min(self.nk_cap, self.max_seqlen_k)

    @property
    def key_tiles(self) -> int:
        """KV tiles of the longest row a sequence can have."""
        return -(-self.nk_cap // self.config.kv_tile)

    @property
    def page_shift(self) -> int:
        return int(self.page_size).bit_length() - 1 if self.page_size else 0

    @property
    def parts(self) -> int:
        """The parts each row's keys are split into: num_splits across blocks, times the warps of a block that split
        its keys (KernelConfig.warp_split); more than 1: the parts merged by the combine's arithmetic."""
        return self.num_splits * self.config.warp_split

    @property
    def part_rows(self) -> int:
        """Rows of the split-KV partial outputs: B * Nq * Hq, q's (b, i, h) order."""
        return self.batch * self.nq_cap * self.heads

    @property
    def o_shape(self) -> tuple:
        if self.kind == "kvcache":
            return (self.batch, self.nq_cap, self.heads, self.head_dim)
        return (self.q_total, self.heads, self.head_dim)

    @property
    def lse_shape(self) -> tuple:
        return (self.batch, self.heads, self.nq_cap) if self.kind == "kvcache" else (self.heads, self.q_total)

    @property
    def lse_strides(self) -> tuple[int, int]:
        """lse's (batch, head) element strides; rows are contiguous."""
        if self.kind == "kvcache":
            return self.heads * self.nq_cap, self.nq_cap
        return 0, self.q_total

    def describe(self) -> str:
        shape = f"B={self.batch} Hq={self.heads} Hkv={self.heads_kv} d={self.head_dim}"
        if self.kind == "kvcache":
            cache = (
                f"{self.num_pages} pages of {self.page_size} ({self.max_pages} per row)"
                if self.page_size
                else f"N_cache={self.nk_cap}"
            )
            return f"KV cache {shape} Nq={self.nq_cap} {cache}, {self.num_splits} split(s)"
        return f"varlen {shape} total_q={self.q_total} total_k={self.k_total}"


@dataclass(frozen=True, eq=False)
class SequenceIndex:
    """The index arrays' values on the host (numpy int32), each None where the call has none."""

    cache_seqlens: np.ndarray | None = None
    block_table: np.ndarray | None = None
    cu_seqlens_q: np.ndarray | None = None
    cu_seqlens_k: np.ndarray | None = None

    def lengths(self, prob: ServingProblem) -> tuple[np.ndarray, ...]:
        """(q_start, nq, k_start, nk) per sequence, int64 (B,): the counts every block of the sequence reads."""
        b = prob.batch
        if prob.kind == "varlen":
            cq, ck = (np.asarray(c, np.int64) for c in (self.cu_seqlens_q, self.cu_seqlens_k))
            return cq[:-1], np.diff(cq), ck[:-1], np.diff(ck)
        zeros = np.zeros(b, np.int64)
        nk = np.asarray(self.cache_seqlens, np.int64) if self.cache_seqlens is not None else zeros + prob.nk_cap
        return zeros, zeros + prob.nq_cap, zeros, nk


# -- small checks ------------------------------------------------------------------------------------------


def _shape(x, name: str) -> tuple:
    shape = getattr(x, "shape", None)
    if shape is None:
        raise ValueError(f"{name} must be an array, got {type(x).__name__}")
    return tuple(int(s) for s in shape)


def dtype_name(x) -> str:
    """The dtype of a numpy / torch / cupy / JAX array as a plain name ("float16", "int32", ...)."""
    return str(getattr(x, "dtype", "")).replace("torch.", "")


def _is_int(x) -> bool:
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def _element_dtype(arrays: dict) -> str:
    """The one element type ("f16" / "bf16") of the named arrays; ValueError naming the odd one."""
    names = {name: dtype_name(x) for name, x in arrays.items()}
    for name, dt in names.items():
        if dt not in DTYPES:
            raise ValueError(f"{name} must be float16 or bfloat16, got {dt} (nothing is cast silently)")
    if len(set(names.values())) != 1:
        got = ", ".join(f"{n} {d}" for n, d in names.items())
        raise ValueError(f"{', '.join(names)} must have one dtype, got {got} (nothing is cast silently)")
    return DTYPES[next(iter(names.values()))]


def check_index_array(x, name: str, shape: tuple) -> None:
    """An index argument: int32 of ``shape`` (ValueError naming it otherwise)."""
    got = _shape(x, name)
    if dtype_name(x) != "int32":
        raise ValueError(f"{name} must be int32, got {dtype_name(x) or type(x).__name__} (nothing is cast silently)")
    if got != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {got}")


def serving_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant) -> Options:
    """The serving calls' options (flashsim.problem.resolve_options), their layout (B, N, H, d) by default: what
    the emulator's and the GPU's attention_with_kvcache / attention_varlen and verify --serving all resolve.
    Resolved once per distinct (hashable) set of arguments: a decode loop repeats them on every call, and Options
    is immutable; keyed by the arguments' types too, so that causal=1 is not taken for causal=True (resolve_options
    refuses it)."""
    args = (causal, pv_accum, config, softmax_scale, window_size, softcap, layout or "bnhd", quant)
    key = (args, tuple(type(a) for a in args))
    try:
        opts = _RESOLVED.get(key)
    except TypeError:  # an unhashable argument (a list for window_size): resolved every time
        return resolve_options(*args)
    if opts is None:
        opts = resolve_options(*args)
        if len(_RESOLVED) >= 256:
            _RESOLVED.clear()
        _RESOLVED[key] = opts
    return opts


_RESOLVED: dict = {}  # serving_options' arguments and their types -> Options


def _serving_options(opts: Options) -> None:
    if opts.layout not in ("bnhd",):
        raise ValueError(
            f"layout={opts.layout!r}: the serving calls take FlashAttention-2's (B, N, H, d) rows; pass layout=None "
            "or 'bnhd'"
        )
    if opts.quant != "none":
        raise ValueError(
            f"quant={opts.quant!r} does not combine with a KV cache or a variable-length batch: the quantization "
            "pass (kernel/quantize.cu) smooths K by its mean over one dense sequence"
        )


def _config(opts: Options, arch: str, d: int, dtype: str, rows: int, *, pack: bool, paged: bool, decode: bool):
    """The serving KernelConfig: the caller's tiling (opts.config) or, by default, the decode tiling for ``rows``
    packed rows (flashsim.tuning.decode_tiling) where ``decode``, else the arch's prefill tiling."""
    switches = dict(seqlens=True, paged=paged, pack_gqa=pack, split=False)
    if opts.config is not None:
        given = {k: getattr(opts.config, k) for k in switches}
        if any(given.values()) and {**given, "split": False} != switches:
            raise ValueError(
                f"config's serving switches {given} contradict the call (seqlens=True, paged={paged}, "
                f"pack_gqa={pack}; split follows num_splits): leave them off in config, or pass the call's"
            )
        return opts.config.with_(**switches)
    tiling = decode_tiling(arch, d, rows) if decode else None
    over = dict(zip(("warps", "m_tiles", "kv_tile", "stages"), tiling)) if tiling else {}
    return opts.kernel_config(arch, d, dtype, **over, **switches)


def _fits(config: KernelConfig, arch: str) -> None:
    cap = get_arch(arch).smem_per_block_optin
    if config.smem_bytes > cap:
        raise UnsupportedConfig(
            f"the configuration needs {config.smem_bytes} B of shared memory per block but {arch} allows at most "
            f"{cap} B ({config.describe()})"
        )


def _check_common(h: int, hk: int, d: int, dtype: str, opts: Options) -> None:
    if h == 0 or hk == 0:
        raise ValueError(f"heads must be >= 1, got Hq={h}, Hkv={hk}")
    if h % hk:
        raise ValueError(
            f"the query heads Hq={h} must be a multiple of the key/value heads Hkv={hk} (MQA / GQA: each k/v head "
            "serves Hq / Hkv query heads)"
        )
    if d not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dim d={d} is not supported by the kernel: it must be a multiple of 32 from 32 to 256")
    if h > GRID_YZ_MAX:
        raise ValueError(f"heads Hq={h} must be <= {GRID_YZ_MAX} (the CUDA grid's y)")
    if opts.pv_accum not in pv_accums(dtype):
        raise ValueError(
            f"pv_accum={opts.pv_accum!r} needs float16 inputs: mma.sync has no bf16 accumulator, so bfloat16 runs "
            "P@V with pv_accum='f32'"
        )


def _max_seqlen_k(value, nk_cap: int, page_size: int) -> int:
    """A KV cache's stated max_seqlen_k (None: the capacity), checked."""
    if value is None:
        return nk_cap
    if not _is_int(value) or not 0 <= int(value) <= nk_cap:
        holds = f"max_pages * page_size = {nk_cap}" if page_size else f"N_cache = {nk_cap}"
        raise ValueError(
            f"max_seqlen_k must be None or an int in 0..{nk_cap} (the keys a row holds: {holds}), got {value!r}"
        )
    return int(value)


def _num_splits(num_splits, config: KernelConfig, arch: str, blocks: int, key_tiles: int, sm_count, stated) -> int:
    """num_splits checked, or (None) chosen over the key tiles of ``stated`` keys (never of the lengths' values)."""
    if num_splits is None:
        return choose_splits(config, arch, blocks, -(-stated // config.kv_tile), sm_count)
    if not _is_int(num_splits):
        raise ValueError(f"num_splits must be an int >= 1 or None (the heuristic), got {num_splits!r}")
    n = int(num_splits)
    top = min(MAX_SPLITS, max(key_tiles, 1))
    if not 1 <= n <= top:
        raise ValueError(
            f"num_splits={n} must be in 1..{top}: at least one split, at most the {key_tiles} KV tiles of "
            f"{config.kv_tile} keys the cache holds per row (and at most {MAX_SPLITS})"
        )
    return n


def warp_split_form(config: KernelConfig, arch: str, warps: int) -> KernelConfig | None:
    """A one-warp decode ``config`` as ``warps`` warps splitting each row group's keys inside one block: the widest
    of DECODE_KV_TILES whose rings fit a block of ``arch``, or None when none does."""
    for kv in DECODE_KV_TILES:
        wide = config.with_(warps=warps, warp_split=warps, kv_tile=kv, split=False)
        if wide.fits(arch):
            return wide
    return None


def paged_warp_split_form(config: KernelConfig, arch: str) -> KernelConfig | None:
    """A one-warp paged decode ``config`` in the form flashsim.tuning's paged rule takes: WARP_SPLIT_PAGED_WARPS
    warps of WARP_SPLIT_PAGED_STAGES-stage rings (warp_split_form's widest kv tile), or None when none fits."""
    return warp_split_form(config.with_(stages=WARP_SPLIT_PAGED_STAGES), arch, WARP_SPLIT_PAGED_WARPS)


def warp_split_decode(config: KernelConfig, arch: str, splits: int, blocks: int, sm_count=None) -> KernelConfig | None:
    """The warp_split form of a one-warp decode ``config`` the heuristic gave ``splits`` splits over ``blocks`` row
    groups, or None (flashsim.tuning's rule: 2 <= splits <= WARP_SPLIT_MAX; a contiguous cache as W = splits warps
    whose kv tile, the widest that fits, holds at least WARP_SPLIT_MIN_TILE elements; a paged cache as
    WARP_SPLIT_PAGED_WARPS warps of WARP_SPLIT_PAGED_STAGES-stage rings where the row groups are at least
    WARP_SPLIT_PAGED_MIN_FILL of the SMs; every row group's block resident at once on ``sm_count`` SMs)."""
    if config.warps != 1 or not 2 <= splits <= WARP_SPLIT_MAX:
        return None
    if config.paged:
        if blocks < WARP_SPLIT_PAGED_MIN_FILL * sm_count_of(arch, sm_count):
            return None
        wide = paged_warp_split_form(config, arch)
    else:
        wide = warp_split_form(config, arch, splits)
        if wide is not None and wide.kv_tile * wide.head_dim < WARP_SPLIT_MIN_TILE:
            return None
    return wide if wide is not None and blocks <= resident_slots(wide, arch, sm_count) else None


def _limits(nq_cap: int, nk_cap: int, block_m: int) -> None:
    if nq_cap + nk_cap + block_m > INT32_MAX // 2:
        raise ValueError(
            f"rows {nq_cap} and keys {nk_cap} per sequence are too many: their sum plus {block_m} must be < 2^30 "
            "(the kernel computes row and window positions in 32-bit ints)"
        )


# -- the two calls ---------------------------------------------------------------------------------------------


def prepare_kvcache(
    q,
    k_cache,
    v_cache,
    cache_seqlens=None,
    block_table=None,
    num_splits=None,
    *,
    opts: Options,
    arch="sm_90",
    sm_count=None,
    max_seqlen_k=None,
) -> ServingProblem:
    """Check a KV-cache call (shapes, dtypes, options) and return its ServingProblem.

    q (B, Nq, Hq, d); k_cache, v_cache (B, N_cache, Hkv, d), or with ``block_table`` (B, max_pages) int32 the pages
    (num_pages, page_size, Hkv, d); cache_seqlens (B,) int32 or None; num_splits an int or None (the heuristic, on
    ``sm_count`` SMs: default the arch's reference GPU) over the key tiles of ``max_seqlen_k`` (an int: the longest
    row the caller states, at most the capacity; None: the capacity). The index values are checked by
    ``check_indices`` (or the GPU's check kernel)."""
    arch_name = get_arch(arch).name
    _serving_options(opts)
    qs, ks, vs = _shape(q, "q"), _shape(k_cache, "k_cache"), _shape(v_cache, "v_cache")
    for name, s in (("q", qs), ("k_cache", ks), ("v_cache", vs)):
        if len(s) != 4:
            form = "(B, Nq, Hq, d)" if name == "q" else "(B, N_cache, Hkv, d) or pages (num_pages, page_size, Hkv, d)"
            raise ValueError(f"{name} must have 4 dimensions {form}, got shape {s}")
    dtype = _element_dtype({"q": q, "k_cache": k_cache, "v_cache": v_cache})
    if ks != vs:
        raise ValueError(f"k_cache and v_cache must have the same shape, got {ks} and {vs}")
    b, nq, h, d = qs
    if b == 0 or nq == 0:
        raise ValueError(f"q must have B >= 1 and Nq >= 1, got shape {qs}")
    _check_common(h, ks[2], d, dtype, opts)
    if ks[3] != d:
        raise ValueError(f"k_cache's head dim {ks[3]} differs from q's d={d}")
    hk = ks[2]
    if block_table is None:
        if ks[0] != b:
            raise ValueError(f"k_cache must be (B, N_cache, Hkv, d) with q's B={b}, got {ks}")
        if ks[1] == 0:
            raise ValueError(f"k_cache must hold at least one key per row (N_cache >= 1), got shape {ks}")
        page_size = num_pages = max_pages = 0
        nk_cap, k_total = ks[1], b * ks[1]
    else:
        num_pages, page_size = ks[0], ks[1]
        if page_size not in PAGE_SIZES:
            raise ValueError(
                f"page_size={page_size} (k_cache's second dimension with block_table) must be one of {PAGE_SIZES}: "
                "the kernel splits a key index into page and slot with a shift and a mask"
            )
        if num_pages == 0:
            raise ValueError(f"k_cache must hold at least one page, got shape {ks}")
        bt_shape = _shape(block_table, "block_table")
        if len(bt_shape) != 2 or bt_shape[0] != b or bt_shape[1] == 0:
            raise ValueError(f"block_table must be (B, max_pages) int32 with B={b} and max_pages >= 1, got {bt_shape}")
        check_index_array(block_table, "block_table", bt_shape)
        max_pages = bt_shape[1]
        nk_cap, k_total = max_pages * page_size, num_pages * page_size
    if cache_seqlens is not None:
        check_index_array(cache_seqlens, "cache_seqlens", (b,))
    if b > GRID_YZ_MAX:
        raise ValueError(f"batch B={b} must be <= {GRID_YZ_MAX} (the CUDA grid's z)")
    group = h // hk
    pack = group > 1
    rows = nq * group if pack else nq
    config = _config(opts, arch_name, d, dtype, rows, pack=pack, paged=block_table is not None, decode=True)
    _fits(config, arch_name)
    _limits(nq, nk_cap, config.block_m)
    heads_grid = hk if pack else h
    blocks = b * heads_grid * -(-rows // config.block_m)
    stated = _max_seqlen_k(max_seqlen_k, nk_cap, page_size)
    if config.warp_split > 1 and num_splits is None:  # the keys split inside the block only (S > 1: given)
        num_splits = 1
    n = _num_splits(num_splits, config, arch_name, blocks, -(-nk_cap // config.kv_tile), sm_count, stated)
    if n * config.warp_split > MAX_SPLITS:
        raise ValueError(
            f"num_splits={n} with warp_split={config.warp_split} makes {n * config.warp_split} parts a row; "
            f"flash_combine merges at most {MAX_SPLITS}"
        )
    if tuning.WARP_SPLIT_DECODE and opts.config is None and num_splits is None:
        wide = warp_split_decode(config, arch_name, n, blocks, sm_count)  # the splits inside one block a row group
        if wide is not None:
            config, n = wide, 1
    if b * n > GRID_YZ_MAX:
        raise ValueError(f"B * num_splits = {b} * {n} must be <= {GRID_YZ_MAX} (the CUDA grid's z)")
    config = config.with_(split=n > 1)
    return _problem(
        "kvcache",
        b,
        h,
        hk,
        d,
        nq,
        nk_cap,
        b * nq,
        k_total,
        page_size,
        num_pages,
        max_pages,
        cache_seqlens is not None,
        stated,
        n,
        config,
        arch_name,
        opts,
    )


def prepare_varlen(
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, *, opts: Options, arch="sm_90"
) -> ServingProblem:
    """Check a variable-length call and return its ServingProblem: q (total_q, Hq, d), k and v (total_k, Hkv, d),
    cu_seqlens_q / cu_seqlens_k (B + 1,) int32, max_seqlen_q / max_seqlen_k ints >= 0 (the longest sequence may be
    shorter; ``check_indices`` checks that none is longer)."""
    arch_name = get_arch(arch).name
    _serving_options(opts)
    qs, ks, vs = _shape(q, "q"), _shape(k, "k"), _shape(v, "v")
    for name, s in (("q", qs), ("k", ks), ("v", vs)):
        if len(s) != 3:
            form = "(total_q, Hq, d)" if name == "q" else "(total_k, Hkv, d)"
            raise ValueError(f"{name} must have 3 dimensions {form}, got shape {s}")
    dtype = _element_dtype({"q": q, "k": k, "v": v})
    if ks != vs:
        raise ValueError(f"k and v must have the same shape, got {ks} and {vs}")
    total_q, h, d = qs
    total_k, hk, dk = ks
    _check_common(h, hk, d, dtype, opts)
    if dk != d:
        raise ValueError(f"k's head dim {dk} differs from q's d={d}")
    cq = _shape(cu_seqlens_q, "cu_seqlens_q")
    if len(cq) != 1 or cq[0] < 2:
        raise ValueError(f"cu_seqlens_q must be (B + 1,) int32 with B >= 1, got shape {cq}")
    b = cq[0] - 1
    check_index_array(cu_seqlens_q, "cu_seqlens_q", (b + 1,))
    check_index_array(cu_seqlens_k, "cu_seqlens_k", (b + 1,))
    for name, value in (("max_seqlen_q", max_seqlen_q), ("max_seqlen_k", max_seqlen_k)):
        if not _is_int(value) or int(value) < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    max_q, max_k = int(max_seqlen_q), int(max_seqlen_k)
    if max_q > total_q or max_k > total_k:
        raise ValueError(
            f"max_seqlen_q={max_q} / max_seqlen_k={max_k} exceed the rows of q ({total_q}) / k ({total_k})"
        )
    if b > GRID_YZ_MAX:
        raise ValueError(f"batch B={b} must be <= {GRID_YZ_MAX} (the CUDA grid's z)")
    config = _config(opts, arch_name, d, dtype, max_q, pack=False, paged=False, decode=False)
    refuse_warp_split(config, "a variable-length batch")
    _fits(config, arch_name)
    _limits(max_q, max_k, config.block_m)
    return _problem(
        "varlen", b, h, hk, d, max_q, max_k, total_q, total_k, 0, 0, 0, False, max_k, 1, config, arch_name, opts
    )


def _problem(
    kind,
    b,
    h,
    hk,
    d,
    nq_cap,
    nk_cap,
    q_total,
    k_total,
    page_size,
    num_pages,
    max_pages,
    seqlens,
    max_seqlen_k,
    n,
    config,
    arch,
    opts,
) -> ServingProblem:
    s32, s_log2, lse_scale, cap_scale = scales(opts.softmax_scale, d, opts.softcap)
    window = Window.from_user(opts.window_size, nq_cap, nk_cap) if config.local else None
    return ServingProblem(
        kind,
        b,
        h,
        hk,
        d,
        nq_cap,
        nk_cap,
        q_total,
        k_total,
        page_size,
        num_pages,
        max_pages,
        seqlens,
        max_seqlen_k,
        n,
        config,
        arch,
        s32,
        s_log2,
        lse_scale,
        cap_scale,
        window,
    )


# -- index values ------------------------------------------------------------------------------------------------


def check_indices(prob: ServingProblem, index: SequenceIndex) -> None:
    """The index values against the problem (host numpy arrays): the ValueError of their first violation
    (flashsim.serving.indices: the rules the GPU's check kernel applies, in the same order)."""
    err = index_error(prob, *index_flag(prob, index))
    if err is not None:
        raise err


def index_of(cache_seqlens=None, block_table=None, cu_seqlens_q=None, cu_seqlens_k=None) -> SequenceIndex:
    """A SequenceIndex of host arrays (numpy, or anything np.asarray reads: the GPU runner hands in copies)."""
    conv = lambda x: None if x is None else np.ascontiguousarray(np.asarray(x), dtype=np.int32)  # noqa: E731
    return SequenceIndex(conv(cache_seqlens), conv(block_table), conv(cu_seqlens_q), conv(cu_seqlens_k))


def flops(prob: ServingProblem, index: SequenceIndex) -> float:
    """Floating-point operations of the attention proper (4 d per visible (row, key) pair and query head, causal
    and windows counted: flashsim.masking's rule), for throughput reports."""
    _, nq, _, nk = index.lengths(prob)
    win, causal = prob.window, prob.config.causal
    pairs = 0
    for rows, keys in zip(nq.tolist(), nk.tolist()):
        if rows <= 0 or keys <= 0:
            continue
        pos = np.arange(rows, dtype=np.int64) + keys - rows
        right = win.right if win is not None else (0 if causal else keys)
        left = win.left if win is not None else keys
        lo, hi = np.clip(pos - left, 0, keys), np.clip(pos + right + 1, 0, keys)
        pairs += int(np.maximum(hi - lo, 0).sum())
    return 4.0 * prob.head_dim * prob.heads * pairs
