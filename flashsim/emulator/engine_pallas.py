"""The JAX engine's fused path on a GPU: one Pallas kernel (Triton) runs every query block's whole KV loop.

Why it exists: the scan engine (engine_jax) runs each KV step as several XLA fusions plus the scan's gathers and
scatters of the state. Here the state (m, l, O) stays in registers across the KV loop and the operands are read
once per tile.

Measured (H200, N = 16384, d = 128, f32 P@V; benchmarks/experiments/jax_ptx/): bit-equal to the kernel in
every bit of O and LSE, 0.074 s end to end (149x the kernel's 0.500 ms; the kernel itself 67 ms) against the scan
engine's 0.276 s, after 6 s of Triton compilation. engine_jax.fused_choice takes it by default on one GPU
(``EngineOptions.jax_fused=False``: the scan).

The arithmetic is kernel_program's, unchanged: the body calls ``scores``, ``probabilities`` and ``accumulate``
traced for a fused Target (flashsim.numerics.target), where the three things Triton cannot do with a value (slice
it, gather from it, index it by a loop counter) take the forms it can: ``pieces`` splits, ``lookup`` loads the SFU
tables kept in device memory, and an mma chain writes its decoded operands into this program's scratch blocks and
reads them back one column of A / row of B per k (``xp.staged``, supplied here by ``_staging``; a broadcast over k
took 2.7x the instructions: benchmarks/experiments/jax_staged/). With ``Layout.inline_ptx`` (the default; EngineOptions'
pallas_inline_ptx) the compiled kernel runs what PTX defines exactly as single inline instructions (ieee32's f32
arithmetic, the chains' casts and f32 rounding) and stages each f16 element as one int64 word (``_packed``): 27.6
-> 14.0 thread instructions per emulated product in its static SASS (tools/fused_sass.py), 1.6x faster on the H200
and compiled in seconds instead of about 200 s (held equal to the portable routines by tests/test_engine_pallas.py).
The epilogue (kernel_program.epilogue) runs jitted on the same device, on the state the kernel leaves there.

Layout: one program per (head, ``Layout.rows`` query rows). A program's rows lie in one CUDA block (rows divide
block_m) and visit exactly that block's KV tiles (Problem.kv_tile_range): a tile outside a row's keys still changes
its state when V holds inf or NaN (0 * inf), as in the kernel, so the tile range is the CUDA block's, not the
row's. Rows are independent otherwise, so the program's height is free: it is chosen for Triton's registers.

Coverage (``unsupported`` says why; engine_jax then runs the scan engine): head dims that are powers of two
(Triton's tensors have power-of-two shapes: 32, 64, 128, 256), quant "none", an arch whose SFU tables ship.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from ..masking import Window
from ..numerics import sfu
from ..numerics.target import Target
from ..numerics.xp import bitcast, enable_x64
from ..problem import Problem
from ..settings import EngineOptions
from . import kernel_program as K
from .engine_numpy import Rows, pad_rows
from .jax_target import native_conversions
from .progress import Progress


@dataclass(frozen=True)
class Layout:
    """The fused kernel's program shape and form (from EngineOptions): ``rows`` query rows per program (a power of two,
    at least the mma's 16, dividing the CUDA block's rows), ``warps`` Triton warps per program, ``inline_ptx`` what
    PTX defines exactly as inline PTX, with packed staging (``_packed``). The default, 16 rows x 16 warps with inline
    PTX, was the fastest on the H200 at N = 16384: 16 x 16 0.159 s, 32 x 16 0.171 s, 16 x 8 0.184 s, 32 x 8 0.205 s
    (tools/jax_fused_sweep.py; benchmarks/experiments/jax_ptx/2026-12-01/); inline PTX held equal to the portable
    routines on 2^16 raw-bit cases per operation, 1.6x faster, compiled in 6 s instead of 200
    (benchmarks/experiments/jax_ptx/)."""

    rows: int = 16
    warps: int = 16
    inline_ptx: bool = True

    @classmethod
    def of(cls, options: EngineOptions) -> Layout:
        return cls(options.pallas_rows, options.pallas_warps, options.pallas_inline_ptx)


def _packed(dtype, layout: Layout) -> bool:
    """Whether the chains' staged f16 operands share one int64 word per element (value and exponent; _staging):
    part of the PTX form, so it goes with that switch; Pallas's interpreter runs it too."""
    return layout.inline_ptx and np.dtype(dtype) == np.float16


