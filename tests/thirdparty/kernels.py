"""The third-party launches: for each kernel, its package, instantiation unit, the project's nvcc flags, the
inputs (seeded), the kernel's parameters as bytes, the arrays it writes, and a float64 reference of what it
computes (an oracle independent of the simulator, for the CPU tests).

Parameters are bytes, one entry per kernel parameter (a pointer is its 8-byte device address, a by-value struct
its bytes), built from ``address(name)``: flashsim.ptx.address of the array in the simulator, the device pointer
on the GPU. So the simulator and the GPU get the same parameter bytes from one description. What a launch needs
to know of the build (struct offsets, shared memory, threads per block) is read from the ``flashsim_*`` constants
each unit puts in its PTX, computed there by the project's own C++ (kernel/thirdparty/*.cu).

The problem sizes are chosen small (one or two blocks, a few KV steps) so that each simulated launch stays within
seconds, and large enough that every loop runs more than once where the kernel has one (KV tiles, K steps).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["KERNELS", "SM120_KERNELS", "ThirdPartyKernel", "constant", "fastdiv_values"]

# Their build flags (flash-attn 2.8.3 setup.py: nvcc_flags; ggml-cuda CMakeLists.txt: CUDA_FLAGS plus CMake's
# Release flags, C++17 and the compile definitions of ggml's CMakeLists.txt). --threads, -gencode and the flags that
# shape only the fatbinary are left out: the build here is one PTX for one arch.
FA2_FLAGS = (
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
)
GGML_FLAGS = (
    "-O3",
    "-DNDEBUG",
    "-std=c++17",
    "-use_fast_math",
    "-extended-lambda",
    "-DGGML_SCHED_MAX_COPIES=4",
    "-D_GNU_SOURCE",
    "-D_XOPEN_SOURCE=600",
)
_GGML = "vendor/llama.cpp/ggml"
GGML_INCLUDES = (f"{_GGML}/include", f"{_GGML}/src", f"{_GGML}/src/ggml-cuda")


def constant(ir_module, name: str) -> int:
    """The unsigned 64-bit value of the module-scope ``flashsim_<name>`` constant a unit put in its PTX."""
    var = ir_module.vars.get(f"flashsim_{name}")
    if var is None or var.init is None:
        raise KeyError(f"the PTX has no initialised flashsim_{name} (the instantiation unit exports it)")
    return int.from_bytes(var.init[:8], "little")


def fastdiv_values(d: int) -> np.ndarray:
    """llama.cpp's init_fastdiv_values(d) (common.cuh): (mp, L, d) with L = ceil(log2 d), the uint3 its kernels
    divide by through __umulhi; written from its definition, checked in the tests against integer division."""
    L = max(0, (d - 1).bit_length())
    mp = ((1 << 32) * ((1 << L) - d)) // d + 1
    return np.array([mp & 0xFFFFFFFF, L, d], np.uint32)


def _u64(x) -> bytes:
    return int(x).to_bytes(8, "little")


def _i32(x) -> bytes:
    return np.int32(x).tobytes()


def _f32(x) -> bytes:
    return np.float32(x).tobytes()


def _softmax_attention(q, k, v, scale, allowed):
    """float64 softmax(q k^T scale) v over the ``allowed`` keys of each query, and each row's log-sum-exp."""
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(axis=1, keepdims=True)
    return (p @ v.astype(np.float64)) / l, (np.log(l) + m)[:, 0]


@dataclass(frozen=True)
class ThirdPartyKernel:
    """One launch of one kernel. ``name`` names the capture (tests/data/thirdparty/<name>_sm90.npz); ``unit`` is
    under kernel/; ``includes`` are folders of the package's tree; ``outputs`` the arrays compared bit for bit."""

    name: str
    package: str
    unit: str
    includes: tuple
    flags: tuple
    outputs: tuple
    seed: int
    note: str

    def inputs(self, rng: np.random.Generator) -> dict:
        """Every array of the launch, inputs and (zeroed) outputs, by name."""
        raise NotImplementedError

    def launch(self, ir_module) -> tuple:
        """(grid, block, dynamic shared bytes) from the unit's constants."""
        raise NotImplementedError

    def parameters(self, ir_module, arrays: dict, address) -> list:
        """The kernel's parameters, one bytes object each."""
        raise NotImplementedError

    def reference(self, arrays: dict) -> dict:
        """{output name: (float64 expected, absolute tolerance)} from the inputs in ``arrays``."""
        raise NotImplementedError

    def arrays(self) -> dict:
        """The seeded arrays of this launch."""
        return self.inputs(np.random.default_rng(self.seed))


