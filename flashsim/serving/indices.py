"""The index rules of the serving calls, written once: what the GPU's check kernel (kernel/serving_check.cu) flags,
what ``index_flag`` computes from host arrays (its emulation, bit for bit), and the ValueError a flag names.

A call's index arrays are valid when: every cache_seqlens[b] is in 0..limit (limit: the keys a row holds, N_cache or
max_pages * page_size, or the smaller max_seqlen_k the call states); every block_table entry a row reads (its first
ceil(nk_b / page_size), nk_b its length clamped into 0..capacity) is in [0, num_pages); each cu_seqlens starts at 0,
never decreases, ends at its array's rows and has no sequence longer than its max_seqlen.

A violation is a pair (code, value) of u64: code = rule << ENTRY_BITS | entry, where the rules are numbered in the
order the checks report (RULES) and entry is the offending element (a row; row * max_pages + page slot for the table;
an offset's index), so the smallest code over every violation is the first error in that order, whichever thread
finds it; value packs the two int32 the message quotes (low word, high word). No violation is (NONE, 0). The check
kernel reduces its block's codes with a min and writes the pair, the emulation takes the min of the same codes: the
two agree bit for bit (tests/test_serving_indices.py runs the kernel's PTX through flashsim.ptx against it).
"""

from __future__ import annotations

import numpy as np

NONE = 2**64 - 1  # no violation: the flag's value when every index is valid
ENTRY_BITS = 40  # an entry below 2^40: rows * max_pages < 2^16 * 2^26 (flashsim.serving.problem's limits)
CHECK_THREADS = 512  # kernel/serving_check.cu's one block (a decode batch's table: its rows over 16 warps)
RECORD_WORDS = 4  # the check's record: code, value, tag, unused (u64 each)
RULES = (
    "seqlens",  # cache_seqlens[b] outside 0..limit
    "table",  # block_table[b, j] outside [0, num_pages) for a page row b reads
    "cu_q_start",  # cu_seqlens_q[0] != 0
    "cu_q_order",  # cu_seqlens_q[i] > cu_seqlens_q[i + 1]
    "cu_q_end",  # cu_seqlens_q[B] != total_q
    "cu_q_long",  # cu_seqlens_q[i + 1] - cu_seqlens_q[i] > max_seqlen_q
    "cu_k_start",
    "cu_k_order",
    "cu_k_end",
    "cu_k_long",
)
RULE = {name: i for i, name in enumerate(RULES)}


def defines() -> dict:
    """The rule numbers and the entry width as kernel/serving_check.cu's defines (one description)."""
    return {
        "FS_CHECK_THREADS": CHECK_THREADS,
        "FS_IDX_ENTRY_BITS": ENTRY_BITS,
        **{f"FS_IDX_{name.upper()}": i for i, name in enumerate(RULES)},
    }


def code(rule, entry):
    """The violation code of ``rule`` (a RULES name or number) at ``entry`` (ints or int64 arrays)."""
    r = RULE[rule] if isinstance(rule, str) else rule
    return (np.uint64(r) << np.uint64(ENTRY_BITS)) | np.asarray(entry, np.int64).astype(np.uint64)


def pack(lo, hi=0):
    """Two int32 (arrays) as the u64 value of a violation: ``lo`` in the low word, ``hi`` in the high one."""
    lo = np.asarray(lo, np.int64).astype(np.uint32).astype(np.uint64)
    hi = np.asarray(hi, np.int64).astype(np.uint32).astype(np.uint64)
    return lo | (hi << np.uint64(32))


def unpack(value: int) -> tuple[int, int]:
    """The two int32 of a violation's value (``pack``'s inverse)."""
    w = np.array([int(value) & 0xFFFFFFFF, int(value) >> 32], np.uint32).view(np.int32)
    return int(w[0]), int(w[1])


def _first(codes: list, values: list) -> tuple[int, int]:
    codes = [np.atleast_1d(c) for c in codes]
    values = [np.broadcast_to(np.atleast_1d(v), c.shape) for c, v in zip(codes, values)]
    if not codes or not sum(c.size for c in codes):
        return NONE, 0
    c, v = np.concatenate(codes), np.concatenate(values)
    i = int(np.argmin(c))
    return int(c[i]), int(v[i])