def _scratch(d: int, bc: int, dtype, layout: Layout) -> list:
    """The chains' scratch blocks per program (xp.staged), as [(shape, dtype)], A's then B's: decoded values and
    int32 exponents of A (``layout.rows`` rows) and B (at most max(d, BC) rows), a value block (float32 for f16
    operands, float64 for bf16) and an exponent block each, or one int64 word per element where ``_packed``."""
    w, r = max(d, bc), layout.rows
    if _packed(dtype, layout):
        return [((r, w), np.int64), ((w, w), np.int64)]
    vdt = np.float32 if np.dtype(dtype) == np.float16 else np.float64
    return [((r, w), vdt), ((r, w), np.int32), ((w, w), vdt), ((w, w), np.int32)]


LAST_RUN: dict = {}  # the last run's layout (for reports)


def unsupported(prob: Problem, layout: Layout | None = None) -> str | None:
    """Why the fused kernel cannot run ``prob`` in ``layout`` (default: the default Layout; None: it can)."""
    layout = layout or Layout()
    d, cfg = prob.head_dim, prob.config
    if d & (d - 1):
        return f"head dim {d} is not a power of two (Triton tensors are)"
    if cfg.quant != "none":
        return f"quant {cfg.quant!r} (the fused kernel covers quant 'none')"
    rows = layout.rows
    if rows < 16 or rows & (rows - 1) or cfg.block_m % rows:
        return (
            f"pallas_rows={rows}: rows per program must be a power of two from 16 (the mma's M) that "
            f"divides the block's {cfg.block_m} rows"
        )
    if sfu.load_tables(prob.arch) is None:
        return f"no SFU tables for {prob.arch}"
    return None


def _staging(a_refs, b_refs, barrier):
    """The fused kernel's ``stage`` (flashsim.numerics.xp.staged): an mma chain's decoded operands written into
    this program's scratch blocks (the top-left corner of each), between two barriers (every read of the previous
    chain done; every write visible), and read back one column of A / row of B at a time. The scratch lives in
    device memory and stays in the SM's cache: a program writes about (rows + BC) x d elements per chain and reads
    them back per k, where a value could not be indexed at all. Where an operand's scratch is one int64 block (f16
    inputs: a float32 value and an int32 exponent per element), the pair shares a word, exponent high and the
    value's bits low, so that an element is one load (the loads were a quarter of the chains' instructions). A
    reader gives an operand's arrays at k together, from one load per block. B stays row-major although each load
    of its row k then computes its own 64-bit address (6% of the instructions): stored transposed, B's loads took
    fixed offsets, but the threads of a warp read words 1 KB apart and the kernel ran about 1.4x slower on the
    H200 (benchmarks/experiments/jax_ptx/README.md)."""
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    def read(ref, shape, axis, k):
        if axis == -1:
            return ref[pl.ds(0, shape[0]), pl.ds(k, 1)]
        return ref[pl.ds(k, 1), pl.ds(0, shape[1])]

    def reader(arrays, refs, axis):
        if len(refs) == 2:
            return lambda k: tuple(read(ref, x.shape, axis, k) for x, ref in zip(arrays, refs))

        def unpacked(k):
            word = read(refs[0], arrays[0].shape, axis, k)
            return bitcast((word & 0xFFFFFFFF).astype(jnp.uint32), np.float32), (word >> 32).astype(jnp.int32)

        return unpacked

    def store(arrays, refs):
        if len(refs) == 1:  # (float32 value, int32 exponent) -> one int64 word
            v, e = arrays
            arrays = ((e.astype(jnp.int64) << 32) | bitcast(v, np.uint32).astype(jnp.int64),)
        for x, ref in zip(arrays, refs, strict=True):
            if x.dtype != ref.dtype or x.ndim != 2:
                raise ValueError(f"staging a {x.dtype} {x.shape} operand into a {ref.dtype} scratch block")
            ref[pl.ds(0, x.shape[0]), pl.ds(0, x.shape[1])] = x

    def stage(a_arrays, b_arrays):
        barrier()
        store(a_arrays, a_refs)
        store(b_arrays, b_refs)
        barrier()
        return reader(a_arrays, a_refs, -1), reader(b_arrays, b_refs, -2)

    return stage


