"""The per-CTA register pool: ``setmaxnreg.{inc,dec}.sync.aligned.u32 N`` (sm_90a+; PTX ISA, "setmaxnreg").

Each warp owns a per-thread register count; ``.dec`` lowers its warp's to N (N at most the count it has) and gives
the difference, 32 registers a thread, to its CTA's pool; ``.inc`` raises it to N (at least the count it has),
taking the difference from the pool, and waits there until the pool holds enough (the ISA: the instruction blocks
until the registers are available). N is an immediate in 24..256, a multiple of 8. No register value changes:
registers are unbounded in the simulator; what is checked is the bookkeeping a GPU would enforce.

The count each warp starts with is the kernel's per-thread register count, which ptxas allocates and the PTX does
not state. The ISA requires a declared register limit for setmaxnreg to take effect, and ptxas 13.0 (sm_90a) then
allocates exactly that limit to a kernel that uses setmaxnreg (its ``-v`` report, held by a test): ``.maxnreg R``
gives R; ``.maxntid`` / ``.reqntid`` (T threads) with ``.minnctapersm B`` gives 65536 / (B * T rounded up to whole
warps) rounded down to a multiple of 8; both, the smaller; always within 24..240. Without such a limit ptxas
allocates what the code needs and the ISA says setmaxnreg may have no effect: the simulator then keeps no pool
(only the count's range and the warpgroup rule are checked). The pool starts empty (the CTA's registers are all its
warps').

Errors (each naming kernel, block, thread and PTX line): N outside 24..256 or not a multiple of 8; .dec to more
than the warp has, .inc to less; an .inc the pool can never satisfy (the pool plus everything the warps of the CTA's
other warpgroups that are not waiting themselves could still give back by decreasing to 24 is less than it asks); a
warp of a warpgroup executing a different
setmaxnreg (another PTX line) than the other warps of its warpgroup did as their k-th, or exiting with fewer
setmaxnreg than they executed (the ISA: undefined unless every warp of the warpgroup executes the same one). An
.inc that waits for registers no warp will release ends in Deadlock, naming what it waits for.
"""

from __future__ import annotations

import numpy as np

from ...arch import get_arch
from .. import isa
from ..ir import Imm
from ..program import BARRIER, Decoded

__all__ = ["RegisterPool", "SETMAXNREG_ID", "initial_count"]

CAP = 240  # the most ptxas 13.0 allocates a thread of a kernel that uses setmaxnreg

SETMAXNREG_ID = 17  # Barriers.bar_id of a warp waiting at setmaxnreg.inc for registers (machine.waiters)
WAIT_NONE, WAIT_BARRIER = 0, 1
LOW, HIGH = 24, 256
WARPGROUP = 4  # warps


def initial_count(fn, arch: str) -> int | None:
    """The per-thread register count every warp of kernel ``fn`` starts with (the module docstring's rule), or None
    where the PTX declares no register limit."""
    limits = []
    maxnreg = fn.directive(".maxnreg")
    if maxnreg is not None:
        limits.append(int(maxnreg.args[0]))
    bound = fn.directive(".maxntid") or fn.directive(".reqntid")
    minimum = fn.directive(".minnctapersm")
    if bound is not None and minimum is not None:
        threads = int(np.prod([int(x) for x in bound.args]))
        regs = get_arch(arch).regs_per_sm // (int(minimum.args[0]) * 32 * -(-threads // 32))
        limits.append(regs - regs % 8)
    if not limits:
        return None
    return int(min(CAP, max(LOW, min(limits))))