class FlashAttention2(ThirdPartyKernel):
    """FA2's forward kernel, head dim 64, fp16, causal, one head of 256 queries and 256 keys: 2 blocks of 128
    queries, the second running 2 KV tiles (online-softmax rescaling, the causal mask on the diagonal tile)."""

    SEQ, DIM = 256, 64

    def inputs(self, rng):
        S, D = self.SEQ, self.DIM
        q, k, v = (rng.standard_normal((S, D)).astype(np.float16) for _ in range(3))
        q[3, :] *= np.float16(8)  # a row with a sharp softmax
        return {"q": q, "k": k, "v": v, "o": np.zeros((S, D), np.float16), "lse": np.zeros(S, np.float32)}

    def launch(self, ir):
        block_m = constant(ir, "block_m")
        grid = (-(-self.SEQ // block_m), 1, 1)
        return grid, (constant(ir, "block_threads"), 1, 1), constant(ir, "shared_bytes")

    def _field(self, ir, name):
        var = ir.vars[f"flashsim_field_{name}"]
        return int.from_bytes(var.init[:8], "little"), int.from_bytes(var.init[8:16], "little")

    def parameters(self, ir, arrays, address):
        S, D = self.SEQ, self.DIM
        buf = bytearray(constant(ir, "params_bytes"))
        scale = np.float32(1.0 / np.sqrt(D))

        def put(name, raw: bytes):
            off, size = self._field(ir, name)
            if len(raw) != size:
                raise ValueError(f"Flash_fwd_params.{name} has {size} bytes, {len(raw)} given")
            buf[off : off + size] = raw

        for field, array in (
            ("q_ptr", "q"),
            ("k_ptr", "k"),
            ("v_ptr", "v"),
            ("o_ptr", "o"),
            ("softmax_lse_ptr", "lse"),
        ):
            put(field, _u64(address(array)))
        for t in "qkvo":  # element strides of a (batch, seq, head, dim) tensor with one batch and one head
            put(f"{t}_batch_stride", np.int64(S * D).tobytes())
            put(f"{t}_row_stride", np.int64(D).tobytes())
            put(f"{t}_head_stride", np.int64(D).tobytes())
        ints = dict(h=1, h_k=1, h_h_k_ratio=1, b=1, seqlen_q=S, seqlen_k=S, d=D, seqlen_q_rounded=S)
        ints.update(seqlen_k_rounded=S, d_rounded=D, total_q=S, window_size_left=-1, window_size_right=0)
        for name, value in ints.items():
            put(name, _i32(value))
        put("scale_softmax", _f32(scale))
        put("scale_softmax_log2", _f32(scale * np.float32(np.log2(np.e))))
        put("p_dropout", _f32(1.0))  # the probability to keep: no dropout
        put("rp_dropout", _f32(1.0))
        put("scale_softmax_rp_dropout", _f32(scale))
        put("is_causal", b"\x01")
        put("is_seqlens_k_cumulative", b"\x01")
        return [bytes(buf)]

    def reference(self, arrays):
        S = self.SEQ
        allowed = np.tril(np.ones((S, S), bool))
        o, lse = _softmax_attention(arrays["q"], arrays["k"], arrays["v"], 1.0 / np.sqrt(self.DIM), allowed)
        return {"o": (o, 4e-3), "lse": (lse, 2e-4 * np.abs(lse).max())}


class LlamaFlashAttention(ThirdPartyKernel):
    """llama.cpp's mma FlashAttention, head dim 64, one head: 32 f32 queries (2 blocks of 16 columns) over a 256-row
    f16 KV cache (4 KV batches of 64 per block) with an f16 causal mask in the cache's frame (query i sees keys up
    to 224 + i), the grid of one block per output tile (no stream-k seam, so no fixup buffer: dst_meta is null,
    as llama.cpp passes it when no fixup is allocated)."""

    N_Q, N_KV, DIM = 32, 256, 64

    def inputs(self, rng):
        nq, nkv, D = self.N_Q, self.N_KV, self.DIM
        q = rng.standard_normal((nq, D)).astype(np.float32)
        k = rng.standard_normal((nkv, D)).astype(np.float16)
        v = rng.standard_normal((nkv, D)).astype(np.float16)
        mask = np.where(self._allowed(), np.float16(0), np.float16(-np.inf)).astype(np.float16)
        return {"q": q, "k": k, "v": v, "mask": mask, "dst": np.zeros((nq, D), np.float32)}

    def _allowed(self):
        nq, nkv = self.N_Q, self.N_KV
        return np.arange(nkv)[None, :] <= (nkv - nq) + np.arange(nq)[:, None]

    def launch(self, ir):
        ncols = constant(ir, "ncols")
        grid = (-(-self.N_Q // ncols), 1, 1)
        return grid, (32, constant(ir, "block_threads") // 32, 1), constant(ir, "shared_bytes")

    def parameters(self, ir, arrays, address):
        nq, nkv, D = self.N_Q, self.N_KV, self.DIM
        null = _u64(0)
        pointers = [address("q"), address("k"), address("v"), address("mask")]
        out = [_u64(p) for p in pointers] + [null, null, _u64(address("dst")), null]  # sinks, KV_max, dst, dst_meta
        out += [_f32(1.0 / np.sqrt(D)), _f32(0.0), _f32(1.0), _f32(1.0)]  # scale, max_bias, m0, m1
        out += [np.uint32(1).tobytes(), _f32(0.0)]  # n_head_log2, logit_softcap
        q_row = D * 4
        out += [_i32(D), fastdiv_values(nq).tobytes(), _i32(1), _i32(1)]  # ne00, ne01, ne02, ne03
        out += [_i32(q_row), _i32(q_row * nq), _i32(q_row * nq)]  # nb01, nb02, nb03
        kv_row = D * 2
        out += [_i32(D), _i32(nkv), _i32(1), _i32(1)]  # ne10..ne13
        out += [_i32(kv_row), _i32(kv_row * nkv), np.int64(kv_row * nkv).tobytes()]  # nb11, nb12, nb13
        out += [_i32(kv_row), _i32(kv_row * nkv), np.int64(kv_row * nkv).tobytes()]  # nb21, nb22, nb23
        mask_row = nkv * 2
        out += [_i32(nq), _i32(1), _i32(1)]  # ne31, ne32, ne33
        out += [_i32(mask_row), _i32(mask_row * nq), np.int64(mask_row * nq).tobytes()]  # nb31, nb32, nb33
        return out

    def reference(self, arrays):
        o, _ = _softmax_attention(arrays["q"], arrays["k"], arrays["v"], 1.0 / np.sqrt(self.DIM), self._allowed())
        return {"dst": (o, 4e-3)}


class LlamaMatMulF(ThirdPartyKernel):
    """llama.cpp's mul_mat_f: bf16 weights (64 rows of 512) times 8 f32 activation columns, f32 out, 2 blocks of 32
    rows; each warp runs two K steps of 128 pairs. dst[col][row] = sum_k x[row][k] * bf16(y[col][k])."""

    ROWS, K, COLS = 64, 512, 8

    def inputs(self, rng):
        x = rng.standard_normal((self.ROWS, self.K)).astype(ml_dtypes.bfloat16).view(np.uint16)
        y = rng.standard_normal((self.COLS, self.K)).astype(np.float32)
        return {"x": x, "y": y, "dst": np.zeros((self.COLS, self.ROWS), np.float32)}

    def launch(self, ir):
        grid = (self.ROWS // constant(ir, "rows_per_block"), 1, 1)
        return grid, (32, constant(ir, "block_threads") // 32, 1), constant(ir, "shared_bytes")

    def parameters(self, ir, arrays, address):
        if constant(ir, "cols_per_block") != self.COLS:
            raise ValueError("the unit's cols_per_block must be the launch's column count")
        pairs = self.K // 2  # the kernel counts bf16 pairs (nv_bfloat162) and float2s along K
        out = [_u64(address("x")), _u64(address("y")), _u64(0), _u64(address("dst"))]
        out += [_i32(pairs), _i32(self.COLS), _i32(1)]  # ncols, ncols_dst_total, nchannels_dst
        out += [_i32(pairs), _i32(pairs), _i32(self.ROWS)]  # stride_row, stride_col_y, stride_col_dst
        out += [_i32(0), _i32(0)]  # stride_col_id, stride_row_id (no ids)
        one_x, one_y, one_dst = self.ROWS * pairs, self.COLS * self.K, self.COLS * self.ROWS
        out += [_i32(1), _i32(one_x), _i32(one_y), _i32(one_dst)]  # channel ratio and strides
        out += [_i32(1), _i32(one_x), _i32(one_y), _i32(one_dst)]  # sample ratio and strides
        return out

    def reference(self, arrays):
        x = arrays["x"].view(ml_dtypes.bfloat16).astype(np.float64)
        y = arrays["y"].astype(ml_dtypes.bfloat16).astype(np.float64)
        # each product is exact in f32; the sums of 512 of them round about 2^-24 of their magnitude per step
        bound = np.abs(y) @ np.abs(x).T
        return {"dst": (y @ x.T, 32 * 2.0**-24 * bound.max())}


class LlamaMatMulQ8(ThirdPartyKernel):
    """llama.cpp's mul_mat_q on q8_0 weights: 256 rows of 512 (16 blocks of 32 int8 with an f16 scale each) times 8
    activation columns in the q8_1 mmq layout (4 blocks of 128 int8 per column, one f32 scale per 32 values: the D4
    layout q8_0 asks for), f32 out. Two tiles of 128 rows, two K iterations of 256 each; the stream-k kernel on a
    grid of one block per tile, the tiling llama.cpp launches when its tiles fill the GPU (no fixup buffer). The
    activations end in Y_PAD spare blocks, as llama.cpp allocates them (ggml_cuda_mul_mat_q: J_max blocks past the
    data, J_max at most 128): the kernel's tile copy reads whole thread rounds past the tile it uses."""

    ROWS, K, COLS, Y_PAD = 256, 512, 8, 128
    X_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", 32)])  # block_q8_0 (ggml-common.h), 34 bytes
    Y_BLOCK = np.dtype([("d4", "<f4", 4), ("qs", "i1", 128)])  # block_q8_1_mmq with the D4 scales, 144 bytes

    def inputs(self, rng):
        x = np.zeros((self.ROWS, self.K // 32), self.X_BLOCK)
        x["qs"] = rng.integers(-127, 128, x["qs"].shape)
        x["d"] = (rng.uniform(0.5, 1.5, x.shape) * rng.choice([-1, 1], x.shape) / 128).astype(np.float16)
        y = np.zeros(self.K // 128 * self.COLS + self.Y_PAD, self.Y_BLOCK)  # [K block][column], then the spare
        data = y[: self.K // 128 * self.COLS]
        data["qs"] = rng.integers(-127, 128, data["qs"].shape)
        data["d4"] = rng.uniform(0.5, 1.5, data["d4"].shape).astype(np.float32) / 128
        return {
            "x": x.view(np.uint8).reshape(self.ROWS, -1),
            "y": y.view(np.uint8),
            "dst": np.zeros((self.COLS, self.ROWS), np.float32),
        }

    def launch(self, ir):
        if not constant(ir, "stream_k"):
            raise ValueError("the launch below is the stream-k kernel's tiling; this configuration is not stream-k")
        tiles = (self.ROWS // constant(ir, "rows_per_tile")) * -(-self.COLS // constant(ir, "cols_per_tile"))
        return (tiles, 1, 1), (32, constant(ir, "block_threads") // 32, 1), constant(ir, "shared_bytes")

    def parameters(self, ir, arrays, address):
        if constant(ir, "k_per_iteration") > self.K:
            raise ValueError("K must hold at least one of the kernel's K iterations")
        blocks = self.K // 32  # q8_0 blocks per row
        ntx = -(-self.COLS // constant(ir, "cols_per_tile"))
        one = fastdiv_values(1).tobytes()
        null = _u64(0)
        y_ints = self.K // 128 * self.COLS * self.Y_BLOCK.itemsize // 4
        out = [_u64(address("x")), _u64(address("y")), null, null, _u64(address("dst")), null, null]
        out += [fastdiv_values(blocks).tobytes(), _i32(self.ROWS), _i32(self.COLS), _i32(blocks), _i32(self.COLS)]
        out += [_i32(self.ROWS)]  # stride_col_dst
        out += [one, one, _i32(self.ROWS * blocks), _i32(y_ints), _i32(self.ROWS * self.COLS)]  # channels
        out += [one, one, _i32(self.ROWS * blocks), _i32(y_ints), _i32(self.ROWS * self.COLS)]  # samples
        out += [fastdiv_values(ntx).tobytes()]
        return out

    def reference(self, arrays):
        x = arrays["x"].reshape(-1).view(self.X_BLOCK).reshape(self.ROWS, self.K // 32)
        y = arrays["y"].view(self.Y_BLOCK)[: self.K // 128 * self.COLS].reshape(self.K // 128, self.COLS)
        xq = x["qs"].astype(np.float64).reshape(self.ROWS, self.K)
        xd = np.repeat(x["d"].astype(np.float64), 32, axis=1)
        yq = y["qs"].astype(np.float64).transpose(1, 0, 2).reshape(self.COLS, self.K)
        yd = np.repeat(y["d4"].astype(np.float64).transpose(1, 0, 2).reshape(self.COLS, -1), 32, axis=1)
        want = (yq * yd) @ (xq * xd).T
        bound = np.abs(yq * yd) @ np.abs(xq * xd).T
        return {"dst": (want, 64 * 2.0**-24 * bound.max())}


def _e2m1(codes) -> np.ndarray:
    """e2m1 codes (uint8, 0..15) -> float64, by ml_dtypes' float4_e2m1fn (the OCP MX format's own decoding)."""
    return np.asarray(codes, np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)


def _e8m0(codes) -> np.ndarray:
    """e8m0 scale codes -> float64 (2^(code - 127)), by ml_dtypes' float8_e8m0fnu."""
    return np.asarray(codes, np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float64)


def _ue4m3(codes) -> np.ndarray:
    """ue4m3 scale codes (0..127) -> float64: e4m3 with the sign bit clear, by ml_dtypes' float8_e4m3fn."""
    return (np.asarray(codes, np.uint8) & 0x7F).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _nvfp4_nibbles(codes: np.ndarray) -> np.ndarray:
    """ggml's NVFP4 nibble order for sub-blocks of 16 codes (..., 16) -> (..., 8) bytes: byte j holds code j low and
    code j + 8 high (quantize_row_nvfp4_ref in ggml-quants.c; quantize_mmq_nvfp4 in quantize.cu packs alike)."""
    return (codes[..., :8] | (codes[..., 8:] << 4)).astype(np.uint8)


def _mxfp4_nibbles(codes: np.ndarray) -> np.ndarray:
    """ggml's MXFP4 nibble order for blocks of 32 codes (..., 32) -> (..., 16) bytes: byte j holds value j in its low
    nibble and value j + 16 in its high one (ggml-common.h's block_mxfp4, and quantize_mmq_mxfp4 in quantize.cu,
    which packs the activations the same way: "a0a16, a1a17, ...")."""
    return (codes[..., :16] | (codes[..., 16:] << 4)).astype(np.uint8)


class LlamaMatMulMXFP4(ThirdPartyKernel):
    """llama.cpp's mul_mat_q on Blackwell's FP4 tensor cores (W4A4, kind::mxf4 block_scale 2X): MXFP4 weights,
    256 rows of 1024 (32 blocks of 32 e2m1 codes with an e8m0 scale each: ggml's block_mxfp4, 17 bytes), times 8
    activation columns quantised to MXFP4 in llama.cpp's block_fp4_mmq layout (per 256 values of a column: four
    uint32 words, each two e8m0 scales in its low bytes, then 128 bytes of codes in the same nibble order), f32 out.
    Two tiles of 128 rows, two K iterations of 512 each, each warp 16 mma per tile (each with c = 0, its d added to
    the f32 sums); the stream-k kernel on a grid of one block per tile (no fixup buffer). The codes are random, the
    scales within 2^-8..2^8, so the quantised operands are exact and the reference their exact products. The
    activations end in Y_PAD spare blocks, as llama.cpp allocates them (the tile copy reads whole thread rounds past
    the tile it uses)."""

    ROWS, K, COLS, Y_PAD = 256, 1024, 8, 128
    X_BLOCK = np.dtype([("e", "u1"), ("qs", "u1", 16)])  # block_mxfp4 (ggml-common.h), 17 bytes
    Y_BLOCK = np.dtype([("d4", "<u4", 4), ("qs", "u1", 128)])  # block_fp4_mmq (mmq.cuh), 144 bytes

    def inputs(self, rng):
        R, K, C = self.ROWS, self.K, self.COLS
        w = rng.integers(0, 16, (R, K)).astype(np.uint8)
        we = rng.integers(127 - 8, 127 + 9, (R, K // 32)).astype(np.uint8)
        a = rng.integers(0, 16, (C, K)).astype(np.uint8)
        ae = rng.integers(127 - 8, 127 + 9, (C, K // 32)).astype(np.uint8)
        x = np.zeros((R, K // 32), self.X_BLOCK)
        x["e"] = we
        x["qs"] = _mxfp4_nibbles(w.reshape(R, K // 32, 32))
        y = np.zeros(K // 256 * C + self.Y_PAD, self.Y_BLOCK)  # [K block of 256][column], then the spare
        data = y[: K // 256 * C].reshape(K // 256, C)
        pairs = ae.reshape(C, K // 256, 4, 2).astype(np.uint32)
        data["d4"] = (pairs[..., 0] | (pairs[..., 1] << 8)).transpose(1, 0, 2)
        data["qs"] = _mxfp4_nibbles(a.reshape(C, K // 256, 8, 32)).reshape(C, K // 256, 128).transpose(1, 0, 2)
        return {
            "x": x.view(np.uint8).reshape(R, -1),
            "y": y.view(np.uint8),
            "dst": np.zeros((C, R), np.float32),
        }

    launch = LlamaMatMulQ8.launch

    def parameters(self, ir, arrays, address):
        if constant(ir, "k_per_iteration") > self.K:
            raise ValueError("K must hold at least one of the kernel's K iterations")
        blocks = self.K // 32  # block_mxfp4 per row
        ntx = -(-self.COLS // constant(ir, "cols_per_tile"))
        one = fastdiv_values(1).tobytes()
        null = _u64(0)
        y_ints = self.K // 256 * self.COLS * self.Y_BLOCK.itemsize // 4
        out = [_u64(address("x")), _u64(address("y")), null, null, _u64(address("dst")), null, null]
        out += [fastdiv_values(blocks).tobytes(), _i32(self.ROWS), _i32(self.COLS), _i32(blocks), _i32(self.COLS)]
        out += [_i32(self.ROWS)]  # stride_col_dst
        out += [one, one, _i32(self.ROWS * blocks), _i32(y_ints), _i32(self.ROWS * self.COLS)]  # channels
        out += [one, one, _i32(self.ROWS * blocks), _i32(y_ints), _i32(self.ROWS * self.COLS)]  # samples
        out += [fastdiv_values(ntx).tobytes()]
        return out

    def dequantised(self, arrays) -> tuple[np.ndarray, np.ndarray]:
        """(weights ROWS x K, activations COLS x K) as float64, decoded from the blocks in ``arrays``."""
        R, K, C = self.ROWS, self.K, self.COLS
        x = arrays["x"].reshape(-1).view(self.X_BLOCK).reshape(R, K // 32)
        w = np.concatenate([x["qs"] & 0xF, x["qs"] >> 4], axis=-1)  # (R, K / 32, 32) in value order
        w = (_e2m1(w) * _e8m0(x["e"])[..., None]).reshape(R, K)
        y = arrays["y"].view(self.Y_BLOCK)[: K // 256 * C].reshape(K // 256, C).transpose(1, 0)
        qs = y["qs"].reshape(C, K // 256, 8, 16)
        a = _e2m1(np.concatenate([qs & 0xF, qs >> 4], axis=-1))  # (C, K / 256, 8, 32)
        words = y["d4"].astype(np.uint32)  # (C, K / 256, 4): scales of sub-blocks 2q and 2q + 1
        scales = np.stack([words & 0xFF, (words >> 8) & 0xFF], axis=-1).reshape(C, K // 256, 8).astype(np.uint8)
        return w, (a * _e8m0(scales)[..., None]).reshape(C, K)

    def reference(self, arrays):
        w, a = self.dequantised(arrays)
        # each mma's d: 64 exact products in 4 exact groups of 16, aligned to F = 35 bits and rounded toward zero to
        # f32 (at most 2^-23 of the largest magnitude in it); then K / 64 f32 additions of those d into the sums,
        # each rounding at most 2^-24 of the running sum: 2^-22 (K / 64 + 1) of the sum of the magnitudes bounds both
        bound = np.abs(a) @ np.abs(w).T
        return {"dst": (a @ w.T, 2.0**-22 * (self.K // 64 + 1) * bound)}


class LlamaMatMulNVFP4(LlamaMatMulMXFP4):
    """The NVFP4 twin of LlamaMatMulMXFP4 (kind::mxf4nvf4 block_scale 4X, ue4m3): weights in ggml's block_nvfp4 (64
    e2m1 codes, a ue4m3 scale per 16, 36 bytes; quantize_row_nvfp4_ref's nibble order: byte j of a 16-code
    sub-block holds codes j and j + 8), activations in block_fp4_mmq with 16 ue4m3 scales per 256 codes (its d4
    bytes, quantize_mmq_nvfp4's layout, the same nibble order) and a per-column f32 scale (y_scale, multiplied into
    each output at the write-back). Scales within 2^-3 .. 2^3 with random mantissas; the column scales powers of two
    times random mantissas."""

    X_BLOCK = np.dtype([("d", "u1", 4), ("qs", "u1", 32)])  # block_nvfp4 (ggml-common.h), 36 bytes
    Y_BLOCK = np.dtype([("d", "u1", 16), ("qs", "u1", 128)])  # block_fp4_mmq with NVFP4's 16 ue4m3 scales

    def inputs(self, rng):
        R, K, C = self.ROWS, self.K, self.COLS
        w = rng.integers(0, 16, (R, K)).astype(np.uint8)
        a = rng.integers(0, 16, (C, K)).astype(np.uint8)
        x = np.zeros((R, K // 64), self.X_BLOCK)
        x["d"] = rng.integers(0x20, 0x51, (R, K // 64, 4))
        x["qs"] = _nvfp4_nibbles(w.reshape(R, K // 64, 4, 16)).reshape(R, K // 64, 32)
        y = np.zeros(K // 256 * C + self.Y_PAD, self.Y_BLOCK)
        data = y[: K // 256 * C].reshape(K // 256, C)
        data["d"] = rng.integers(0x20, 0x51, (C, K // 256, 16)).transpose(1, 0, 2)
        data["qs"] = _nvfp4_nibbles(a.reshape(C, K // 256, 16, 16)).reshape(C, K // 256, 128).transpose(1, 0, 2)
        y_scale = (rng.uniform(1, 2, C) * 2.0 ** rng.integers(-4, 5, C)).astype(np.float32)
        return {
            "x": x.view(np.uint8).reshape(R, -1),
            "y": y.view(np.uint8),
            "y_scale": y_scale,
            "dst": np.zeros((C, R), np.float32),
        }

    def parameters(self, ir, arrays, address):
        if constant(ir, "k_per_iteration") > self.K:
            raise ValueError("K must hold at least one of the kernel's K iterations")
        blocks = self.K // 64  # block_nvfp4 per row
        ntx = -(-self.COLS // constant(ir, "cols_per_tile"))
        one = fastdiv_values(1).tobytes()
        null = _u64(0)
        y_ints = self.K // 256 * self.COLS * self.Y_BLOCK.itemsize // 4
        out = [_u64(address("x")), _u64(address("y")), null, null, _u64(address("dst")), null]
        out += [_u64(address("y_scale"))]
        out += [fastdiv_values(blocks).tobytes(), _i32(self.ROWS), _i32(self.COLS), _i32(blocks), _i32(self.COLS)]
        out += [_i32(self.ROWS)]  # stride_col_dst
        out += [one, one, _i32(self.ROWS * blocks), _i32(y_ints), _i32(self.ROWS * self.COLS)]  # channels
        out += [one, one, _i32(self.ROWS * blocks), _i32(y_ints), _i32(self.ROWS * self.COLS)]  # samples
        out += [fastdiv_values(ntx).tobytes()]
        return out

    def dequantised(self, arrays) -> tuple[np.ndarray, np.ndarray]:
        """(weights ROWS x K, activations COLS x K, the column scales applied) as float64."""
        R, K, C = self.ROWS, self.K, self.COLS
        x = arrays["x"].reshape(-1).view(self.X_BLOCK).reshape(R, K // 64)
        qs = x["qs"].reshape(R, K // 64, 4, 8)
        w = _e2m1(np.concatenate([qs & 0xF, qs >> 4], axis=-1)) * _ue4m3(x["d"])[..., None]
        y = arrays["y"].view(self.Y_BLOCK)[: K // 256 * C].reshape(K // 256, C).transpose(1, 0)
        qa = y["qs"].reshape(C, K // 256, 16, 8)
        a = _e2m1(np.concatenate([qa & 0xF, qa >> 4], axis=-1)) * _ue4m3(y["d"])[..., None]
        a = a.reshape(C, K) * arrays["y_scale"].astype(np.float64)[:, None]
        return w.reshape(R, K), a

    def reference(self, arrays):
        w, a = self.dequantised(arrays)
        # as the MXFP4 kernel's, and the write-back's product by the column scale (2^-24 more)
        bound = np.abs(a) @ np.abs(w).T
        return {"dst": (a @ w.T, (2.0**-22 * (self.K // 64 + 1) + 2.0**-24) * bound)}


KERNELS = {
    k.name: k
    for k in (
        FlashAttention2(
            name="fa2_fwd",
            package="flash-attn",
            unit="thirdparty/fa2_fwd.cu",
            includes=("csrc/flash_attn", "csrc/flash_attn/src", "csrc/cutlass/include"),
            flags=FA2_FLAGS,
            outputs=("o", "lse"),
            seed=2083,
            note="CuTe: cp.async pipeline, ldmatrix (.trans), m16n8k16 f16 -> f32, ex2.approx softmax",
        ),
        LlamaFlashAttention(
            name="llama_fattn_mma",
            package="llama-cpp-python",
            unit="thirdparty/llama_fattn_mma.cu",
            includes=GGML_INCLUDES,
            flags=GGML_FLAGS,
            outputs=("dst",),
            seed=336,
            note="hand-written mma.sync: f16 -> f32 for KQ, f16 -> f16 for VKQ, ldmatrix, f16 mask",
        ),
        LlamaMatMulF(
            name="llama_mmf_bf16",
            package="llama-cpp-python",
            unit="thirdparty/llama_mmf.cu",
            includes=GGML_INCLUDES,
            flags=GGML_FLAGS,
            outputs=("dst",),
            seed=512,
            note="a GEMM: bf16 m16n8k16 -> f32, f32 -> bf16x2 conversion, ldmatrix x2/x4",
        ),
        LlamaMatMulQ8(
            name="llama_mmq_q8_0",
            package="llama-cpp-python",
            unit="thirdparty/llama_mmq_q8_0.cu",
            includes=GGML_INCLUDES,
            flags=GGML_FLAGS,
            outputs=("dst",),
            seed=808,
            note="an INT8 GEMM: m16n8k32 s8 -> s32 tensor cores, per-block f16 / f32 scales, stream-k tiling",
        ),
    )
}

# Consumer Blackwell (sm_120a) kernels: no sm_120 GPU here, so no capture; run in flashsim.ptx with arch="sm_120" and
# held to a float64 reference and, instruction by instruction, to mmasim (tests/test_ptx_thirdparty_sm120.py)
SM120_KERNELS = {
    k.name: k
    for k in (
        LlamaMatMulMXFP4(
            name="llama_mmq_mxfp4",
            package="llama-cpp-python",
            unit="thirdparty/llama_mmq_fp4.cu",
            includes=GGML_INCLUDES,
            flags=GGML_FLAGS,
            outputs=("dst",),
            seed=4120,
            note="an FP4 GEMM: mma.sync kind::mxf4.block_scale.scale_vec::2X m16n8k64, e8m0 block scales, ldmatrix",
        ),
        LlamaMatMulNVFP4(
            name="llama_mmq_nvfp4",
            package="llama-cpp-python",
            unit="thirdparty/llama_mmq_fp4.cu",
            includes=GGML_INCLUDES,
            flags=GGML_FLAGS + ("-DFLASHSIM_NVFP4",),
            outputs=("dst",),
            seed=4121,
            note="an FP4 GEMM: kind::mxf4nvf4.block_scale.scale_vec::4X m16n8k64, ue4m3 block scales, column scales",
        ),
    )
}