def _body(static, layout: Layout, interpret, t0_ref, nt_ref, q_ref, k_ref, v_ref, *refs):
    """One program: ``layout.rows`` query rows of one head through their CUDA block's KV tiles; writes the final
    (m, l, O)."""
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental import pallas as pl

    arch, causal, bc, d, two_level, window, cap, nq, nk, sl2, o_f16, n_ex2 = static
    n_scratch = len(_scratch(d, bc, q_ref.dtype, layout))
    *tables, m_ref, l_ref, o_ref = refs[:-n_scratch]
    a_refs, b_refs = refs[-n_scratch:][: n_scratch // 2], refs[-n_scratch:][n_scratch // 2 :]
    j = pl.program_id(1)
    t0, nt = t0_ref[j], nt_ref[j]
    rows = j * layout.rows + jnp.arange(layout.rows, dtype=jnp.int32)
    q = q_ref[...]

    def tile(i, state):
        m, l, o = state
        t = t0 + i
        kt = k_ref[pl.ds(t * bc, bc), :]
        vt = v_ref[pl.ds(t * bc, bc), :]
        cols = t * bc + jnp.arange(bc, dtype=jnp.int32)
        s, m_new, alpha, neg_m = K.scores(
            q, kt, m, rows, cols, nq, nk, sl2, causal=causal, arch=arch, window=window, cap_scale=cap, target=target
        )
        p = K.probabilities(s, neg_m, sl2, arch=arch, target=target)
        l, o = K.accumulate(l, o, p, alpha, vt, arch=arch, two_level=two_level, target=target)
        return m_new, l, o

    if interpret:  # the interpreter runs the program's threads as one: nothing to wait for
        barrier = lambda: None  # noqa: E731
    else:
        from jax.experimental.pallas import triton as pltriton

        barrier = pltriton.debug_barrier
    target = (
        Target(fused=True, stage=_staging(a_refs, b_refs, barrier), inline_ptx=layout.inline_ptx and not interpret)
        .with_tables(arch, "ex2", tables[:n_ex2])
        .with_tables(arch, "rcp", tables[n_ex2:])
    )
    state = K.initial_state(jnp, (), layout.rows, d, o_f16)
    m, l, o = lax.fori_loop(0, nt, tile, state)
    m_ref[...] = m
    l_ref[...] = l
    o_ref[...] = o


_COMPILED: dict = {}


def _program(static, shapes, interpret: bool, layout: Layout):
    """The jitted pallas_call for one configuration, set of shapes and layout (cached)."""
    key = (static, shapes, interpret, layout)
    if key in _COMPILED:
        return _COMPILED[key]
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    heads, rows_pad, keys, d, n_prog, table_shapes, o_dtype, bc, bf16 = shapes

    def full(shape):
        zeros = (0,) * len(shape)
        return pl.BlockSpec(shape, lambda h, j: zeros)

    in_specs = [
        full((n_prog,)),
        full((n_prog,)),
        pl.BlockSpec((None, layout.rows, d), lambda h, j: (h, j, 0)),
        pl.BlockSpec((None, keys, d), lambda h, j: (h, 0, 0)),
        pl.BlockSpec((None, keys, d), lambda h, j: (h, 0, 0)),
    ] + [full(s) for s in table_shapes]
    scratch = _scratch(d, bc, jnp.bfloat16 if bf16 else np.float16, layout)  # one block of each per program
    out_specs = [
        pl.BlockSpec((None, layout.rows), lambda h, j: (h, j)),
        pl.BlockSpec((None, layout.rows, 4), lambda h, j: (h, j, 0)),
        pl.BlockSpec((None, layout.rows, d), lambda h, j: (h, j, 0)),
    ] + [pl.BlockSpec((None, None) + shape, lambda h, j: (h, j, 0, 0)) for shape, _ in scratch]
    out_shape = [
        jax.ShapeDtypeStruct((heads, rows_pad), jnp.float32),
        jax.ShapeDtypeStruct((heads, rows_pad, 4), jnp.float32),
        jax.ShapeDtypeStruct((heads, rows_pad, d), o_dtype),
    ] + [jax.ShapeDtypeStruct((heads, n_prog) + shape, dt) for shape, dt in scratch]
    extra = {}
    if not interpret:
        from jax.experimental.pallas import triton as pltriton

        extra["compiler_params"] = pltriton.CompilerParams(num_warps=layout.warps, num_stages=1)
    call = pl.pallas_call(
        partial(_body, static, layout, interpret),
        grid=(heads, n_prog),
        in_specs=in_specs,
        out_specs=out_specs,
        out_shape=out_shape,
        interpret=interpret,
        name="flashsim_fused",
        **extra,
    )
    _COMPILED[key] = fn = jax.jit(call)
    return fn


def inputs(q, k, v, prob: Problem, layout: Layout | None = None):
    """The host arrays of one call and its static configuration: (static, shapes, arrays); ValueError with the
    reason for a problem the fused kernel does not cover."""
    layout = layout or Layout()
    why = unsupported(prob, layout)
    if why is not None:
        raise ValueError(f"the fused kernel cannot run this problem: {why}")
    cfg = prob.config
    B, H, nq, nk, d = prob.batch, prob.heads, prob.nq, prob.nk, prob.head_dim
    BM, BC = cfg.block_m, cfg.kv_tile
    nqb = prob.q_blocks
    first_tile, tiles = prob.kv_tile_range()
    T = prob.kv_span()
    k, v = (prob.per_query_head(x) for x in (k, v))  # GQA: as engine_jax
    qh = pad_rows(np.ascontiguousarray(q).reshape(B * H, nq, d), nqb * BM)
    kh = pad_rows(np.ascontiguousarray(k).reshape(B * H, nk, d), T * BC)
    vh = pad_rows(np.ascontiguousarray(v).reshape(B * H, v.shape[2], d), T * BC)
    n_prog = nqb * BM // layout.rows
    parent = np.arange(n_prog) * layout.rows // BM
    t0 = first_tile[parent].astype(np.int32)
    nt = tiles[parent].astype(np.int32)
    ex2 = tuple(sfu.table_arrays(prob.arch, "ex2"))
    rcp = tuple(sfu.table_arrays(prob.arch, "rcp")) if cfg.softcap else ()
    window = Window(int(prob.window.left), int(prob.window.right)) if prob.window is not None else None
    static = (
        prob.arch,
        cfg.causal,
        BC,
        d,
        cfg.pv_accum == "f16x2",
        window,
        np.float32(prob.cap_scale) if cfg.softcap else None,
        nq,
        nk,
        np.float32(prob.scale_log2),
        cfg.o_f16,
        len(ex2),
    )
    o_dtype = np.float16 if cfg.o_f16 else np.float32
    shapes = (
        B * H,
        nqb * BM,
        T * BC,
        d,
        n_prog,
        tuple(t.shape for t in ex2 + rcp),
        o_dtype,
        BC,
        np.dtype(q.dtype) != np.float16,
    )
    return static, shapes, (t0, nt, qh, kh, vh) + ex2 + rcp


CALL_ARRAYS = 5  # inputs' arrays that change with each call (t0, nt, q, k, v); the SFU tables follow


_DEVICE_TABLES: dict = {}


def _on_device(tables, device) -> list:
    """The SFU tables (sfu.table_arrays: loaded once per process) on ``device``, copied there once per process
    instead of once per call (ex2's two tables are 64 MB, rcp's 32 MB more: most of the 8 ms a call spent copying
    at N = 16384). Each entry keeps its host array, so the id in the key cannot be reused while the entry lives."""
    import jax

    out = []
    for t in tables:
        key = (id(t), t.shape, t.dtype.str, device)
        if key not in _DEVICE_TABLES:
            _DEVICE_TABLES[key] = (t, jax.device_put(t, device))
        out.append(_DEVICE_TABLES[key][1])
    return out


def _epilogue(lse_scale: float, out_dtype, native: bool):
    """kernel_program.epilogue jitted for the device that holds the final state (cached): step 8 where the fused
    kernel left (m, l, O), so that only O in the output's dtype and three values per row come back to the host (on
    numpy, at N = 16384 and d = 128, it took 67 ms, half of the run; jitted on the H200 0.4 ms, same bits:
    benchmarks/experiments/jax_ptx/README.md). ``native``: f32 <-> f64 conversions are the device's own
    (``Target.native_conversions``, jax_target.native_conversions), as engine_jax traces its steps."""
    key = ("epilogue", float(lse_scale), np.dtype(out_dtype).name, native)
    if key not in _COMPILED:
        import jax

        target = Target(native_conversions=native)

        def epilogue(l, o, m):
            return K.epilogue(l, o, m, lse_scale, out_dtype, target=target)

        _COMPILED[key] = jax.jit(epilogue)
    return _COMPILED[key]


def run(
    q,
    k,
    v,
    prob: Problem,
    progress: bool | None = None,
    *,
    interpret: bool = False,
    device=None,
    options: EngineOptions | None = None,
):
    """Emulate the kernel on numpy q (B,Hq,Nq,d), k, v (B,Hkv,Nk,d) with one fused Pallas kernel; returns (o like q,
    lse f32, Rows), bit for bit what the numpy engine returns. ``interpret``: Pallas's interpreter (any device: the
    tests run it on the CPU); ``device``: the JAX device (default: the first of the default backend); ``options``:
    the program's layout (``Layout.of``) and whether conversions are native on a GPU (default: from the
    environment, flashsim.settings)."""
    import jax

    options = options if options is not None else EngineOptions.from_environment()
    layout = Layout.of(options)
    with enable_x64():
        static, shapes, arrays = inputs(q, k, v, prob, layout)
        device = device if device is not None else jax.devices()[0]
        bar = Progress(1, progress)
        fn = _program(static, shapes, interpret, layout)
        m, l, o = fn(
            *(jax.device_put(a, device) for a in arrays[:CALL_ARRAYS]), *_on_device(arrays[CALL_ARRAYS:], device)
        )[:3]
        epilogue = _epilogue(prob.lse_scale, v.dtype, native_conversions([device], options))
        o_out, lse, l_row, flag = (np.asarray(x) for x in epilogue(l, o, m))
        bar.update(1)
        bar.close()
    B, H, nq, d = prob.batch, prob.heads, prob.nq, prob.head_dim
    LAST_RUN.clear()
    LAST_RUN.update(
        programs=shapes[0] * shapes[4], rows=layout.rows, warps=layout.warps, ptx=layout.inline_ptx, interpret=interpret
    )
    o_out = o_out.reshape(B, H, -1, d)[:, :, :nq]
    lse, l_row, flag = (x.reshape(B, H, -1)[:, :, :nq] for x in (lse, l_row, flag))
    return o_out, lse, Rows(l_row, flag)


def lower_for_gpu(q, k, v, prob: Problem, layout: Layout | None = None) -> str:
    """The StableHLO text of the fused kernel lowered for CUDA, without a GPU (jax's cross-platform lowering): the
    Triton lowering rejects any operation it cannot compile, so CI checks the kernel's body on a CPU machine."""
    import jax

    layout = layout or Layout()
    with enable_x64():
        static, shapes, arrays = inputs(q, k, v, prob, layout)
        fn = _program(static, shapes, False, layout)
        args = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
        return fn.trace(*args).lower(lowering_platforms=("cuda",)).as_text()
