"""A-priori error bound of O = sum_t (rescale) + P_t V_t accumulated by mma.sync in f16 versus f32.

The model (MMA-Sim, arXiv:2511.10909; Khattak & Mikaitis, arXiv:2512.07004; Fasi et al., PeerJ Comput. Sci.
7:e330; checked against the H200 capture tests/data/mma_sm90.npz; flashsim.arch: F fraction bits, block size):
one fused block computes
D = round(trunc(c) + sum_k trunc(a_k b_k)) where every term is truncated toward zero to F fraction bits below
2^E, E the largest term exponent, and the sum is rounded once (f32: toward zero, f16: to nearest even).

Per block (n_t terms: block_k products + c), with mu = max term scale and X = c + sum a_k b_k:
    |trunc error| < n_t 2^(E - F) <= n_t 2^-F mu,           2^E <= mu <= |c| + sum eps(a_k) eps(b_k)
    |D - X| <= (1 + u) n_t 2^-F mu + u |X| + eta            u = 2^-23 (f32 RZ) or 2^-11 (f16 RNE)
where eps(x) = max(|x|, 2^-14) for a nonzero f16 (a subnormal's exponent is clamped to the minimum, so its
scale is 2^-14, not |x|) and eta is the result's subnormal spacing (2^-149 RZ, 2^-25 RNE).
Hence with A = the same recurrence on magnitudes (|c| -> A, a_k b_k -> eps(a_k) eps(b_k)), one block adds
at most gamma (A + B) + eta to the error bound B, gamma = u + (1 + u) n_t 2^-F.

Per KV tile the kernel first rescales O by alpha = 2^(c (m_old - m_new)) <= 1: in f32 O <- RN32(O alpha); in f16
O <- RN16(O * RN16(alpha)) (mul.rn.f16x2 with alpha packed to f16). With ahat the alpha actually used:
    B <- ahat B + |ahat - alpha| A + u_m ahat (A + B) + eta_m,   A <- alpha A,   u_m = 2^-24 or 2^-11.

Closed form (proved below by induction in sympy, for a chain of n blocks with A non-decreasing):
    B_n <= ((1 + gamma)^n - 1) A_n + n eta (1 + gamma)^n
i.e. to first order n gamma A_n: n = N_k / 16 blocks (x2 on sm_80/86/89, whose k16 is two blocks of 8).
For N_k = 4096 on sm_90: f32 gamma = 6.3e-7, n gamma = 1.6e-4; f16 gamma = 4.9e-4, n gamma = 0.125: the f32
accumulation error stays below the final f16 rounding of O (2^-11 relative) while f16's worst case does not.
Hypothesis of the f16 bound: no overflow, |O| < 65504 (unnormalised O grows like l * max|v|, l up to N_k).

The check: random rows with the kernel's online-softmax alpha and P, V ~ N(0, 1) in f16, both accumulators run
through flashsim.mma (the tensor-core model) and compared element by element with an exact float64 reference
(products of f16 are exact in f64; its own rounding, <= (n + T) 2^-52 A, is added to the bound). Every element
must lie within the recursive bound; the report gives the observed / bound ratios.
"""

from __future__ import annotations

import pathlib
import sys

try:
    import flashsim  # noqa: F401
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np
import sympy as sp

from flashsim.arch import get_arch
from flashsim.prove.runner import run_as_script, run_steps

TITLE = "P@V error bound: f16 vs f32 accumulation under the tensor-core model, checked on flashsim.mma"

F16_MIN_NORMAL = 2.0**-14
ROUNDING = {  # accumulator -> (u of the mma result, eta of the mma result, u of the rescale mul, eta of it)
    "f32": (2.0**-23, 2.0**-149, 2.0**-24, 2.0**-150),
    "f16": (2.0**-11, 2.0**-25, 2.0**-11, 2.0**-25),
}

# ---- the bound as sympy expressions --------------------------------------------------------------------------
u, F, n_t, n, A, eta = sp.symbols("u F n_t n A eta", positive=True)
gamma = u + (1 + u) * n_t * 2 ** (-F)
closed_form = ((1 + gamma) ** n - 1) * A + n * eta * (1 + gamma) ** n


def gamma_value(arch, accum: str) -> float:
    a = get_arch(arch)
    return float(gamma.subs({u: ROUNDING[accum][0], F: a.mma_fraction_bits, n_t: a.mma_block_k + 1}))


