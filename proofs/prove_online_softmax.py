"""Online softmax is exact: the kernel's (m, l, O) recurrence ends with O / l = softmax(S) V.

Proved with sympy, for one query row (rows are independent) and one column of V (O is linear in V):

1. invariant   after the keys 1..n have been seen, with running reference value M,
                   l = sum_{j<=n} exp(s_j - M),   O = sum_{j<=n} exp(s_j - M) v_j
   base        n = 0: both sums are empty, l = O = 0 (the kernel's initial values) for every M;
   step        one tile of b keys n+1..n+b with any new reference M' and rescale exp(M - M'):
                   l exp(M - M') + sum_{n<j<=n+b} exp(s_j - M') = sum_{j<=n+b} exp(s_j - M')   (same for O);
               n and b are symbols, so by induction over the number of tiles the invariant holds after any
               number of tiles of any sizes;
   final       O / l = sum exp(s_j) v_j / sum exp(s_j) = softmax(s) . v, whatever M is: the result depends neither
               on the tile partition nor on the reference values, so the running max can be any number: the
               true max, an upper bound, or the 0 the kernel substitutes while a row has seen only -inf
               (the max only keeps exp(s - M) <= 1, which is about overflow, not about exactness).
2. exp2 form   the kernel computes p = 2^(s c - m c) with c = softmax_scale * log2(e) in one FFMA
               (fma(s, c, -(m c))): 2^(c (s - m)) = exp(scale (s - m)), so step 1 applies to the scores
               scale * s; the rescale 2^(c (m_old - m_new)) composes the same way, and
               lse = m scale + ln(l) = ln sum_j exp(scale s_j).
3. concrete    every partition of 7 keys into tiles (64 of them) with exact integer scores and arbitrary
               reference choices (the true running max, max + 3, and 0 for all-masked prefixes), in exact
               arithmetic with e as a free variable x (exp(k) = x^k: Laurent polynomials with rational
               coefficients): O den = num l, where softmax . v = num / den, holds as a polynomial identity.
4. FFMA at the max   for s = m the FFMA argument is fma(m, c, -RN(m c)) = m c - RN(m c) exactly (the error of a
               rounded product is representable and the FMA computes it exactly), so |argument| <= 2^-24 |m c|,
               and for s <= m the argument is <= that: p <= 2^(2^-24 |m c|), never an overflow; checked on
               random float32 triples against exact rational arithmetic.
5. -inf guard  IEEE arithmetic modelled explicitly (below): a fully masked tile leaves (m, l, O) unchanged, a row
               with no visible key ends with l = 0, and the epilogue gives O = 0 and lse = +inf without a NaN;
               without the guard (subtracting m = -inf) a NaN appears, so the guard is needed.

How IEEE -inf is modelled. sympy's oo is not IEEE infinity: Max(nan, 1) raises (IEEE fmaxf returns 1),
log(0) and 1/0 give the complex zoo (IEEE: -inf and +inf), -oo*x stays unevaluated for a symbol of unknown sign,
and there is no signed zero. So values here are ``Ext``: a finite sympy expression (assumed real, finite) or one of
+inf, -inf, NaN, with the IEEE 754 rules written out for the operations the kernel uses: add, multiply, FMA,
fmaxf (NaN-ignoring maxNum), ex2 (ex2(-inf) = +0, ex2(+inf) = +inf, ex2(NaN) = NaN), comparisons.

Runnable alone (``python3 proofs/prove_online_softmax.py``: prints each step, exit 0 iff all hold), collected
by pytest (``test_online_softmax``), and run by ``flashsim prove`` through ``check()``.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import sympy as sp

from flashsim.prove.runner import run_as_script, run_steps

TITLE = "online softmax: rescaled (m, l, O) recurrence equals softmax(S) V; -inf guard has no NaN"

# --------------------------------------------------------------------------------------------------------------
# 1. the invariant, symbolically
# --------------------------------------------------------------------------------------------------------------
j = sp.Symbol("j", integer=True)
n, b, N = sp.symbols("n b N", integer=True, nonnegative=True)
s = sp.IndexedBase("s", real=True)
v = sp.IndexedBase("v", real=True)
M, M_old, M_new = sp.symbols("M M_old M_new", real=True)


def l_of(count, ref, start=1):
    """sum_{start <= j <= count} exp(s_j - ref)."""
    return sp.Sum(sp.exp(s[j] - ref), (j, start, count))


def o_of(count, ref, start=1):
    return sp.Sum(sp.exp(s[j] - ref) * v[j], (j, start, count))


def _zero(expr) -> bool:
    return sp.simplify(expr) == 0


def step_base():
    ok = l_of(0, M).doit() == 0 and o_of(0, M).doit() == 0
    return ok, "n = 0: l = O = 0 for every reference M (empty sums)"


def step_term_identity():
    ok = _zero(sp.exp(s[j] - M_old) * sp.exp(M_old - M_new) - sp.exp(s[j] - M_new))
    return ok, "exp(s_j - M_old) * exp(M_old - M_new) = exp(s_j - M_new)"


def step_preservation():
    l_new = l_of(n, M_old) * sp.exp(M_old - M_new) + l_of(n + b, M_new, n + 1)
    o_new = o_of(n, M_old) * sp.exp(M_old - M_new) + o_of(n + b, M_new, n + 1)
    ok = _zero(l_new - l_of(n + b, M_new)) and _zero(o_new - o_of(n + b, M_new))
    return ok, (
        "l exp(M_old - M_new) + sum_{n<j<=n+b} exp(s_j - M_new) = sum_{j<=n+b} exp(s_j - M_new), and the "
        "same for O: symbolic in n, b, M_old, M_new (any new reference, not only the max)"
    )


def step_final():
    ratio = o_of(N, M) / l_of(N, M)
    softmax_v = sp.Sum(sp.exp(s[j]) * v[j], (j, 1, N)) / sp.Sum(sp.exp(s[j]), (j, 1, N))
    ok = _zero(ratio - softmax_v)
    return ok, "O / l = sum exp(s_j) v_j / sum exp(s_j) for every M: independent of partition and reference"


# --------------------------------------------------------------------------------------------------------------
# 2. the exp2 form with the folded scale
# --------------------------------------------------------------------------------------------------------------
scale = sp.Symbol("scale", positive=True)
c = scale * sp.log(sp.E, 2)  # softmax_scale * log2(e)
sv, mv, m1, m2 = sp.symbols("s m m_1 m_2", real=True)


def step_exp2():
    fold = sp.expand(sv * c - mv * c - c * (sv - mv)) == 0  # the FFMA's operand: s c - m c = c (s - m)
    same = _zero(2 ** (c * (sv - mv)) - sp.exp(scale * (sv - mv)))
    rescale = _zero(2 ** (c * (sv - m1)) * 2 ** (c * (m1 - m2)) - 2 ** (c * (sv - m2)))
    # lse: m scale + ln(sum_j 2^(c (s_j - m))) = ln(sum_j exp(scale s_j)); with K terms symbolically in m
    terms = sp.symbols("t0:4", real=True)
    l2 = sum(2 ** (c * (t - mv)) for t in terms)
    lse = _zero(sp.exp(mv * scale + sp.log(l2)) - sum(sp.exp(scale * t) for t in terms))
    ok = fold and same and rescale and lse
    return ok, (
        "2^(c (s - m)) = exp(scale (s - m)) with c = scale log2(e) (s c - m c = c (s - m), one FFMA); "
        "2^(c (s - m1)) 2^(c (m1 - m2)) = 2^(c (s - m2)); exp(m scale + ln l) = sum exp(scale s_j)"
    )


# --------------------------------------------------------------------------------------------------------------
# 3. concrete: every tile partition of 7 keys, several reference strategies, exact arithmetic
# --------------------------------------------------------------------------------------------------------------
class Laurent(dict):
    """Exact Laurent polynomial in x = e: {k: Fraction coefficient of x^k}; exp(k) for integer k is x^k."""

    @staticmethod
    def mono(k, coef=1):
        return Laurent({k: Fraction(coef)}) if coef else Laurent()

    def __add__(self, other):
        out = Laurent(self)
        for k, a in other.items():
            out[k] = out.get(k, 0) + a
            if out[k] == 0:
                del out[k]
        return out

    def __mul__(self, other):
        out = Laurent()
        for k1, a1 in self.items():
            for k2, a2 in other.items():
                out = out + Laurent.mono(k1 + k2, a1 * a2)
        return out


def _online(scores, values, tiles, reference, rescale_l=True):
    """The kernel's recurrence on one row; scores None = masked; reference(m_running, tile_max) -> new M.
    rescale_l=False is the classic bug (l not rescaled): the negative control."""
    m, l_acc, o_acc, start = None, Laurent(), Laurent(), 0
    for size in tiles:
        idx = range(start, start + size)
        start += size
        visible = [i for i in idx if scores[i] is not None]
        tile_max = max((scores[i] for i in visible), default=None)
        m_new = reference(m, tile_max)
        alpha = Laurent() if m is None else Laurent.mono(m - m_new)  # m None: nothing seen, l = O = 0 anyway
        l_acc = l_acc * alpha if (rescale_l or m is None) else l_acc
        o_acc = o_acc * alpha
        for i in visible:
            l_acc = l_acc + Laurent.mono(scores[i] - m_new)
            o_acc = o_acc + Laurent.mono(scores[i] - m_new, values[i])
        m = m_new
    return l_acc, o_acc


def _compositions(total):
    for cuts in itertools.product((0, 1), repeat=total - 1):
        sizes, run = [], 1
        for cut in cuts:
            if cut:
                sizes.append(run)
                run = 1
            else:
                run += 1
        yield sizes + [run]


def _true_max(m, tile_max):
    cands = [t for t in (m, tile_max) if t is not None]
    return max(cands) if cands else 0  # the kernel's guard: 0 while nothing is visible


def _upper_bound(m, tile_max):
    return _true_max(m, tile_max) + 3


_ARBITRARY = random.Random(7)


def _arbitrary(m, tile_max):
    return _ARBITRARY.randint(-5, 5)  # any reference works in exact arithmetic


def step_concrete():
    rng = random.Random(2024)
    scores = [rng.randint(-4, 4) for _ in range(7)]
    scores[0] = scores[1] = None  # a masked prefix (causal-like): the guarded 0 is used
    values = [Fraction(rng.randint(-9, 9), rng.randint(1, 5)) for _ in range(7)]
    vis = [i for i in range(7) if scores[i] is not None]
    num = sum((Laurent.mono(scores[i], values[i]) for i in vis), Laurent())  # softmax . v = num / den
    den = sum((Laurent.mono(scores[i]) for i in vis), Laurent())
    count = 0
    for tiles in _compositions(7):
        for ref in (_true_max, _upper_bound, _arbitrary):
            l_acc, o_acc = _online(scores, values, tiles, ref)
            if not l_acc or o_acc * den != num * l_acc:  # O / l = num / den, cross-multiplied
                return False, f"partition {tiles} with {ref.__name__}: O / l != softmax . v"
            count += 1
    caught = sum(
        1
        for tiles in _compositions(7)
        if (lambda lo: lo[1] * den != num * lo[0])(_online(scores, values, tiles, _true_max, False))
    )
    if not caught:
        return False, "the negative control (l not rescaled) was not detected"
    return True, (
        f"{count} runs (64 partitions of 7 keys x 3 reference strategies) equal softmax . v exactly; "
        f"without the rescale of l, {caught} of 64 partitions differ (the check can fail)"
    )


# --------------------------------------------------------------------------------------------------------------
# 4. the FFMA argument at the row max, against exact rationals
# --------------------------------------------------------------------------------------------------------------
def _rn32(q: Fraction) -> Fraction:
    """Round a rational to the nearest float32 (ties to even), exactly (normal range)."""
    f = np.float32(float(q))  # nearest double, then float32: may double-round, so fix up
    cands = [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    best = min(cands, key=lambda y: (abs(Fraction(float(y)) - q), int(np.float32(y).view(np.uint32)) & 1))
    return Fraction(float(best))


def step_ffma_at_max():
    rng = np.random.default_rng(5)
    worst = Fraction(0)
    for _ in range(1500):
        m = np.float32(rng.normal() * 10.0 ** rng.integers(-3, 4))
        cc = np.float32(rng.uniform(0.01, 2.0))  # scale * log2(e)
        mc = _rn32(Fraction(float(m)) * Fraction(float(cc)))  # RN(m c), the kernel's m_scaled
        arg_exact = Fraction(float(m)) * Fraction(float(cc)) - mc
        arg = _rn32(arg_exact) if arg_exact != 0 else Fraction(0)
        if arg != arg_exact:  # the FFMA at s = m is exact
            return False, f"fma(m, c, -RN(mc)) not exact for m={m!r}, c={cc!r}"
        bound = Fraction(1, 2**24) * abs(Fraction(float(m)) * Fraction(float(cc)))
        if abs(arg) > bound:
            return False, f"|argument| {float(arg)} > 2^-24 |m c| = {float(bound)} for m={m!r}, c={cc!r}"
        s_below = np.float32(m - abs(m) * np.float32(rng.uniform(0, 1)))  # a score at or below the max
        arg_below = _rn32(Fraction(float(s_below)) * Fraction(float(cc)) - mc)
        if arg_below > bound:
            return False, f"s={s_below!r} <= m={m!r} but the FFMA argument {float(arg_below)} > {float(bound)}"
        if bound:
            worst = max(worst, abs(arg) / bound)
    return True, (
        f"fma(m, c, -RN(m c)) is the exact rounding error of m c, |.| <= 2^-24 |m c| (worst "
        f"{float(worst):.2f} of the bound over 1500 float32 samples); s <= m never exceeds it: p <= "
        f"2^(2^-24 |m c|), no overflow"
    )


# --------------------------------------------------------------------------------------------------------------
# 5. IEEE -inf arithmetic, modelled explicitly
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ext:
    """An IEEE binary32 value in the proof: a finite real sympy expression, or +inf / -inf / NaN."""

    kind: str  # "fin", "+inf", "-inf", "nan"
    val: sp.Expr = sp.Integer(0)

    @staticmethod
    def fin(value):
        return Ext("fin", sp.sympify(value))

    def is_nan(self):
        return self.kind == "nan"

    def __repr__(self):
        return str(self.val) if self.kind == "fin" else self.kind


NAN, PINF, NINF = Ext("nan"), Ext("+inf"), Ext("-inf")


def _sign(e: sp.Expr) -> int:
    """Sign of a finite value; ValueError if sympy cannot decide (the proof then states an assumption)."""
    if e.is_zero:
        return 0
    if e.is_positive:
        return 1
    if e.is_negative:
        return -1
    raise ValueError(f"sign of {e} undecided")


def add(a: Ext, b: Ext) -> Ext:
    if a.is_nan() or b.is_nan():
        return NAN
    if a.kind == "fin" and b.kind == "fin":
        return Ext.fin(a.val + b.val)
    infs = {k.kind for k in (a, b) if k.kind != "fin"}
    return NAN if infs == {"+inf", "-inf"} else Ext(infs.pop())


def neg(a: Ext) -> Ext:
    return {"+inf": NINF, "-inf": PINF, "nan": NAN}.get(a.kind) or Ext.fin(-a.val)


def mul(a: Ext, b: Ext) -> Ext:
    if a.is_nan() or b.is_nan():
        return NAN
    if a.kind == "fin" and b.kind == "fin":
        return Ext.fin(a.val * b.val)
    sa = 1 if a.kind == "+inf" else -1 if a.kind == "-inf" else _sign(a.val)
    sb = 1 if b.kind == "+inf" else -1 if b.kind == "-inf" else _sign(b.val)
    if sa == 0 or sb == 0:
        return NAN  # 0 * inf
    return PINF if sa * sb > 0 else NINF


def fma(a: Ext, b: Ext, cc: Ext) -> Ext:
    return add(mul(a, b), cc)  # exact product, one rounding: the specials are the same


def fmax(a: Ext, b: Ext) -> Ext:
    """fmaxf: IEEE maxNum, a NaN operand is ignored."""
    if a.is_nan():
        return b
    if b.is_nan():
        return a
    if a.kind == "-inf":
        return b
    if b.kind == "-inf":
        return a
    if "+inf" in (a.kind, b.kind):
        return PINF
    return Ext.fin(sp.Max(a.val, b.val))


def ex2(a: Ext) -> Ext:
    return {"+inf": PINF, "-inf": Ext.fin(0), "nan": NAN}.get(a.kind) or Ext.fin(2**a.val)


def eq(a: Ext, b: Ext) -> bool:
    if a.is_nan() or b.is_nan():
        return False
    if a.kind != b.kind:
        return False
    return a.kind != "fin" or sp.simplify(a.val - b.val) == 0


def tile_update(m, l_acc, o_acc, scores, values, cc, guard=True):
    """One KV tile of the kernel's online softmax for one row (kernel/flash_fwd.cu, the loop body), in Ext."""
    mt = NINF
    for sc in scores:
        mt = fmax(mt, sc)
    m_new = fmax(m, mt)
    m_safe = Ext.fin(0) if (guard and m_new.kind == "-inf") else m_new
    alpha = ex2(mul(add(m, neg(m_safe)), cc))
    m_scaled = mul(m_safe, cc)
    ps = [ex2(fma(sc, cc, neg(m_scaled))) for sc in scores]
    l_new = mul(l_acc, alpha)
    for p in ps:
        l_new = add(l_new, p)
    o_new = mul(o_acc, alpha)
    for p, val in zip(ps, values):
        o_new = add(o_new, mul(p, val))
    return m_new, l_new, o_new


