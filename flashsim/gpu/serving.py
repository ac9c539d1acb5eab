"""The launch plan of the serving kernel (kernel/flash_fwd.cu with KernelConfig's serving switches) and of
flash_combine after it, and their front-end for numpy arrays and DeviceArrays.

A ``ServingPlan`` holds what the launches of one flashsim.serving.ServingProblem need, built once: the loaded
flash_fwd (and with split-KV flash_combine, from the same build), the cuda.core LaunchConfigs, the scalar arguments
packed with them into flashsim.gpu.packed launches, and the bytes of scratch the split parts take.
``launch_serving`` (``enqueue`` with the addresses as ints: the hot path) enqueues the index check, flash_fwd and then
flash_combine on one stream, each one cuLaunchKernelEx whose only per-call work is writing the call's addresses into
the packed parameters: no host synchronisation between them, so a torch or cupy caller's stream orders them like any
other work. The front-ends (``run_host`` for numpy arrays and DeviceArrays, ``run_cupy``,
flashsim.gpu.serving_torch) check the call with flashsim.serving.problem, allocate the outputs and the scratch with
their library's allocator, and call ``launch_serving``.

Index values (cache_seqlens, block_table, cu_seqlens). Host (numpy) ones are checked on the host before the launch
(flashsim.serving.problem.check_indices). GPU ones are never copied back: kernel/serving_check.cu, one block launched
before flash_fwd on the same stream, applies the same rules (flashsim.serving.indices) where they live and writes the
first violation into a record of mapped host memory (one per process, ``record``), which the host reads without
waiting (``pending_error``): at the start of every later serving call, after the call where the call waits anyway
(an overflow flag read with check_overflow=True), in a deferred check, and in ``check_index_errors``. So a bad index
raises its ValueError one call late, or at the read the caller chooses, as CUDA's asynchronous errors do, and a
CUDA graph replays the check with the rest. ``check_indices=False`` leaves the check out. Whatever the check says,
flash_fwd clamps every index it reads (page numbers into the pages, lengths into the capacities, offsets into the
arrays): a bad index gives wrong rows, never a read outside the caches.

The check fused (``FUSED``, KernelConfig.fused): flash_fwd's fused build checks the indices itself (each block the
entries it reads, by kernel/serving_rules.cuh's rules, the last block to finish writing the same record), so a call
is one cuLaunchKernelEx fewer: flash_fwd alone, or flash_fwd and flash_combine with split-KV. The ticket that says
"last" lives in a state buffer (``state_bytes``) the front-end zeroes once per (device, stream) and the kernel
leaves zeroed. Two calls of one problem may not be in flight at once on two streams with one state buffer: the
front-ends keep one per stream (and give each call captured into a CUDA graph a zeroed one of its own: torch's a slot
of a slab zeroed before the capture, cupy's a buffer zeroed inside it), so only a graph replayed on two streams at
once would share it, which is not supported.
"""

from __future__ import annotations

import atexit
import re
import struct
import sys
import threading
from dataclasses import replace

import numpy as np

from ..constants import COMBINE_WARPS, FUSED_HEADER
from ..numerics.formats import get_format
from ..overflow import OverflowCheck
from ..serving import indices
from ..serving.indices import index_error
from ..serving.problem import SequenceIndex, ServingProblem, check_indices, index_of
from . import launch, packed
from . import runtime as rt
from .build import compile_cuda, kernel_path