def step_induction():
    """B_{i-1} <= closed(i-1, A_{i-1}) and A_{i-1} <= A_i  =>  B_{i-1} + gamma (A_i + B_{i-1}) + eta <= closed(i,
    A_i)."""
    g, a_prev, a_now, i = sp.symbols("g A_prev A_now i", positive=True)
    closed = lambda k, aa: ((1 + g) ** k - 1) * aa + k * eta * (1 + g) ** k  # noqa: E731
    step = closed(i - 1, a_prev) + g * (a_now + closed(i - 1, a_prev)) + eta
    # the step is increasing in A_prev, so A_prev = A_now is the worst case; the slack must be >= 0
    slack = sp.simplify(sp.expand(closed(i, a_now) - step.subs(a_prev, a_now)))
    increasing = sp.simplify(sp.diff(step, a_prev)) == sp.simplify((1 + g) * ((1 + g) ** (i - 1) - 1))
    nonneg = sp.simplify(slack - eta * ((1 + g) ** i - 1)) == 0  # slack = eta ((1+g)^i - 1) >= 0 for i >= 1
    ok = bool(increasing and nonneg)
    return ok, (
        f"induction step of B_n <= ((1+gamma)^n - 1) A_n + n eta (1+gamma)^n: slack = {sp.factor(slack)} "
        f">= 0; closed form {closed_form}"
    )


def step_numbers():
    rows = []
    for arch in ("sm_80", "sm_90", "sm_120"):
        a = get_arch(arch)
        blocks_per_k16 = 16 // a.mma_block_k
        for acc in ("f32", "f16"):
            g = gamma_value(arch, acc)
            nb = 4096 // 16 * blocks_per_k16
            rows.append(f"{arch} {acc}: gamma = {g:.3g}, N_k=4096 (n={nb}): n gamma = {nb * g:.3g}")
    return True, "; ".join(rows)


