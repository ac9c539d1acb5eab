"""Row sums on the tensor core, judged on the CPU before any GPU time: the emulator with the experiment's patch
(row_sum_mma_emulator.patch: KernelConfig.row_sum_mma, kernel_program.accumulate's step 5 as P @ ones through the
tensor-core model, from l * alpha in the f32 accumulator) against the kernel's program as it is, both against a
float64 attention. Run inside a scratch checkout of the patch's base with the patch applied:

    git worktree add /tmp/rsm <base> && cd /tmp/rsm && tail -n +2 <this folder>/row_sum_mma_emulator.patch | git apply
    PYTHONPATH=. python <this folder>/lse_check.py > <this folder>/lse_check.txt
"""

import numpy as np

from flashsim.commands.verify import emulator_outputs, make_case_inputs
from flashsim.config import KernelConfig

print("max |error| against float64, one problem of 2 heads x 137 queries, d = 64, sm_90 defaults, normal inputs")
print("keys  P@V    causal | LSE: FADD row sums  tensor-core row sums | O: FADD  tensor core | O bits equal")
for nk in (201, 1201, 4001):
    for acc in ("f32", "f16"):
        for causal in (False, True):
            c = KernelConfig.default("sm_90", head_dim=64, pv_accum=acc, causal=causal)
            q, k, v = make_case_inputs("normal", 1, 2, 137, nk, 64, 7)
            o0, l0, _ = emulator_outputs(q, k, v, c, "sm_90")
            o1, l1, _ = emulator_outputs(q, k, v, c.with_(row_sum_mma=True), "sm_90")
            qf, kf, vf = (x.astype(np.float64) for x in (q, k, v))
            s = qf @ np.swapaxes(kf, -1, -2) / 8.0
            if causal:  # bottom-right aligned, as the kernel
                s = np.where(np.arange(nk)[None, :] > np.arange(137)[:, None] + (nk - 137), -np.inf, s)
            mx = s.max(-1, keepdims=True)
            e = np.exp(s - mx)
            lse = np.log(e.sum(-1)) + mx[..., 0]
            ref = (e / e.sum(-1, keepdims=True)) @ vf
            err = lambda x, r: float(np.abs(x.astype(np.float64) - r).max())
            print(
                f"{nk:5} {acc:5} {str(causal):6} | {err(l0, lse):18.2e} {err(l1, lse):20.2e} | "
                f"{err(o0, ref):7.2e} {err(o1, ref):11.2e} | {np.mean(o0.view(np.uint16) == o1.view(np.uint16)):.3f}",
                flush=True,
            )