def epilogue(m, l_acc, o_acc, softmax_scale):
    """O * inv and lse as the kernel's epilogue: empty (l == 0 or NaN) -> inv 1, lse +inf."""
    empty = eq(l_acc, Ext.fin(0)) or l_acc.is_nan()
    inv = Ext.fin(1) if empty else Ext.fin(1 / l_acc.val)
    lse = PINF if empty else add(mul(m, softmax_scale), Ext.fin(sp.log(l_acc.val)))
    return mul(o_acc, inv), lse


def step_ieee_guard():
    cc = Ext.fin(sp.Symbol("c", positive=True))
    sc_ = Ext.fin(sp.Symbol("scale", positive=True))
    m0, l0, o0 = (Ext.fin(sp.Symbol(k, real=True)) for k in ("m", "l", "O"))
    vals = [Ext.fin(sp.Symbol(f"v{i}", real=True)) for i in range(3)]
    masked = [NINF] * 3
    msgs, ok = [], True

    # (a) fully masked tile, finite state: unchanged
    m1_, l1_, o1_ = tile_update(m0, l0, o0, masked, vals, cc)
    a = eq(m1_, m0) and eq(l1_, l0) and eq(o1_, o0)
    ok &= a
    msgs.append(f"masked tile after visible keys: (m, l, O) -> ({m1_}, {l1_}, {o1_}) {'unchanged' if a else 'CHANGED'}")

    # (b) fully masked tile, nothing seen yet (m = -inf, l = O = 0): unchanged, no NaN
    z = Ext.fin(0)
    m2_, l2_, o2_ = tile_update(NINF, z, z, masked, vals, cc)
    bb = m2_.kind == "-inf" and eq(l2_, z) and eq(o2_, z)
    ok &= bb
    msgs.append(f"masked tile on an empty row: ({m2_}, {l2_}, {o2_}) {'unchanged' if bb else 'WRONG'}")

    # (c) first visible tile after that: alpha = 0 wipes nothing (l = O = 0) and the invariant starts
    s_syms = [sp.Symbol(f"s{i}", real=True) for i in range(2)]
    scores = [Ext.fin(s_syms[0]), NINF, Ext.fin(s_syms[1])]  # a partially masked tile
    m3_, l3_, o3_ = tile_update(NINF, z, z, scores, vals, cc)
    mx = sp.Max(*s_syms)
    want_l = sum(2 ** (cc.val * (t - mx)) for t in s_syms)
    want_o = 2 ** (cc.val * (s_syms[0] - mx)) * vals[0].val + 2 ** (cc.val * (s_syms[1] - mx)) * vals[2].val
    cgood = (
        m3_.kind == "fin"
        and sp.simplify(m3_.val - mx) == 0
        and l3_.kind == "fin"
        and o3_.kind == "fin"
        and _zero(sp.powsimp(sp.expand(l3_.val - want_l)))
        and _zero(sp.powsimp(sp.expand(o3_.val - want_o)))
    )
    ok &= cgood
    msgs.append(
        "first visible tile on an empty row, with a masked key: l, O = the sums over the visible keys"
        + ("" if cgood else f" FAILED: l={l3_}, O={o3_}")
    )

    # (d) a row with no visible key at all: epilogue gives O = 0, lse = +inf, no NaN
    m4_, l4_, o4_ = NINF, z, z
    for _ in range(3):
        m4_, l4_, o4_ = tile_update(m4_, l4_, o4_, masked, vals, cc)
    out, lse = epilogue(m4_, l4_, o4_, sc_)
    dd = eq(out, z) and lse.kind == "+inf"
    ok &= dd
    msgs.append(f"fully masked row (3 tiles): l = {l4_}, O = {out}, lse = {lse}" + ("" if dd else " WRONG"))

    # (e) the guard is needed: without it the same row produces NaN
    m5_, l5_, o5_ = tile_update(NINF, z, z, masked, vals, cc, guard=False)
    ee = l5_.is_nan() or o5_.is_nan()
    ok &= ee
    msgs.append(f"without the guard: l = {l5_}, O = {o5_} ({'NaN, as expected' if ee else 'no NaN?'})")
    return ok, "; ".join(msgs)


STEPS = (
    ("base case", step_base),
    ("term identity", step_term_identity),
    ("preservation by one tile", step_preservation),
    ("final O / l = softmax(S) V", step_final),
    ("exp2 form, folded scale", step_exp2),
    ("all partitions, exact", step_concrete),
    ("FFMA argument at the max", step_ffma_at_max),
    ("-inf guard, IEEE model", step_ieee_guard),
)


def check():
    """Run every step: (holds, details), details one line per step."""
    return run_steps(STEPS)


def test_online_softmax():
    holds, details = check()
    assert holds, details


if __name__ == "__main__":
    run_as_script(TITLE, check)