# ---- the empirical check ---------------------------------------------------------------------------------------
def _problem(rng, trials, n_keys, kv_tile, spread):
    """The kernel's P (f16), V (f16) and per-tile alpha (f32) for ``trials`` warps x 16 rows."""
    scale_log2 = np.float32((1 / np.sqrt(128)) * np.log2(np.e))
    s = (rng.standard_normal((trials, 16, n_keys)) * spread).astype(np.float32)
    v = rng.standard_normal((trials, n_keys, 8)).astype(np.float16)
    m = np.full((trials, 16), -np.inf, np.float32)
    p16, alphas = [], []
    for t in range(n_keys // kv_tile):
        st = s[:, :, t * kv_tile : (t + 1) * kv_tile]
        m_new = np.maximum(m, st.max(axis=2))
        alpha = np.where(np.isneginf(m), np.float32(0), np.exp2((m - m_new) * scale_log2)).astype(np.float32)
        p = np.exp2(st * scale_log2 - (m_new * scale_log2)[..., None]).astype(np.float32)
        p16.append(p.astype(np.float16))
        alphas.append(alpha)
        m = m_new
    return p16, v, alphas


def _eps(x: np.ndarray) -> np.ndarray:
    ax = np.abs(x.astype(np.float64))
    return np.where(ax == 0, 0.0, np.maximum(ax, F16_MIN_NORMAL))


def run_chain(p16, v, alphas, kv_tile, accum, arch):
    """O through flashsim.mma (model), the exact float64 reference, the magnitude recurrence A and the bound B."""
    from flashsim import mma

    a = get_arch(arch)
    u_r, eta_r, u_m, eta_m = ROUNDING[accum]
    blocks = 16 // a.mma_block_k
    g = gamma_value(arch, accum)
    trials = v.shape[0]
    dt = np.float32 if accum == "f32" else np.float16
    o = np.zeros((trials, 16, 8), dt)
    ref = np.zeros((trials, 16, 8))
    mag = np.zeros((trials, 16, 8))
    bound = np.zeros((trials, 16, 8))
    steps = 0
    for t, (pt, alpha) in enumerate(zip(p16, alphas)):
        al = alpha[..., None].astype(np.float64)
        if accum == "f32":
            ahat = al
            o = (o * alpha[..., None]).astype(np.float32)  # __fmul_rn
        else:
            ahat = alpha.astype(np.float16)[..., None]
            o = (o.astype(np.float32) * ahat.astype(np.float32)).astype(np.float16)  # mul.rn.f16x2 (exact product)
            ahat = ahat.astype(np.float64)
        bound = ahat * bound + np.abs(ahat - al) * mag + u_m * ahat * (mag + bound) + eta_m
        ref = ref * al
        mag = mag * al
        steps += 1
        for j in range(kv_tile // 16):
            pa = pt[:, :, j * 16 : (j + 1) * 16]
            vb = v[:, t * kv_tile + j * 16 : t * kv_tile + (j + 1) * 16, :]
            o = mma(np.ascontiguousarray(pa), np.ascontiguousarray(vb), o, arch)
            ref = ref + pa.astype(np.float64) @ vb.astype(np.float64)
            for half in range(blocks):  # one fused block of block_k products at a time
                ks = slice(half * a.mma_block_k, (half + 1) * a.mma_block_k)
                mag = mag + _eps(pa[:, :, ks]) @ _eps(vb[:, ks, :])
                bound = bound + g * (mag + bound) + eta_r
                steps += 1
    bound = bound + (steps + 1) * 2.0**-52 * mag  # the float64 reference's own error
    return o, ref, mag, bound, steps


def step_check(trials=32, n_keys=1024, kv_tile=64, arch="sm_90"):
    try:
        import flashsim

        flashsim.mma  # noqa: B018 (the tensor-core model must exist)
    except (ImportError, AttributeError) as e:
        return False, f"flashsim.mma unavailable: {e}"
    rng = np.random.default_rng(11)
    lines, ok = [], True
    for spread in (1.0, 6.0):
        p16, v, alphas = _problem(rng, trials, n_keys, kv_tile, spread)
        for accum in ("f32", "f16"):
            o, ref, mag, bound, steps = run_chain(p16, v, alphas, kv_tile, accum, arch)
            err = np.abs(o.astype(np.float64) - ref)
            finite = np.isfinite(o).all()
            within = bool(finite and (err <= bound).all())
            ok &= within
            closed = float(
                closed_form.subs(
                    {
                        u: ROUNDING[accum][0],
                        F: get_arch(arch).mma_fraction_bits,
                        n_t: get_arch(arch).mma_block_k + 1,
                        n: steps,
                        A: 1,
                        eta: 0,
                    }
                )
            )
            ratio = float((err / bound).max())
            rel = float((err / mag).max())
            lines.append(
                f"scores x{spread:g}, {accum}: max |err| / A = {rel:.3g}, max err / bound = {ratio:.3g}, "
                f"closed form / A = {closed:.3g}, max |O| = {float(np.abs(o.astype(np.float64)).max()):.4g}"
                + ("" if within else "  OUTSIDE THE BOUND")
            )
    lines.insert(0, f"{arch}, {trials} warps x 16 rows x 8 cols, N_k={n_keys}, B_c={kv_tile}, through flashsim.mma")
    return ok, "; ".join(lines)


def step_can_fail():
    """The bound is not vacuous: with gamma of f32 the f16 chain falls outside it (so the check can fail)."""
    try:
        import flashsim

        flashsim.mma  # noqa: B018
    except (ImportError, AttributeError) as e:
        return False, f"flashsim.mma unavailable: {e}"
    rng = np.random.default_rng(3)
    p16, v, alphas = _problem(rng, 8, 256, 64, 1.0)
    saved = ROUNDING["f16"]
    try:
        ROUNDING["f16"] = ROUNDING["f32"]
        o, ref, _, bound, _ = run_chain(p16, v, alphas, 64, "f16", "sm_90")
    finally:
        ROUNDING["f16"] = saved
    outside = int((np.abs(o.astype(np.float64) - ref) > bound).sum())
    return outside > 0, f"the f16 chain checked against the f32 bound: {outside} of {o.size} elements outside"


STEPS = (
    ("induction (sympy)", step_induction),
    ("gamma per arch", step_numbers),
    ("bound vs flashsim.mma", step_check),
    ("the check can fail", step_can_fail),
)


def check():
    return run_steps(STEPS)


def test_pv_error_bound():
    holds, details = check()
    assert holds, details


if __name__ == "__main__":
    run_as_script(TITLE, check)
