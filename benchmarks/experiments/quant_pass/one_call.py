"""One quant="int8" call at 4 x 16 x 4096 x 128 (f16, keys with a mean), for a profiler to time the quantization
kernels apart: ncu --kernel-name regex:'k_mean|quantize' --metrics gpu__time_duration.sum python3 <this file>."""

import torch

import flashsim.gpu

q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
o, lse = flashsim.gpu.attention(q, k, v, quant="int8")
torch.cuda.synchronize()
print("ok", tuple(o.shape))
