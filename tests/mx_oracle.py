"""NVIDIA's own reference of the OCP MX conversions as an oracle for the tests: the host code of CUDA 13.0's
cuda_fp4.h / cuda_fp6.h / cuda_fp8.h (__nv_cvt_float_to_fp4, __nv_cvt_float_to_fp6, __nv_cvt_float_to_e8m0 ... :
the functions whose device code is the cvt instructions under test), compiled here with the host C++ compiler and
called on whole arrays. Independent of flashsim.numerics: a program NVIDIA wrote, not a formula of ours."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np

SOURCE = r"""
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <vector>
#include <string>
// "f32": stdin uint32 f32 patterns -> 7 bytes each: e2m1, e2m3, e3m2 (round to nearest, satfinite), then ue8m0 rz,
//        rz satfinite, rp, rp satfinite
// "bf16": stdin uint16 bf16 patterns -> 4 bytes each: ue8m0 rz, rz satfinite, rp, rp satfinite
// "decode": no input -> 256 x (e2m1 -> f16, e2m3 -> f16, e3m2 -> f16, ue8m0 -> bf16) as uint16 (codes masked to their
//           width for the elements)
int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "f32";
  if (mode == "decode") {
    for (unsigned c = 0; c < 256; ++c) {
      __half_raw a = __nv_cvt_fp4_to_halfraw((__nv_fp4_storage_t)(c & 0xF), __NV_E2M1);
      __half_raw b = __nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)(c & 0x3F), __NV_E2M3);
      __half_raw d = __nv_cvt_fp6_to_halfraw((__nv_fp6_storage_t)(c & 0x3F), __NV_E3M2);
      __nv_bfloat16_raw e = __nv_cvt_e8m0_to_bf16raw((__nv_fp8_storage_t)c);
      unsigned short o[4] = {a.x, b.x, d.x, e.x};
      fwrite(o, 2, 4, stdout);
    }
    return 0;
  }
  if (mode == "bf16") {
    uint16_t u;
    while (fread(&u, 2, 1, stdin) == 1) {
      __nv_bfloat16_raw r; r.x = u;
      unsigned char o[4] = {
        (unsigned char)__nv_cvt_bfloat16raw_to_e8m0(r, __NV_NOSAT, cudaRoundZero),
        (unsigned char)__nv_cvt_bfloat16raw_to_e8m0(r, __NV_SATFINITE, cudaRoundZero),
        (unsigned char)__nv_cvt_bfloat16raw_to_e8m0(r, __NV_NOSAT, cudaRoundPosInf),
        (unsigned char)__nv_cvt_bfloat16raw_to_e8m0(r, __NV_SATFINITE, cudaRoundPosInf)};
      fwrite(o, 1, 4, stdout);
    }
    return 0;
  }
  uint32_t u;
  while (fread(&u, 4, 1, stdin) == 1) {
    float f; memcpy(&f, &u, 4);
    unsigned char o[7] = {
      (unsigned char)__nv_cvt_float_to_fp4(f, __NV_E2M1, cudaRoundNearest),
      (unsigned char)__nv_cvt_float_to_fp6(f, __NV_E2M3, cudaRoundNearest),
      (unsigned char)__nv_cvt_float_to_fp6(f, __NV_E3M2, cudaRoundNearest),
      (unsigned char)__nv_cvt_float_to_e8m0(f, __NV_NOSAT, cudaRoundZero),
      (unsigned char)__nv_cvt_float_to_e8m0(f, __NV_SATFINITE, cudaRoundZero),
      (unsigned char)__nv_cvt_float_to_e8m0(f, __NV_NOSAT, cudaRoundPosInf),
      (unsigned char)__nv_cvt_float_to_e8m0(f, __NV_SATFINITE, cudaRoundPosInf)};
    fwrite(o, 1, 7, stdout);
  }
  return 0;
}
"""

F32_COLUMNS = ("e2m1", "e2m3", "e3m2", "rz", "rz.satfinite", "rp", "rp.satfinite")
BF16_COLUMNS = ("rz", "rz.satfinite", "rp", "rp.satfinite")


def cuda_include() -> pathlib.Path | None:
    """The CUDA include directory holding cuda_fp4.h (next to nvcc on PATH), or None."""
    nvcc = shutil.which("nvcc")
    candidates = [pathlib.Path("/usr/local/cuda/include"), pathlib.Path("/usr/local/cuda-13.0/include")]
    if nvcc:
        real = pathlib.Path(nvcc).resolve()
        candidates.insert(0, real.parent.parent / "include")
        text = real.read_text(errors="ignore") if real.stat().st_size < 4096 else ""
        for word in text.split():  # a wrapper script: exec /usr/local/cuda-X/bin/nvcc "$@"
            if word.endswith("/bin/nvcc"):
                candidates.insert(0, pathlib.Path(word).parent.parent / "include")
    return next((c for c in candidates if (c / "cuda_fp4.h").exists()), None)


class Oracle:
    """The compiled reference program (``build`` returns None where no C++ compiler or CUDA headers are here)."""

    def __init__(self, exe: pathlib.Path):
        self.exe = str(exe)

    @classmethod
    def build(cls, workdir: pathlib.Path) -> Oracle | None:
        include, cxx = cuda_include(), shutil.which("g++") or shutil.which("c++")
        if include is None or cxx is None:
            return None
        src, exe = workdir / "mx_oracle.cpp", workdir / "mx_oracle"
        src.write_text(SOURCE)
        subprocess.run([cxx, "-O1", f"-I{include}", str(src), "-o", str(exe)], check=True, capture_output=True)
        return cls(exe)

    def _run(self, mode: str, data: bytes) -> bytes:
        return subprocess.run([self.exe, mode], input=data, capture_output=True, check=True).stdout

    def from_f32(self, bits: np.ndarray) -> dict[str, np.ndarray]:
        """Codes of every f32 pattern of ``bits`` in each column of F32_COLUMNS."""
        out = np.frombuffer(self._run("f32", np.ascontiguousarray(bits, np.uint32).tobytes()), np.uint8)
        out = out.reshape(-1, len(F32_COLUMNS))
        return {name: out[:, i] for i, name in enumerate(F32_COLUMNS)}

    def from_bf16(self, bits: np.ndarray) -> dict[str, np.ndarray]:
        out = np.frombuffer(self._run("bf16", np.ascontiguousarray(bits, np.uint16).tobytes()), np.uint8)
        out = out.reshape(-1, len(BF16_COLUMNS))
        return {name: out[:, i] for i, name in enumerate(BF16_COLUMNS)}

    def decode(self) -> dict[str, np.ndarray]:
        """For codes 0..255: the f16 bits of e2m1 / e2m3 / e3m2 (the code's low bits) and the bf16 bits of ue8m0."""
        out = np.frombuffer(self._run("decode", b""), np.uint16).reshape(256, 4)
        return {name: out[:, i] for i, name in enumerate(("e2m1", "e2m3", "e3m2", "ue8m0"))}
