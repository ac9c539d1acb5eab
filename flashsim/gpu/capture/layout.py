"""Check flashsim.layout on the GPU at hand: ``python3 -m flashsim.gpu.capture.layout --out DIR``.

Runs kernel/capture/layout.cu (one warp: ldmatrix .x1/.x2/.x4 with and without .trans, mma.m16n8k16 with f32
and f16 accumulation and bf16 inputs, the S -> P repack, P @ V, cvt.rn.{f16,bf16}x2.f32, shfl.sync in every
mode), compares every lane's raw registers with flashsim.layout (flashsim/layout/silicon.py), prints
PASS/FAIL per map and writes ``layout_sm90.npz`` (named after the arch: inputs, the raw (32, NOUT) dump, the slot
table, the device name, and the provenance of the build: flashsim.provenance): copy it to tests/data/ for
tests/test_layout_silicon.py (tools/device_round.sh captures does it all).

Exit status: 0 when every map matches, 2 when some did not (the npz is still written), 1 on an error.
``--fake`` runs the host logic against a scalar, lane-by-lane Python stand-in for the GPU (no GPU needed).
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import ml_dtypes
import numpy as np

from ... import provenance
from ...layout import silicon
from .. import runtime as rt
from ..build import compile_file

KERNEL = "capture/layout.cu"
PROVENANCE_NAME = "layout_capture"  # flashsim.provenance: this kernel's define set and fingerprint


class GpuDevice:
    """kernel/capture/layout.cu on the current GPU."""

    def __init__(self):

        self.rt = rt
        dev = rt.require_gpu()
        self.arch = rt.current_arch()
        self.name = str(getattr(dev, "name", "GPU"))
        build = compile_file(KERNEL, arch=self.arch, defines=provenance.build_defines(PROVENANCE_NAME))
        self.kernel = rt.load(build, "layout_capture")

    def run(self, inputs: dict) -> np.ndarray:
        rt = self.rt
        put = lambda x, dt: rt.to_device(np.ascontiguousarray(x, dtype=dt))
        out = rt.empty((32, silicon.nout()), np.uint32).zero_()
        rt.launch(
            self.kernel,
            (1,),
            (32,),
            put(inputs["tiles"], np.uint16),
            put(inputs["addr"], np.int32),
            put(inputs["host_regs"], np.uint32),
            put(inputs["cvt_in"], np.uint32),
            put(inputs["shfl_in"], np.uint32),
            put(inputs["shfl_mode"], np.int32),
            put(inputs["shfl_b"], np.int32),
            put(inputs["shfl_c"], np.int32),
            out,
        )
        return out.to_numpy()


class FakeDevice:
    """The capture kernel re-told lane by lane in plain Python, from the PTX ISA's wording.

    It shares no code with flashsim.layout (no tables, no vectorised maps), so ``--fake`` and the CPU tests
    check the host side (input layout, slot offsets, packing order, comparison) against an independent
    reading of the instructions. ``corrupt`` optionally perturbs the dump to show that a fault is caught.
    """

    name, arch = "scalar Python stand-in", "fake"

    def __init__(self, corrupt=None):
        self.corrupt = corrupt

    # -- instruction semantics, one lane at a time ----------------------------------------------------
    @staticmethod
    def _pack(lo: int, hi: int) -> int:
        return (int(lo) & 0xFFFF) | ((int(hi) & 0xFFFF) << 16)

    def _ldmatrix(self, smem, row_addr, num, trans):
        """row_addr[lane] = element offset of the row that lane gives; returns regs[lane][j]."""
        regs = [[0] * num for _ in range(32)]
        for lane in range(32):
            for j in range(num):
                if not trans:  # row lane/4 of matrix j, elements 2(lane%4), +1
                    row = row_addr[8 * j + lane // 4]
                    lo, hi = smem[row + 2 * (lane % 4)], smem[row + 2 * (lane % 4) + 1]
                else:  # transposed: rows 2(lane%4), +1 of matrix j, element lane/4
                    lo = smem[row_addr[8 * j + 2 * (lane % 4)] + lane // 4]
                    hi = smem[row_addr[8 * j + 2 * (lane % 4) + 1] + lane // 4]
                regs[lane][j] = self._pack(lo, hi)
        return regs

    @staticmethod
    def _half(word: int, h: int) -> int:
        return (word >> (16 * h)) & 0xFFFF

    def _mma(self, a_regs, b_regs, c_vals, in_dtype):
        """a_regs[lane][4], b_regs[lane][2] (16-bit pairs), c_vals[lane][4] floats; returns d[lane][4] floats."""
        A = np.zeros((16, 16))
        B = np.zeros((16, 8))
        C = np.zeros((16, 8))
        as_float = lambda bits: float(np.array(bits, np.uint16).view(in_dtype))
        for lane in range(32):
            g, t = lane // 4, lane % 4
            for i in range(8):  # a_i: row g (+8 for a2, a3, a6, a7), col 2t + i%2 (+8 for a4..a7)
                row = g + (8 if i in (2, 3, 6, 7) else 0)
                col = 2 * t + i % 2 + (8 if i >= 4 else 0)
                A[row, col] = as_float(self._half(a_regs[lane][i // 2], i % 2))
            for i in range(4):  # b_i: row 2t + i%2 (+8 for b2, b3), col g
                B[2 * t + i % 2 + (8 if i >= 2 else 0), g] = as_float(self._half(b_regs[lane][i // 2], i % 2))
            for i in range(4):  # c_i: row g (+8 for c2, c3), col 2t + i%2
                C[g + (8 if i >= 2 else 0), 2 * t + i % 2] = c_vals[lane][i]
        D = A @ B + C  # the inputs keep this exact in the accumulator type
        return [
            [float(D[g + (8 if i >= 2 else 0), 2 * t + i % 2]) for i in range(4)]
            for g, t in ((lane // 4, lane % 4) for lane in range(32))
        ]

    @staticmethod
    def _f32_word(x: float) -> int:
        return int(np.array(x, np.float32).view(np.uint32))

    @staticmethod
    def _cvt16(x_bits: int, dtype) -> int:
        x = np.array(x_bits, np.uint32).view(np.float32)
        if np.isnan(x):
            return 0x7FFF
        with np.errstate(over="ignore"):
            return int(np.array(x).astype(dtype).view(np.uint16))

    def _f16x2_acc(self, d):
        return [
            [
                self._pack(
                    self._cvt16(self._f32_word(d[ln][0]), np.float16), self._cvt16(self._f32_word(d[ln][1]), np.float16)
                ),
                self._pack(
                    self._cvt16(self._f32_word(d[ln][2]), np.float16), self._cvt16(self._f32_word(d[ln][3]), np.float16)
                ),
            ]
            for ln in range(32)
        ]

    def _f16x2_vals(self, regs):
        as_f = lambda bits: float(np.array(bits, np.uint16).view(np.float16))
        return [[as_f(self._half(regs[ln][i // 2], i % 2)) for i in range(4)] for ln in range(32)]

    @staticmethod
    def _shfl(mode: int, a, b, c: int):
        """PTX shfl.sync pseudo-code, per lane; returns (d[lane], p[lane])."""
        d, p = [0] * 32, [0] * 32
        cval, seg = c & 0x1F, (c >> 8) & 0x1F
        for lane in range(32):
            bval = int(b[lane]) & 0x1F
            max_lane = (lane & seg) | (cval & ~seg & 0x1F)
            min_lane = lane & seg
            if mode == 0:
                j = lane - bval
                ok = j >= max_lane
            elif mode == 1:
                j = lane + bval
                ok = j <= max_lane
            elif mode == 2:
                j = lane ^ bval
                ok = j <= max_lane
            else:
                j = min_lane | (bval & ~seg & 0x1F)
                ok = j <= max_lane
            d[lane], p[lane] = int(a[j if ok else lane]), int(ok)
        return d, p

    # -- the kernel ----------------------------------------------------------------------------------
    def run(self, inputs: dict) -> np.ndarray:
        off = silicon.slot_offsets()
        out = np.zeros((32, silicon.nout()), np.uint32)
        smem = [int(x) for x in inputs["tiles"].reshape(-1)]
        addr = inputs["addr"]
        at = lambda tile, col: [silicon.TILE * silicon.TILES.index(tile) + int(addr[ln, col]) for ln in range(32)]
        A_X4, KT_X2, KT_X4, V_X2T, V_X4T, R_PERM = range(6)

        def store(name, regs):
            o, n = off[name]
            for ln in range(32):
                for i in range(n):
                    w = regs[ln][i]
                    out[ln, o + i] = self._f32_word(w) if isinstance(w, float) else int(w)

        store("ld_a_x4", self._ldmatrix(smem, at("a_u", A_X4), 4, False))
        store("ld_kt_x2", self._ldmatrix(smem, at("k_u", KT_X2), 2, False))
        store("ld_kt_x4", self._ldmatrix(smem, at("k_u", KT_X4), 4, False))
        store("ld_v_x2t", self._ldmatrix(smem, at("v_u", V_X2T), 2, True))
        store("ld_v_x4t", self._ldmatrix(smem, at("v_u", V_X4T), 4, True))
        for num in (1, 2, 4):
            store(f"ld_r_x{num}", self._ldmatrix(smem, at("r", R_PERM), num, False))
            store(f"ld_r_x{num}t", self._ldmatrix(smem, at("r", R_PERM), num, True))

        a = self._ldmatrix(smem, at("a_m", A_X4), 4, False)
        bk = self._ldmatrix(smem, at("k_m", KT_X4), 4, False)
        bv = self._ldmatrix(smem, at("v_m", V_X4T), 4, True)
        h = inputs["host_regs"]
        c32 = [[float(np.array(h[ln, i], np.uint32).view(np.float32)) for i in range(4)] for ln in range(32)]
        c16 = self._f16x2_vals([[int(h[ln, 4]), int(h[ln, 5])] for ln in range(32)])
        zero = [[0.0] * 4 for _ in range(32)]
        lo2, hi2 = [r[:2] for r in bk], [r[2:] for r in bk]
        store("mma_f32", self._mma(a, lo2, c32, np.float16))
        store("mma_f16", self._f16x2_acc(self._mma(a, lo2, c16, np.float16)))
        abf = [[int(x) for x in h[ln, 6:10]] for ln in range(32)]
        bbf = [[int(x) for x in h[ln, 10:12]] for ln in range(32)]
        store("mma_bf16", self._mma(abf, bbf, zero, ml_dtypes.bfloat16))
        s0, s1 = self._mma(a, lo2, zero, np.float16), self._mma(a, hi2, zero, np.float16)
        s = [s0[ln] + s1[ln] for ln in range(32)]
        store("s", s)
        p = [
            [
                self._pack(
                    self._cvt16(self._f32_word(s[ln][2 * q]), np.float16),
                    self._cvt16(self._f32_word(s[ln][2 * q + 1]), np.float16),
                )
                for q in range(4)
            ]
            for ln in range(32)
        ]
        store("p", p)
        v_lo, v_hi = [r[:2] for r in bv], [r[2:] for r in bv]
        o0, o1 = self._mma(p, v_lo, zero, np.float16), self._mma(p, v_hi, zero, np.float16)
        store("o_f32", [o0[ln] + o1[ln] for ln in range(32)])
        f0, f1 = self._f16x2_acc(o0), self._f16x2_acc(o1)
        store("o_f16", [f0[ln] + f1[ln] for ln in range(32)])

        cvt = inputs["cvt_in"]
        store(
            "cvt_f16x2",
            [
                [
                    self._pack(
                        self._cvt16(int(cvt[ln, 2 * i]), np.float16), self._cvt16(int(cvt[ln, 2 * i + 1]), np.float16)
                    )
                    for i in range(silicon.NCVT)
                ]
                for ln in range(32)
            ],
        )
        store(
            "cvt_bf16x2",
            [
                [
                    self._pack(
                        self._cvt16(int(cvt[ln, 2 * i]), ml_dtypes.bfloat16),
                        self._cvt16(int(cvt[ln, 2 * i + 1]), ml_dtypes.bfloat16),
                    )
                    for i in range(silicon.NCVT)
                ]
                for ln in range(32)
            ],
        )
        res = [
            self._shfl(int(m), inputs["shfl_in"][k], inputs["shfl_b"][k], int(c))
            for k, (m, c) in enumerate(zip(inputs["shfl_mode"], inputs["shfl_c"]))
        ]
        store("shfl", [[res[k][0][ln] for k in range(silicon.NSHFL)] for ln in range(32)])
        store("shfl_pred", [[res[k][1][ln] for k in range(silicon.NSHFL)] for ln in range(32)])
        if self.corrupt is not None:
            out = self.corrupt(out)
        return out


def save(path: pathlib.Path, inputs: dict, out: np.ndarray, device) -> None:
    """The capture, with ``provenance`` (json: the kernel source's hash and the build's defines)."""
    names = np.array([n for n, _ in silicon.SLOTS])
    sizes = np.array([n for _, n in silicon.SLOTS], np.int32)
    record = provenance.to_json(provenance.fingerprint(PROVENANCE_NAME))
    np.savez_compressed(
        path,
        out=out,
        slot_names=names,
        slot_sizes=sizes,
        arch=np.array(device.arch),
        device=np.array(device.name),
        provenance=np.array(record),
        **{f"in_{k}": v for k, v in inputs.items()},
    )


def load(path) -> tuple[dict, np.ndarray, tuple, str, str]:
    """(inputs, out, slots, arch, device name) from a saved capture."""
    with np.load(path) as z:
        inputs = {k[3:]: z[k] for k in z.files if k.startswith("in_")}
        slots = tuple((str(n), int(s)) for n, s in zip(z["slot_names"], z["slot_sizes"]))
        return inputs, z["out"], slots, str(z["arch"]), str(z["device"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m flashsim.gpu.capture.layout",
        description=__doc__.splitlines()[0],
        epilog="Writes layout_<arch>.npz (e.g. layout_sm90.npz) into DIR.",
    )
    parser.add_argument("--out", required=True, help="folder for the output file (created if missing)")
    parser.add_argument("--fake", action="store_true", help="scalar Python stand-in for the GPU (tests the host logic)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    try:
        device = FakeDevice() if args.fake else GpuDevice()
        print(f"layout capture on {device.name} ({device.arch})", flush=True)
        inputs = silicon.make_inputs(args.seed)
        out = device.run(inputs)
        checks = silicon.compare(inputs, out)
        out_dir = pathlib.Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"layout_{device.arch.replace('_', '')}.npz"
        save(path, inputs, out, device)
    except Exception as exc:  # GPUError, CompileError, OSError...: say what failed and exit non-zero
        print(f"layout capture failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for c in checks:
        print(c)
    failed = [c.name for c in checks if not c.ok]
    print(f"{len(checks) - len(failed)} of {len(checks)} maps match; wrote {path} ({path.stat().st_size} bytes)")
    print("PASS" if not failed else f"FAIL: {', '.join(failed)}")
    return 0 if not failed else 2


if __name__ == "__main__":
    sys.exit(main())