COMBINE_NAME = "flash_combine"
CHECK_FILE = "serving_check.cu"  # the index check on the device (flashsim.serving.indices' rules)
CHECK_NAME = "serving_check"
# flash_fwd launched as a programmatic dependent of the index check (sm_90+), so that the check (one block) runs beside
# it rather than before it: the check writes nothing flash_fwd reads. On by default: on an H100 its CUDA-graph replay
# was the fastest form of the call on every decode shape, up to 0.8 us ahead of the three serial launches
# (benchmarks/bench_serving.py --call times every form; benchmarks/RESULTS.md).
OVERLAP_CHECK = True
# flash_combine launched as flash_fwd's programmatic dependent (sm_90+): its launch overlaps flash_fwd's last blocks
# and its blocks wait (griddepcontrol.wait) for flash_fwd's writes, so a split call does not pay a launch gap between
# the two (benchmarks/bench_serving.py times the kernels with it off too: "kernel_serial").
OVERLAP_COMBINE = True
# The index check inside flash_fwd (KernelConfig.fused): one launch fewer per call. Off by default: on an H100 it
# saves 2-5 us of host time per call, but a CUDA graph's replay (what serving engines run) was 0.1-1.3 us behind
# OVERLAP_CHECK's, its kernels alone 0.0-0.7 us slower than the separate ones (benchmarks/RESULTS.md); set
# flashsim.gpu.serving.FUSED = True for a host-bound loop of small eager calls.
FUSED = False
_PLANS: dict = launch.fast_keys()  # ServingProblem -> ServingPlan (emptied by launch.clear_caches)
# the slots a call writes in the packed launches (ServingPlan._pack checks them against the argument lists):
# flash_fwd's cu_q (then cu_k, seqlens_k), block_table and o_part (then lse_part); serving_check's record
_CU_Q, _TABLE, _PARTS, _STATE = 25, 30, 35, 39
_RECORD_SLOT = 13
_pack_six = struct.Struct("<6Q").pack_into  # six addresses into six slots at once


