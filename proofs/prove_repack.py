"""The S -> P register repack needs no data movement: the C fragments of S's n8 tiles 2j and 2j+1 hold exactly
the elements the A fragment of P's k16 slice j needs, lane for lane and register for register.

Claim (claim 6 of the seed design note (README, 'The seed's claims'); fragments: PTX ISA, "Matrix fragments
for mma.m16n8k16"). For every lane (groupID g = lane >> 2, tid t = lane & 3) and every slice j, with pack(x, y)
putting x in bits 0..15:
    P reg 4j+0 = pack(c0, c1) of S tile 2j      P reg 4j+2 = pack(c0, c1) of S tile 2j+1
    P reg 4j+1 = pack(c2, c3) of S tile 2j      P reg 4j+3 = pack(c2, c3) of S tile 2j+1
where S tile k is columns 8k .. 8k+7 of the 16 x Bc score block and P's slice j is columns 16j .. 16j+15.

Steps
1. symbolic     with g, t, j sympy integer symbols, the (row, col) of A element a_i of slice j (PTX formula,
                flashsim.layout.fragments.a_coord) minus the (row, col) of its source c element (c_coord of the
                tile and index given by the repack table) simplifies to (0, 0), for each of the 8 elements;
2. registers    the source of P register q is S registers 2q, 2q+1 of the same lane (symbolic in j), so the repack
                is an in-place pairwise conversion: no shuffle, no shared memory, no register permutation;
3. exhaustive   the same identity on the integer tables, all 32 lanes, every slice of a Bc = 256 block;
4. CuTe         the same identity on CuTe's thread-value layouts (SM80 16x8x16 A and C), an independent oracle;
5. implementation  flashsim.layout.repack_s_to_p on S's C fragments equals a_fragment of P = rn(S), bit for bit,
                on a score block whose every element has its own f16 bit pattern and on random f32 bit patterns;
6. row statistics  each lane's S and P elements lie in rows g and g+8, the lanes holding a row's elements are the
                quad 4g .. 4g+3, and shfl.xor 1 then 2 reaches exactly that quad: the row max and row sum that
                feed the softmax of P need only the two quad shuffles.

Runnable alone (``python3 proofs/prove_repack.py``: exit 0 iff it holds), collected by pytest (``test_repack``),
and run by ``flashsim prove`` through ``check()``.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from flashsim import layout
from flashsim.layout import fragments as F
from flashsim.prove.runner import run_as_script, run_steps

TITLE = "S -> P repack: C fragments of S tiles 2j, 2j+1 are the A fragment of P slice j, lane for lane"
MAX_SLICES = 16  # Bc = 256, the largest kv_tile KernelConfig allows
g, t, j = sp.symbols("g t j", integer=True, nonnegative=True)


def _source(i: int):
    """(S tile offset in the pair, c index) that feeds A element a_i (register i >> 1, half i & 1)."""
    tile, c_lo, c_hi = (int(x) for x in layout.repack_sources()[i >> 1])
    return tile, (c_lo, c_hi)[i & 1]


def step_symbolic():
    rows = []
    for i in range(8):
        a_row, a_col = F.a_coord(g, t, i)
        tile, ci = _source(i)
        c_row, c_col = F.c_coord(g, t, ci)
        d_row = sp.simplify(a_row - c_row)
        d_col = sp.simplify((16 * j + a_col) - (8 * (2 * j + tile) + c_col))
        if d_row != 0 or d_col != 0:
            return False, f"a{i}: P ({a_row}, 16j+{a_col}) vs S tile 2j+{tile} c{ci}: differ by ({d_row}, {d_col})"
        rows.append(f"a{i} = ({a_row}, 16*j + {a_col}) <- c{ci} of tile 2j+{tile}")
    return True, "for all g, t, j: " + "; ".join(rows)


def step_registers():
    lines = []
    for r in range(4):
        tile, c_lo, c_hi = (int(x) for x in layout.repack_sources()[r])
        p_reg = 4 * j + r
        s_lo, s_hi = 4 * (2 * j + tile) + c_lo, 4 * (2 * j + tile) + c_hi
        if sp.simplify(s_lo - 2 * p_reg) != 0 or sp.simplify(s_hi - (2 * p_reg + 1)) != 0:
            return False, f"P reg 4j+{r}: sources S regs {s_lo}, {s_hi}, not 2q, 2q+1"
        lines.append(f"P reg 4j+{r} <- S regs {sp.expand(s_lo)}, {sp.expand(s_hi)}")
    return True, "P reg q <- S regs (2q, 2q+1) of the same lane: " + "; ".join(lines)


def _identity_on_tables(a_row, a_col, c_row, c_col):
    """For every lane, element and slice: A's (row, col) equals its repack source's (row, col)."""
    bad = 0
    for i in range(8):
        tile, ci = _source(i)
        for jj in range(MAX_SLICES):
            bad += int(np.count_nonzero(a_row[:, i] != c_row[:, ci]))
            bad += int(np.count_nonzero(16 * jj + a_col[:, i] != 8 * (2 * jj + tile) + c_col[:, ci]))
    return bad


def step_exhaustive():
    bad = _identity_on_tables(F.A.row, F.A.col, F.C_F32.row, F.C_F32.col)
    same_f16 = np.array_equal(F.C_F32.row, F.C_F16.row) and np.array_equal(F.C_F32.col, F.C_F16.col)
    ok = bad == 0 and same_f16
    return ok, (
        f"32 lanes x 8 elements x {MAX_SLICES} slices: {bad} mismatches; "
        f"f32 and f16x2 C maps place elements alike: {same_f16}"
    )


def step_cute():
    a_m, a_k = F.cute_coords(F.CUTE_A, 16)
    c_m, c_n = F.cute_coords(F.CUTE_C, 16)
    bad = _identity_on_tables(a_m, a_k, c_m, c_n)
    return bad == 0, f"CuTe A ((4,8),(2,2,2)):((32,1),(16,8,128)) vs C ((4,8),(2,2)):((32,1),(16,8)): {bad} mismatches"


def step_implementation():
    ntiles = 2 * MAX_SLICES
    r, c = np.meshgrid(np.arange(16), np.arange(8 * ntiles), indexing="ij")
    patterns = (0x0400 + 256 * r + c).astype(np.uint16)  # 4096 distinct positive normal f16 patterns
    s = patterns.view(np.float16).astype(np.float32)  # exact in f32, so rn(S) = the pattern
    got = layout.repack_s_to_p(layout.c_fragment(s))
    want = layout.a_fragment(patterns.view(np.float16))
    unique = len(np.unique(patterns)) == patterns.size
    rng = np.random.default_rng(2024)
    raw = rng.integers(0, 1 << 32, size=(64, 16, 8 * ntiles), dtype=np.uint32).view(np.float32)
    got_r = layout.repack_s_to_p(layout.c_fragment(raw))
    want_r = layout.a_fragment(layout.cvt_rn(raw).view(np.float16))
    ok = unique and np.array_equal(got, want) and np.array_equal(got_r, want_r)
    return ok, (
        f"unique-pattern 16 x {8 * ntiles} block: {'equal' if np.array_equal(got, want) else 'DIFFERENT'}; "
        f"64 random f32 bit-pattern blocks: {'equal' if np.array_equal(got_r, want_r) else 'DIFFERENT'}"
    )


def step_row_statistics():
    lanes = np.arange(32)
    rows_ok = all(set(F.C_F32.row[ln]) == set(F.A.row[ln]) == {ln >> 2, (ln >> 2) + 8} for ln in lanes)
    holders_ok = all(
        set(lanes[(F.C_F32.row == row).any(axis=1)]) == set(range(4 * (row % 8), 4 * (row % 8) + 4))
        for row in range(16)
    )
    j1, _ = layout.shfl_source_lanes("bfly", 1)
    j2, _ = layout.shfl_source_lanes("bfly", 2)
    orbit_ok = all({ln, j1[ln], j2[ln], j2[j1[ln]]} == set(range(4 * (ln >> 2), 4 * (ln >> 2) + 4)) for ln in lanes)
    ok = rows_ok and holders_ok and orbit_ok
    return ok, (
        f"lane rows = (g, g+8) in S and P: {rows_ok}; a row's holders = its quad: {holders_ok}; "
        f"shfl.xor 1, 2 reach exactly the quad: {orbit_ok}"
    )


STEPS = (
    ("symbolic in g, t, j", step_symbolic),
    ("register sources", step_registers),
    ("exhaustive, 32 lanes", step_exhaustive),
    ("CuTe layouts", step_cute),
    ("implementation, bit for bit", step_implementation),
    ("row statistics in the quad", step_row_statistics),
)


def check():
    """Run every step: (holds, details), one line per step."""
    return run_steps(STEPS)


def test_repack():
    holds, details = check()
    assert holds, details


if __name__ == "__main__":
    run_as_script(TITLE, check)