def index_flag(prob, index) -> tuple[int, int]:
    """(code, value) of the first violation of ``index`` (host arrays, flashsim.serving.problem.SequenceIndex)
    against ``prob``, or (NONE, 0): what kernel/serving_check.cu writes for the same arrays."""
    codes, values = [], []
    if prob.kind == "varlen":
        for a, (cu, total, cap) in enumerate(
            (
                (index.cu_seqlens_q, prob.q_total, prob.nq_cap),
                (index.cu_seqlens_k, prob.k_total, prob.nk_cap),
            )
        ):
            cu = np.asarray(cu, np.int64)
            base = 4 * a + RULE["cu_q_start"]
            i = np.arange(cu.size - 1)
            lo, hi = cu[:-1], cu[1:]
            steps = hi - lo
            for rule, bad, entry, value in (
                (base, cu[:1] != 0, np.zeros(1, np.int64), pack(cu[:1])),
                (base + 1, steps < 0, i, pack(lo, hi)),
                (base + 2, cu[-1:] != total, np.full(1, cu.size - 1), pack(cu[-1:])),
                (base + 3, steps > cap, i, pack(lo, hi)),
            ):
                codes.append(code(rule, entry[bad]))
                values.append(value[bad])
        return _first(codes, values)
    nk = np.full(prob.batch, prob.nk_cap, np.int64)
    rows = np.arange(prob.batch)
    if index.cache_seqlens is not None:
        nk = np.asarray(index.cache_seqlens, np.int64)
        bad = (nk < 0) | (nk > prob.seqlen_limit)
        codes.append(code("seqlens", rows[bad]))
        values.append(pack(nk[bad]))
    if prob.page_size:
        table = np.asarray(index.block_table, np.int64)
        used = -(-np.clip(nk, 0, prob.nk_cap) // prob.page_size)  # the pages each row reads
        read = np.arange(prob.max_pages)[None, :] < used[:, None]
        bad = read & ((table < 0) | (table >= prob.num_pages))
        i, j = np.nonzero(bad)
        codes.append(code("table", i * prob.max_pages + j))
        values.append(pack(table[i, j], used[i]))
    return _first(codes, values)


def index_error(prob, flag_code: int, value: int) -> ValueError | None:
    """The ValueError a flag (code, value) names for a call of ``prob`` (None for NONE): the argument, the entry,
    its value and the rule."""
    if int(flag_code) == NONE:
        return None
    rule, entry = RULES[int(flag_code) >> ENTRY_BITS], int(flag_code) & ((1 << ENTRY_BITS) - 1)
    a, b = unpack(value)
    if rule == "seqlens":
        cap = prob.nk_cap
        if prob.max_seqlen_k < cap and 0 <= a <= cap:
            return ValueError(
                f"cache_seqlens[{entry}] = {a} is more than max_seqlen_k={prob.max_seqlen_k}, the longest row the "
                f"call states (num_splits is chosen from it)"
            )
        holds = f"max_pages * page_size = {cap}" if prob.page_size else f"N_cache = {cap}"
        return ValueError(
            f"cache_seqlens[{entry}] = {a} is past the keys row {entry} holds ({holds}; it must be in 0..{cap})"
        )
    if rule == "table":
        i, j = divmod(entry, prob.max_pages)
        return ValueError(
            f"block_table[{i}, {j}] = {a} is outside [0, {prob.num_pages}) (the pages of k_cache); "
            f"row {i} reads its first {b} entries"
        )
    name = "cu_seqlens_q" if rule.startswith("cu_q") else "cu_seqlens_k"
    if rule.endswith("start"):
        return ValueError(f"{name} must start at 0, got {name}[0] = {a}")
    if rule.endswith("order"):
        return ValueError(f"{name} must not decrease, got {name}[{entry}] = {a} > {name}[{entry + 1}] = {b}")
    if rule.endswith("end"):
        total = prob.q_total if name.endswith("q") else prob.k_total
        return ValueError(f"{name} must end at the total {total} (the rows of its array), got {a}")
    what, cap = ("max_seqlen_q", prob.nq_cap) if name.endswith("q") else ("max_seqlen_k", prob.nk_cap)
    return ValueError(f"{name}: sequence {entry} has {b - a} rows, more than {what}={cap}")