def part_layout(prob: ServingProblem) -> tuple[int, int]:
    """(bytes of the split parts' scratch, byte offset of lse_part in it): o_part (P, R, d) f32 then lse_part (P, R)
    f32 at a SCRATCH_ALIGN boundary (P = prob.parts); (0, 0) without splits."""
    if not prob.config.split:
        return 0, 0
    n = prob.parts * prob.part_rows
    o_bytes = -(-n * prob.head_dim * 4 // launch.SCRATCH_ALIGN) * launch.SCRATCH_ALIGN
    return o_bytes + n * 4, o_bytes


def combine_scalars(prob: ServingProblem) -> tuple:
    """flash_combine's int arguments after its four addresses: the parts (num_splits, times warp_split), part rows,
    nq_cap, heads."""
    return tuple(np.int32(x) for x in (prob.parts, prob.part_rows, prob.nq_cap, prob.heads))


def state_bytes(prob: ServingProblem) -> int:
    """Bytes of a fused launch's state (kernel/flash_fwd.cu, FUSED): FUSED_HEADER u32 words; 0 for an unfused
    problem."""
    return 4 * FUSED_HEADER if prob.config.fused else 0


def fused_tail(prob: ServingProblem, state: int, record: int, tag: int, *, pointer=np.uint64) -> tuple:
    """flash_fwd's last arguments in a fused build: the state's address, the record's (0: the call is not checked),
    the tag and serving_check's seqlen_limit."""
    return (pointer(state), pointer(record), np.uint64(tag), np.int32(prob.seqlen_limit))


def fused(prob: ServingProblem) -> ServingProblem:
    """``prob`` with flash_fwd's fused build (KernelConfig.fused): the same call, its index check inside flash_fwd."""
    return replace(prob, config=prob.config.with_(fused=True))


def strides(prob: ServingProblem) -> tuple[int, ...]:
    """flash_fwd's element strides (q: batch, head, row; k / v: batch, head, row) for the call's arrays: q (B, Nq, Hq,
    d) or (total_q, Hq, d); caches (B, N_cache, Hkv, d), pages (num_pages, page_size, Hkv, d) or (total_k, Hkv, d)."""
    d, h, hk = prob.head_dim, prob.heads, prob.heads_kv
    q_bs = prob.nq_cap * h * d if prob.kind == "kvcache" else 0
    kv_bs = prob.nk_cap * hk * d if prob.kind == "kvcache" and not prob.page_size else 0
    return q_bs, d, h * d, kv_bs, d, hk * d


def kernel_scalars(prob: ServingProblem) -> tuple:
    """flash_fwd's arguments after the six pointers that do not change from call to call, in two parts: those before
    the serving arguments (nq_cap, nk_cap, group, the strides, the scales, the window, the four null quantization
    pointers and nkp) and the serving scalars between the index pointers (q_total, k_total | bt_stride, page_shift,
    num_pages, num_splits | lse_bs, lse_hs)."""
    win = prob.window
    head = (
        np.int32(prob.nq_cap),
        np.int32(prob.nk_cap),
        np.int32(prob.group),
        *(np.int64(x) for x in strides(prob)),
        np.float32(prob.lse_scale),
        np.float32(prob.scale_log2),
        np.float32(prob.cap_scale),
        np.int32(win.left if win else 0),
        np.int32(win.right if win else 0),
        *(np.uint64(0),) * 4,
        np.int32(0),
    )
    totals = (np.int32(prob.q_total), np.int32(prob.k_total))
    pages = (np.int32(prob.max_pages), np.int32(prob.page_shift), np.int32(prob.num_pages), np.int32(prob.num_splits))
    lse_bs, lse_hs = prob.lse_strides
    return head, totals, pages, (np.int64(lse_bs), np.int64(lse_hs))


class ServingPlan:
    """One ServingProblem's launches: flash_fwd (``kernel``, ``launch_config``) and, with splits, flash_combine
    (``combine``, ``combine_config``); the scalar arguments; the scratch the parts need (``part_bytes``, lse_part at
    ``lse_offset``); ``runs``: False when the grid is empty (a varlen batch without query rows: nothing to launch);
    ``check`` / ``check_config``: serving_check, launched first where the call has index arrays (None otherwise), and
    ``tag``, the number its record names the problem by; ``state_bytes``: a fused build's state (``state_bytes``; 0
    unfused), whose launch checks the indices itself where ``checks`` (the call has index arrays)."""

    __slots__ = (
        "problem",
        "kernel",
        "combine",
        "launch_config",
        "combine_config",
        "scalars",
        "what",
        "part_bytes",
        "lse_offset",
        "runs",
        "check",
        "check_config",
        "overlap_config",
        "overlap_combine_config",
        "check_scalars",
        "combine_scalars",
        "tag",
        "packed_check",
        "packed_fwd",
        "packed_overlap",
        "packed_combine",
        "packed_combine_overlap",
        "lock",
        "state_bytes",
        "checks",
    )

    def __init__(self, problem: ServingProblem, kernel, combine, launch_config, combine_config, what: str, check=None):
        self.problem = problem
        self.kernel, self.combine = kernel, combine
        self.launch_config, self.combine_config = launch_config, combine_config
        self.scalars = kernel_scalars(problem)
        self.what = what
        self.part_bytes, self.lse_offset = part_layout(problem)
        self.runs = launch_config is not None
        self.state_bytes = state_bytes(problem)
        self.checks = has_indices(problem)
        self.check = check
        self.check_config = rt.launch_config((1, 1, 1), (indices.CHECK_THREADS, 1, 1)) if check is not None else None
        self.overlap_config = None  # flash_fwd's config as the check's programmatic dependent (sm_90+)
        self.overlap_combine_config = None  # flash_combine's as flash_fwd's
        pdl = int(re.match(r"sm_(\d+)", problem.arch)[1]) >= 90
        if pdl and check is not None and launch_config is not None and not problem.config.fused:
            cfg = problem.config
            self.overlap_config = rt.launch_config(
                problem.grid, (cfg.threads, 1, 1), cfg.smem_bytes, overlap_previous=True
            )
        if pdl and combine_config is not None:
            self.overlap_combine_config = rt.launch_config(
                combine_config.grid, combine_config.block, overlap_previous=True
            )
        self.check_scalars = check_scalars(problem)
        self.combine_scalars = combine_scalars(problem)
        self.tag = tag_of(problem)
        self._pack()

    def _pack(self) -> None:
        """The launches with their parameters packed once (flashsim.gpu.packed): the scalars written now, the
        addresses (0 here) by each call (``enqueue``), under ``lock``."""
        self.lock = threading.Lock()
        self.packed_check = self.packed_fwd = self.packed_overlap = self.packed_combine = None
        if self.check is not None:
            args = check_args(self.problem, {}, 0, self.tag, scalars=self.check_scalars, pointer=int)
            if len(args) != _RECORD_SLOT + 2:
                raise AssertionError("serving_check's argument list changed: update _RECORD_SLOT")
            self.packed_check = packed.PackedLaunch(self.check.kernel, self.check_config, args, f"kernel {CHECK_NAME}")
        if not self.runs:
            return
        head, totals, pages, lse_strides = self.scalars
        args = (0,) * 6 + head + (0, 0, 0) + totals + (0,) + pages + (0, 0) + lse_strides
        if (len(head), len(totals), len(pages)) != (_CU_Q - 6, _TABLE - _CU_Q - 3, _PARTS - _TABLE - 1):
            raise AssertionError("flash_fwd's argument list changed: update the slot numbers in flashsim.gpu.serving")
        if self.state_bytes:
            if len(args) != _STATE:
                raise AssertionError("flash_fwd's fused arguments moved: update _STATE in flashsim.gpu.serving")
            args += fused_tail(self.problem, 0, 0, self.tag, pointer=int)
        self.packed_fwd = packed.PackedLaunch(self.kernel.kernel, self.launch_config, args, self.what)
        if self.overlap_config is not None:
            self.packed_overlap = self.packed_fwd.with_config(self.overlap_config)
        self.packed_combine_overlap = None
        if self.combine is not None:
            args = (0, 0, 0, 0) + self.combine_scalars
            self.packed_combine = packed.PackedLaunch(self.combine.kernel, self.combine_config, args, self.what)
            if self.overlap_combine_config is not None:
                self.packed_combine_overlap = self.packed_combine.with_config(self.overlap_combine_config)

    def __repr__(self) -> str:
        return f"ServingPlan({self.what})"


# -- the index check on the device and its record ------------------------------------------------------------

_TAGS: dict = {}  # ServingProblem -> tag (1, 2, ...): the record names the failing call's problem by it
_TAGGED: dict = {}  # tag -> ServingProblem
_RECORD: dict = {}  # "view": the record's u64 words on the host, "ptr": its device address (mapped_host)
_AT_EXIT: list = []  # the exit hook, registered once


def has_indices(prob: ServingProblem) -> bool:
    """Whether a call of ``prob`` passes index arrays the check kernel reads."""
    return prob.kind == "varlen" or prob.seqlens or bool(prob.page_size)


def tag_of(prob: ServingProblem) -> int:
    tag = _TAGS.get(prob)
    if tag is None:
        tag = _TAGS[prob] = len(_TAGS) + 1
        _TAGGED[tag] = prob
    return tag


def record() -> tuple[np.ndarray, int]:
    """(host view of the record's RECORD_WORDS u64, its device address): one per process, allocated on first use
    (outside any capture: the first call of a shape allocates it) and set to no violation."""
    view = _RECORD.get("view")
    if view is None:
        raw, ptr = rt.mapped_host(indices.RECORD_WORDS * 8)
        view = raw.view(np.uint64)
        view[1:] = 0
        view[0] = indices.NONE
        _RECORD["view"], _RECORD["ptr"] = view, ptr
        _RECORD["word"] = memoryview(view)  # its items read as Python ints: raise_pending's cheap test
        if not _AT_EXIT:
            _AT_EXIT.append(atexit.register(_unread_at_exit))
    return view, _RECORD["ptr"]


def _unread_at_exit() -> None:
    """A bad index no one read by the end of the process is said on stderr rather than lost."""
    err = pending_error()
    if err is not None:
        print(f"flashsim: a serving call's index check found a bad index that was never read: {err}", file=sys.stderr)


def pending_error() -> ValueError | None:
    """The ValueError of the violation the check kernel recorded (None without one), and the record cleared: a
    host read of mapped memory, no wait for the GPU (a check still running is seen by a later read)."""
    view = _RECORD.get("view")
    if view is None:
        return None
    c = int(view[0])
    if c == indices.NONE:
        return None
    value, tag = int(view[1]), int(view[2])
    view[1:] = 0
    view[0] = indices.NONE
    prob = _TAGGED.get(tag)
    if prob is None:
        return ValueError(f"the serving index check on the GPU flagged a violation (code {c:#x}) of an unknown call")
    err = index_error(prob, c, value)
    op = "attention_with_kvcache" if prob.kind == "kvcache" else "attention_varlen"
    return ValueError(f"{err} (checked on the GPU by flashsim.gpu.{op}: {prob.describe()})")


def raise_pending() -> None:
    """Raise the recorded index violation, if any (``pending_error``); every serving call's first step, so the
    common case (no record yet, or no violation) is one read of the record's first word."""
    word = _RECORD.get("word")
    if word is None or word[0] == _NONE:
        return
    err = pending_error()
    if err is not None:
        raise err


_NONE = indices.NONE


def check_index_errors(wait: bool = True) -> None:
    """Raise the ValueError of a bad index any serving call (eager or replayed in a CUDA graph) has found on the GPU
    since the last read; ``wait``: first wait for all work on the device (a host synchronisation), so that every
    check launched so far has run."""
    if wait and rt.opened():
        rt.synchronize_device()
    raise_pending()


def check_for(arch: str):
    """serving_check for ``arch``, loaded once."""
    key = (CHECK_NAME, arch)
    kern = launch._KERNELS.get(key)
    if kern is None:
        kern = launch._KERNELS[key] = rt.load(build_check(arch), CHECK_NAME)
    return kern


def build_check(arch: str):
    """Compile kernel/serving_check.cu for ``arch`` (no GPU needed): its defines are flashsim.serving.indices'."""
    return compile_cuda(kernel_path(CHECK_FILE).read_text(), arch=arch, name=CHECK_FILE, defines=indices.defines())


def check_scalars(prob: ServingProblem) -> tuple:
    """serving_check's scalar arguments for ``prob`` (between the four index pointers and the record)."""
    i = np.int32
    return (
        i(prob.batch),
        i(prob.seqlen_limit),
        i(prob.nk_cap),
        i(prob.max_pages),
        i(prob.page_shift),
        i(prob.num_pages),
        i(prob.q_total),
        i(prob.k_total),
        i(prob.nq_cap),
    )


def check_args(prob: ServingProblem, ptrs: dict, record: int, tag: int, *, scalars=None, pointer=np.uint64) -> tuple:
    """serving_check's arguments for ``prob``: the index arrays' addresses (``ptrs`` "seqlens_k", "block_table",
    "cu_q", "cu_k", 0 where absent), the scalars (``check_scalars``, or ``scalars`` built by it), the record's
    address and the tag its message is looked up by. ``pointer`` types the addresses: np.uint64 (flashsim.ptx wants
    a width), or int for cuda.core's launch (a Python int is passed as an 8-byte intptr_t: no conversion)."""
    get = ptrs.get
    return (
        pointer(get("seqlens_k", 0)),
        pointer(get("block_table", 0)),
        pointer(get("cu_q", 0)),
        pointer(get("cu_k", 0)),
        *(check_scalars(prob) if scalars is None else scalars),
        pointer(record),
        np.uint64(tag),
    )


def combine_for(config, arch: str):
    """flash_combine of ``config``'s build (loaded once per (config, arch); the build is flash_fwd's, cached)."""
    key = ("combine", config, arch)
    kern = launch._KERNELS.get(key)
    if kern is None:
        kern = launch._KERNELS[key] = rt.load(launch.build_kernel(config, arch), COMBINE_NAME)
    return kern


def plan_for(prob: ServingProblem) -> ServingPlan:
    """The cached ServingPlan of ``prob`` (for the current GPU): compiles and loads the kernels the first time."""
    cfg = prob.config
    if FUSED and not cfg.fused and cfg.has_fused_form:  # before the cache: an unfused plan must not answer
        return plan_for(fused(prob))
    plan = _PLANS.get(prob)
    if plan is not None:
        return plan
    grid = prob.grid
    what = f"kernel flash_fwd (grid {grid}, block ({cfg.threads}, 1, 1), {cfg.smem_bytes} B dynamic smem; " + (
        f"{cfg.describe()}); {prob.describe()}"
    )
    # the check kernel: unfused, or a fused call with nothing to launch (no query rows) whose indices still get checked
    check = check_for(prob.arch) if has_indices(prob) and (not cfg.fused or min(grid) == 0) else None
    if has_indices(prob):
        record()  # allocated now, outside any capture
    if min(grid) == 0:
        plan = ServingPlan(prob, None, None, None, None, what + " (empty grid: no launch)", check)
    else:
        kern = launch.kernel_for(cfg, prob.arch)
        config = rt.launch_config(grid, (cfg.threads, 1, 1), cfg.smem_bytes)
        comb = comb_config = None
        if cfg.fused and has_indices(prob):
            what += "; index check fused"
        if cfg.split:
            comb = combine_for(cfg, prob.arch)
            comb_config = rt.launch_config((-(-prob.part_rows // COMBINE_WARPS), 1, 1), (32 * COMBINE_WARPS, 1, 1))
            what += f"; then {COMBINE_NAME} over {prob.parts} parts"
        plan = ServingPlan(prob, kern, comb, config, comb_config, what, check)
    if len(_PLANS) >= launch.MAX_KEYS:
        _PLANS.clear()
    _PLANS[prob] = plan
    return plan


def launch_serving(plan: ServingPlan, stream, ptrs: dict, check: bool = True) -> None:
    """Enqueue serving_check (``check`` and a call with index arrays), flash_fwd and (split-KV) flash_combine on
    ``stream`` (a raw CUstream handle, a cuda.core Stream or any form runtime.stream_handle takes); no host
    synchronisation. ``ptrs``: device addresses "q", "k", "v", "o", "lse", "overflow" (0 without the flag), "cu_q",
    "cu_k", "seqlens_k", "block_table" (0 where the call has none), "parts" (``plan.part_bytes`` of scratch, with
    splits), "state" (``plan.state_bytes``, zeroed before the plan's first launch on this stream, fused builds)."""
    get = ptrs.get
    enqueue(
        plan,
        stream if type(stream) is int else rt.stream_handle(stream),
        ptrs["q"],
        ptrs["k"],
        ptrs["v"],
        ptrs["o"],
        ptrs["lse"],
        get("overflow", 0),
        get("cu_q", 0),
        get("cu_k", 0),
        get("seqlens_k", 0),
        get("block_table", 0),
        get("parts", 0),
        check,
        get("state", 0),
    )


def enqueue(
    plan, stream, q, k, v, o, lse, overflow, cu_q, cu_k, seqlens_k, block_table, parts, check=True, state=0
) -> None:
    """``launch_serving`` with the addresses as ints, in its order, and ``stream`` a raw CUstream handle: the
    front-ends' hot path. The addresses go into the plan's packed launches (flashsim.gpu.packed) and each launch is
    one cuLaunchKernelEx; the plan's lock covers the writes and the launches, so threads may share a plan."""
    checked = check and plan.packed_check is not None
    if not plan.runs and not checked:
        return
    sticky = rt.sticky_error()
    if sticky:
        from ..errors import GPUError

        raise GPUError(
            f"the CUDA context of this process is unusable after an earlier error ({sticky}); restart the process"
        )
    split = plan.part_bytes > 0
    if split and not parts:
        raise ValueError(f"split-KV needs {plan.part_bytes} B of scratch for its parts (got a null pointer)")
    if plan.state_bytes and not state and plan.runs:
        raise ValueError(f"a fused launch needs {plan.state_bytes} B of zeroed state (got a null pointer)")
    lse_part = parts + plan.lse_offset if split else 0
    fwd = plan.packed_fwd
    with plan.lock:
        try:
            if checked:  # serving_check(seqlens_k, block_table, cu_q, cu_k, scalars..., record, tag)
                s = plan.packed_check.slots
                s[0], s[1], s[2], s[3], s[_RECORD_SLOT] = seqlens_k, block_table, cu_q, cu_k, _RECORD["ptr"]
                packed.driver_launch(plan.packed_check, stream)
                if OVERLAP_CHECK and plan.packed_overlap is not None:
                    fwd = plan.packed_overlap
            if not plan.runs:
                return
            # flash_fwd(q, k, v, o, lse, overflow, scalars..., cu_q, cu_k, seqlens_k, q_total, k_total, block_table,
            # pages..., o_part, lse_part, lse strides)
            s = fwd.slots
            _pack_six(s, 0, q, k, v, o, lse, overflow)
            s[_CU_Q], s[_CU_Q + 1], s[_CU_Q + 2], s[_TABLE] = cu_q, cu_k, seqlens_k, block_table
            s[_PARTS], s[_PARTS + 1] = (parts, lse_part) if split else (0, 0)
            if plan.state_bytes:  # fused: the state, and the record where the call is checked
                s[_STATE], s[_STATE + 1] = state, _RECORD["ptr"] if check and plan.checks else 0
            packed.driver_launch(fwd, stream)
            if plan.packed_combine is not None:
                # flash_combine(o_part, lse_part, o, lse, num_splits, part_rows, nq_cap, heads)
                comb = plan.packed_combine
                s = comb.slots
                s[0], s[1], s[2], s[3] = parts, lse_part, o, lse
                if OVERLAP_COMBINE and plan.packed_combine_overlap is not None:
                    comb = plan.packed_combine_overlap
                packed.driver_launch(comb, stream)
        except Exception as exc:
            rt.launch_failed(plan.what, exc)


def raise_if_overflowed(prob: ServingProblem, index: SequenceIndex, flag: int, v_host) -> None:
    """FloatingPointError (flashsim.emulator.serving.overflow_of) when the kernel's flag names a row."""
    if int(flag) == launch.NO_OVERFLOW or int(flag) < 0:
        return
    from ..emulator.serving import overflow_of

    raise overflow_of(prob, index, v_host, int(flag))


# -- the numpy / DeviceArray front-end ------------------------------------------------------------------------


def _host_index(arrays: dict) -> dict:
    """Host copies of the index arrays (numpy as is; DeviceArrays and DLPack GPU arrays copied back)."""
    out = {}
    for name, x in arrays.items():
        if x is None:
            out[name] = None
        elif isinstance(x, np.ndarray):
            out[name] = x
        else:
            out[name] = rt.to_device(x).to_numpy()
    return out


def run_host(q, k, v, prob: ServingProblem, arrays: dict, *, stream=None, check=True, check_overflow=True, raw=False):
    """Run ``prob`` on numpy arrays or DeviceArrays (synchronous): ``arrays`` the index arrays by name
    (cache_seqlens, block_table, cu_seqlens_q, cu_seqlens_k). Returns (o, lse) as numpy when q, k, v are numpy,
    else as DeviceArrays (with check_overflow="deferred", and the check); ``raw``: (o, lse, the row the kernel's
    overflow flag names or None) with no overflow check (flashsim verify)."""
    index = index_of(**_host_index(arrays))
    if check:
        check_indices(prob, index)
    dq, dk, dv = (rt.to_device(x) for x in (q, k, v))
    launch.misaligned(q=dq.ptr, k=dk.ptr, v=dv.ptr)
    dev_index = {
        name: rt.to_device(np.ascontiguousarray(x, np.int32))
        for name, x in _host_index(arrays).items()
        if x is not None
    }
    plan = plan_for(prob)
    do = rt.empty(prob.o_shape, get_format(prob.config.dtype).dtype)
    dl = rt.empty(prob.lse_shape, np.float32)
    flag = rt.to_device(np.array([launch.NO_OVERFLOW], np.uint64)) if prob.config.pv_mma_f16 else None
    parts = rt.empty((plan.part_bytes,), np.uint8) if plan.part_bytes else None
    state = rt.to_device(np.zeros(plan.state_bytes, np.uint8)) if plan.state_bytes else None
    s = rt.as_stream(stream)
    if s is not rt.default_stream():
        rt.synchronize()  # the copies ran on the module's stream
    rt.bind_thread()
    k_ptr = dk.ptr if prob.k_total else dq.ptr  # an empty cache is never read: any valid address
    ptrs = dict(
        q=dq.ptr,
        k=k_ptr,
        v=dv.ptr if prob.k_total else dq.ptr,
        o=do.ptr,
        lse=dl.ptr,
        overflow=flag.ptr if flag is not None else 0,
        cu_q=dev_index["cu_seqlens_q"].ptr if "cu_seqlens_q" in dev_index else 0,
        cu_k=dev_index["cu_seqlens_k"].ptr if "cu_seqlens_k" in dev_index else 0,
        seqlens_k=dev_index["cache_seqlens"].ptr if "cache_seqlens" in dev_index else 0,
        block_table=dev_index["block_table"].ptr if "block_table" in dev_index else 0,
        parts=parts.ptr if parts is not None else 0,
        state=state.ptr if state is not None else 0,
    )
    launch_serving(plan, s, ptrs, check=False)  # checked above, on the host arrays
    launch.sync_stream(s, plan.what)
    v_host = v if isinstance(v, np.ndarray) else None

    def overflow_check():
        if flag is not None:
            raise_if_overflowed(prob, index, int(flag.to_numpy()[0]), v_host if v_host is not None else dv.to_numpy())

    host = all(isinstance(x, np.ndarray) for x in (q, k, v))
    out = (do.to_numpy(), dl.to_numpy()) if host else (do, dl)
    if raw:
        value = None if flag is None else int(flag.to_numpy()[0])
        return (*out, None if value in (None, launch.NO_OVERFLOW) else value)
    if check_overflow is True:
        overflow_check()
    if check_overflow == "deferred":
        return (*out, OverflowCheck(overflow_check))
    return out


# -- the cupy front-end -----------------------------------------------------------------------------------------


def _cupy_state(cupy, dev: int, handle: int, nbytes: int):
    """A fused launch's state for cupy calls on stream ``handle``: zeroed once per (device, stream, size) on that
    stream and kept (each launch leaves it zeroed); a fresh one while the stream is being captured."""
    stream = cupy.cuda.ExternalStream(handle)
    if stream.is_capturing():
        with stream:
            return cupy.zeros((nbytes,), dtype=cupy.uint8)
    key = (dev, handle, nbytes)
    buf = _CUPY_STATE.get(key)
    if buf is None:
        if len(_CUPY_STATE) >= 64:
            _CUPY_STATE.clear()
        with stream:
            buf = _CUPY_STATE[key] = cupy.zeros((nbytes,), dtype=cupy.uint8)
    return buf


_CUPY_STATE: dict = {}  # (device, raw stream, bytes) -> zeroed cupy array


def run_cupy(cupy, q, k, v, prob: ServingProblem, arrays: dict, *, stream=None, check=True, check_overflow=True):
    """Run ``prob`` on cupy arrays: cupy's current stream (or ``stream``), outputs and split parts from cupy's pool;
    ``check``: serving_check on the device (its record read lazily: module docstring), no copy of the index arrays;
    no wait unless the overflow check reads its flag (then the index record is read too)."""
    for name, x in {"k": k, "v": v, **arrays}.items():
        if x is not None and not isinstance(x, cupy.ndarray):
            raise ValueError(f"{name} must be a cupy array like q, got {type(x).__name__}")
        if x is not None and x.device.id != q.device.id:
            raise ValueError(f"{name} is on device {x.device.id} but q is on device {q.device.id}")
        if x is not None and not x.flags.c_contiguous:
            raise ValueError(f"{name} must be C-contiguous (cupy.ascontiguousarray first)")
    if not q.flags.c_contiguous:
        raise ValueError("q must be C-contiguous (cupy.ascontiguousarray first)")
    launch.misaligned(q=q.data.ptr, k=k.data.ptr, v=v.data.ptr)
    plan = plan_for(prob)
    with q.device:
        o = cupy.empty(prob.o_shape, dtype=q.dtype)
        lse = cupy.empty(prob.lse_shape, dtype=cupy.float32)
        flag = cupy.full((1,), launch.NO_OVERFLOW, dtype=cupy.uint64) if prob.config.pv_mma_f16 else None
        parts = cupy.empty((plan.part_bytes,), dtype=cupy.uint8) if plan.part_bytes else None
        handle = cupy.cuda.get_current_stream().ptr if stream is None else rt.stream_handle(stream)
        state = _cupy_state(cupy, q.device.id, handle, plan.state_bytes) if plan.state_bytes else None
    ptr = lambda x: 0 if x is None else x.data.ptr  # noqa: E731
    ptrs = dict(
        q=q.data.ptr,
        k=k.data.ptr if prob.k_total else q.data.ptr,
        v=v.data.ptr if prob.k_total else q.data.ptr,
        o=o.data.ptr,
        lse=lse.data.ptr,
        overflow=ptr(flag),
        cu_q=ptr(arrays.get("cu_seqlens_q")),
        cu_k=ptr(arrays.get("cu_seqlens_k")),
        seqlens_k=ptr(arrays.get("cache_seqlens")),
        block_table=ptr(arrays.get("block_table")),
        parts=ptr(parts),
        state=ptr(state),
    )
    rt.bind_thread()
    raise_pending()  # an earlier call's bad index, without waiting
    launch_serving(plan, int(handle), ptrs, check=check)

    def overflow_check():
        value = int(flag.get()[0]) if flag is not None else None  # waits for the call
        if value is None:
            cupy.cuda.ExternalStream(handle).synchronize()
        raise_pending()
        if value is not None and value != launch.NO_OVERFLOW:
            index = index_of(**{n: None if x is None else x.get() for n, x in arrays.items()})  # error path only
            raise_if_overflowed(prob, index, value, v.get())

    if check_overflow is True and flag is not None:  # the call waits for its flag anyway: both are read now
        overflow_check()
    if check_overflow == "deferred":
        return o, lse, OverflowCheck(overflow_check)
    return o, lse