class RegisterPool:
    """The register counts of a wave's warps and their CTAs' pools (in registers), and each warp's history of
    setmaxnreg lines (for the warpgroup rule)."""

    def __init__(self, machine):
        m = self.m = machine
        prog = m.prog
        self.start = initial_count(prog.kernel_fn, prog.arch)
        self.count = np.full(m.n_warps, self.start or 0, np.int64)
        self.pool = np.zeros(m.n_blocks, np.int64)
        self.lines: list[list[int]] = [[] for _ in range(m.n_warps)]
        self.want = np.zeros(m.n_warps, np.int64)  # what a waiting warp asks for (0: not waiting)
        self.retry = np.zeros(m.T, np.int64)  # the PC a waiting thread runs again when registers come back
        m.waiters[SETMAXNREG_ID] = self

    def _warpgroup(self, w: int) -> list[int]:
        wpb = self.m.warps_per_block
        b, k = divmod(w, wpb)
        first = b * wpb + (k // WARPGROUP) * WARPGROUP
        return list(range(first, min(first + WARPGROUP, (b + 1) * wpb)))

    def run(self, g, n: int, inc: bool) -> None:
        m = self.m
        lanes = g.lanes()
        warps = np.unique(m.warp_of[lanes])
        line = m.prog.ops[g.pc].line
        blocked = []
        for w in warps.tolist():
            t = int(lanes[np.searchsorted(m.warp_of[lanes], w)])
            if self.start is None:  # no declared limit: no pool to keep (the module docstring)
                self._warpgroup_rule(w, line, t)
                continue
            have = int(self.count[w])
            if self.want[w] == 0:  # a first try (a retry after waiting was checked already)
                if (inc and n < have) or (not inc and n > have):
                    raise m.error(
                        f"setmaxnreg.{'inc' if inc else 'dec'} to {n} registers per thread while the warp has {have} "
                        f"(.{'inc' if inc else 'dec'} must not {'lower' if inc else 'raise'} it)",
                        t,
                    )
                self._warpgroup_rule(w, line, t)
            b = w // m.warps_per_block
            if not inc:
                self.pool[b] += (have - n) * 32
                self.count[w] = n
                self._wake(b)
                continue
            need = (n - have) * 32
            if need <= self.pool[b]:
                self.pool[b] -= need
                self.count[w] = n
                self.want[w] = 0
                continue
            group = self._warpgroup(w)  # its warpgroup runs this same .inc: only the other warpgroups can give
            others = [x for x in range(b * m.warps_per_block, (b + 1) * m.warps_per_block) if x not in group]
            could = int(self.pool[b] + sum(int(self.count[x]) - LOW for x in others if self.want[x] == 0) * 32)
            if need > could:
                raise m.error(
                    f"setmaxnreg.inc to {n} registers per thread needs {need} registers from the CTA's pool, which "
                    f"holds {int(self.pool[b])}; even with every warp of the CTA's other warpgroups decreased to "
                    f"{LOW} it would hold {could} (the kernel starts its warps at {self.start} registers per thread)",
                    t,
                )
            self.want[w] = n
            blocked.append(w)
        if blocked:
            stop = np.isin(m.warp_of, blocked) & g.active()
            m.barriers.bar_id[stop] = SETMAXNREG_ID
            self.retry[stop] = g.pc
            g.stop(stop, WAIT_BARRIER, g.pc)  # retried when registers come back to the pool
        m.progress += 1

    def _warpgroup_rule(self, w: int, line: int, t: int) -> None:
        mine = self.lines[w]
        k = len(mine)
        for x in self._warpgroup(w):
            if x != w and len(self.lines[x]) <= k and self.m.exited[self.m.warp_of == x].all():
                raise self.m.error(
                    f"setmaxnreg at PTX line {line} after warp {x % self.m.warps_per_block} of the warpgroup exited "
                    f"having run {len(self.lines[x])} (every warp of a warpgroup must execute the same one)",
                    t,
                )
            if x != w and len(self.lines[x]) > k and self.lines[x][k] != line:
                raise self.m.error(
                    f"setmaxnreg at PTX line {line} while warp {x % self.m.warps_per_block} of the warpgroup ran "
                    f"the one at PTX line {self.lines[x][k]} (every warp of a warpgroup must execute the same one)",
                    t,
                )
        mine.append(line)

    def _wake(self, b: int) -> None:
        """Registers came back to block ``b``'s pool: its waiting warps try again."""
        m = self.m
        sl = slice(b * m.block_threads, (b + 1) * m.block_threads)
        waiting = np.flatnonzero((m.wait[sl] == WAIT_BARRIER) & (m.barriers.bar_id[sl] == SETMAXNREG_ID))
        if waiting.size:
            threads = waiting + b * m.block_threads
            m.wait[threads] = WAIT_NONE
            m.barriers.bar_id[threads] = -1
            m.pc[threads] = self.retry[threads]

    def exited(self, threads) -> None:
        """Warps that exited must have run as many setmaxnreg as the rest of their warpgroup."""
        m = self.m
        for w in np.unique(m.warp_of[np.asarray(threads)]).tolist():
            live = ~m.exited[m.warp_of == w]
            if live.any():
                continue
            for x in self._warpgroup(w):
                if len(self.lines[x]) > len(self.lines[w]):
                    t = int(np.flatnonzero(m.warp_of == w)[0])
                    raise m.error(
                        f"warp {w % m.warps_per_block} exits after {len(self.lines[w])} setmaxnreg while warp "
                        f"{x % m.warps_per_block} of its warpgroup ran the one at PTX line "
                        f"{self.lines[x][len(self.lines[w])]} (every warp of a warpgroup must execute the same one)",
                        t,
                    )

    def waits_for(self, t: int):
        w = int(self.m.warp_of[t])
        b = w // self.m.warps_per_block
        return (
            "other",
            f"waits at setmaxnreg.inc for {int(self.want[w])} registers per thread (it has {int(self.count[w])}; the "
            f"CTA's pool holds {int(self.pool[b])})",
        )


def pool(m) -> RegisterPool:
    state = m.state.get("setmaxnreg")
    if state is None:
        state = m.state["setmaxnreg"] = RegisterPool(m)
    return state


isa.requires(
    "setmaxnreg",
    archs=("sm_90", "sm_100", "sm_120"),
    source="PTX ISA: sm_90a, sm_100a, sm_120a (arch-specific); ptxas 13.0 refuses it on sm_80 / sm_89 and plain sm_120",
)


@isa.implements("setmaxnreg")
def setmaxnreg(d: Decoded):
    mods = d.mods
    action = mods.take(".inc", ".dec")
    sync, aligned = mods.flag(".sync"), mods.flag(".aligned")
    t = mods.type()
    mods.done()
    if action is None or not (sync and aligned) or t != ".u32":
        raise isa.Unsupported("setmaxnreg.{inc,dec}.sync.aligned.u32 only")
    (count,) = d.operands
    if not isinstance(count, Imm):
        raise isa.Unsupported("setmaxnreg's register count is an immediate")
    n = int(count.value)
    inc = action == ".inc"

    def run(g):
        if not (LOW <= n <= HIGH and n % 8 == 0):
            raise g.m.error(f"setmaxnreg count {n}: must be in {LOW}..{HIGH} and a multiple of 8", int(g.lanes()[0]))
        pool(g.m).run(g, n, inc)

    return d.op(run, BARRIER)
