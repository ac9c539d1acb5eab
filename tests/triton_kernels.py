"""Triton kernels of the kinds Triton's tutorials teach (vector add, fused softmax, matmul, layer norm forward, fused
attention forward), written for flashsim's tests and benchmarks: small, each with the launch it is meant for. They
import triton at module level: import this module only where Triton is installed."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = offs < n
    x = tl.load(x_ptr + offs, mask=keep)
    y = tl.load(y_ptr + offs, mask=keep)
    tl.store(out_ptr + offs, x + y, mask=keep)


@triton.jit
def softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    """One program per row (a grid-stride loop over rows): max, exp, sum, divide, all in registers."""
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0)):
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=-float("inf"))
        z = x - tl.max(x, axis=0)
        e = tl.exp(z)
        tl.store(out_ptr + row * out_stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@triton.jit
def matmul(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP: tl.constexpr,
):
    """C = A @ B with f32 accumulation, stored in C's element type; programs grouped along M for L2 reuse."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    rows = min(tiles_m - first_m, GROUP)
    pm = first_m + (pid % per_group) % rows
    pn = (pid % per_group) // rows
    rm = (pm * BM + tl.arange(0, BM)) % M
    rn = (pn * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    a = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        left = K - k * BK
        acc = tl.dot(
            tl.load(a, mask=rk[None, :] < left, other=0.0), tl.load(b, mask=rk[:, None] < left, other=0.0), acc
        )
        a += BK * sak
        b += BK * sbk
    cm = pm * BM + tl.arange(0, BM)
    cn = pn * BN + tl.arange(0, BN)
    c = c_ptr + cm[:, None] * scm + cn[None, :] * scn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def layer_norm(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, n, eps, BLOCK: tl.constexpr):
    """One program per row: mean and variance in f32 over BLOCK-wide chunks, then y = (x - mean) * rstd * w + b."""
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        d = tl.where(cols < n, tl.load(x_ptr + cols, mask=cols < n, other=0.0).to(tl.float32) - mean, 0.0)
        acc += d * d
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, n, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        keep = cols < n
        w = tl.load(w_ptr + cols, mask=keep)
        b = tl.load(b_ptr + cols, mask=keep)
        x = tl.load(x_ptr + cols, mask=keep, other=0.0).to(tl.float32)
        tl.store(y_ptr + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=keep)


@triton.jit
def attention(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    lse_ptr,
    scale,
    N,
    sh,
    sn,
    CAUSAL: tl.constexpr,
    D: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
):
    """Online-softmax attention forward for one (head, BM-row block): base-2 exponentials with the scale folded in,
    f32 accumulators, O normalised at the end; LSE (natural log) per row. q, k, v, o: (heads, N, D) contiguous."""
    start = tl.program_id(0) * BM
    head = tl.program_id(1).to(tl.int64) * sh
    rm = start + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + head + rm[:, None] * sn + rd[None, :], mask=rm[:, None] < N, other=0.0)
    qk_scale = scale * 1.44269504
    m = tl.full([BM], -float("inf"), tl.float32)
    l = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    end = tl.minimum(start + BM, N) if CAUSAL else N
    for j in range(0, end, BN):
        rn = j + tl.arange(0, BN)
        k = tl.load(k_ptr + head + rn[None, :] * sn + rd[:, None], mask=rn[None, :] < N, other=0.0)
        s = tl.dot(q, k) * qk_scale
        keep = rn[None, :] < N
        if CAUSAL:
            keep = keep & (rm[:, None] >= rn[None, :])
        s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + head + rn[:, None] * sn + rd[None, :], mask=rn[:, None] < N, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    o = acc / l[:, None]
    tl.store(o_ptr + head + rm[:, None] * sn + rd[None, :], o.to(o_ptr.dtype.element_ty), mask=rm[:, None] < N)
    tl.store(lse_ptr + tl.program_id(1) * N + rm, (m + tl.math.log2(l)) * 0.6931471805599453, mask=rm < N)


@triton.jit
def copy_tiles(src_desc, dst_ptr, n_cols, BM: tl.constexpr, BN: tl.constexpr):
    """Each program loads one (BM, BN) tile through a host TensorDescriptor and stores it, doubled, by pointer."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    tile = src_desc.load([pm * BM, pn * BN])
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(dst_ptr + rm[:, None] * n_cols + rn[None, :], tile * 2)


@triton.jit
def copy_tiles_device(src_ptr, dst_ptr, n_rows, n_cols, BM: tl.constexpr, BN: tl.constexpr):
    """The same through a descriptor made on the device (tl.make_tensor_descriptor)."""
    desc = tl.make_tensor_descriptor(src_ptr, shape=[n_rows, n_cols], strides=[n_cols, 1], block_shape=[BM, BN])
    pm, pn = tl.program_id(0), tl.program_id(1)
    tile = desc.load([pm * BM, pn * BN])
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    tl.store(dst_ptr + rm[:, None] * n_cols + rn[None, :], tile * 2)
