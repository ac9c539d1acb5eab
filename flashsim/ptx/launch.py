"""``launch(kernel, grid, block, args, ...)``: run a kernel's PTX on the CPU and report what it did.

Arguments, matched to the entry's parameters in order: a numpy array is a global buffer passed by address (its bytes
read and written in place, whatever its dtype); a numpy scalar is a by-value parameter of its width (np.int32(128)
for a .u32 / .s32 / .b32, np.float32 for an .f32, np.uint64 for a .u64 that is not a pointer); ``bytes`` or a numpy
structured scalar / 0-d array fills a by-value struct parameter (``.param .align 8 .b8 p[N]``), with
``flashsim.ptx.address(array)`` giving the device address of an array to put in it; a flashsim.ptx.TensorMap
(``tensor_map_tiled``) fills a ``.param .align 64 .b8 p[128]`` tensor-map parameter. Everything is checked before
anything runs: the number and kind of arguments, grid and block against the arch's limits and the kernel's
``.reqntid`` / ``.maxntid``, shared memory (static plus ``shared_mem`` dynamic bytes) against the arch's cap.

Blocks run in waves of as many as fit ``max_threads`` simulated threads at once, in the order of their linear index
(x fastest); all blocks of a wave run together, so blocks of one wave that wait on each other through global memory
make progress. Simulated values of the special registers: %tid / %ntid / %ctaid / %nctaid as CUDA defines them,
%laneid the thread's lane, %warpid its warp in the block, %nwarpid the block's warps, %smid the block's linear index
modulo %nsmid (the arch's SM count), %clock / %clock64 / %globaltimer a counter of simulated instructions of the
wave, %lanemask_* the lane masks, %dynamic_smem_size / %total_smem_size the launch's, %gridid and %envreg* 0.

Clusters (``cluster=(x, y, z)`` or the kernel's ``.reqnctapercluster``; flashsim.ptx.cluster): waves are made of
whole clusters, run cluster by cluster (rank fastest), so the blocks of a cluster always run together and reach
each other's shared memory through shared::cluster addresses; %cluster_ctarank, %clusterid and the other cluster
registers as the PTX ISA defines them (without a cluster launch, each block its own 1x1x1 cluster).
"""

from __future__ import annotations

from .machine import DEFAULT_SPIN_LIMIT
from .module import Kernel
from .plan import (  # noqa: F401  (re-exported: the launch's limits and plan are flashsim.ptx.launch's names too)
    MAX_BLOCK,
    MAX_GRID,
    MAX_THREADS_PER_BLOCK,
    MAX_WAVE_THREADS,
    SMS,
    LaunchPlan,
    Report,
    check_blocks,
    prepare,
    report_buffers,
    run_blocks,
)
from .progress import progress_display
from .writes import WriteLog

__all__ = ["launch", "Report", "LaunchPlan", "prepare", "check_blocks", "run_blocks"]


def launch(
    kernel: Kernel,
    grid,
    block,
    args,
    *,
    shared_mem: int = 0,
    check=None,
    trace=None,
    max_threads: int = MAX_WAVE_THREADS,
    spin_limit: int = DEFAULT_SPIN_LIMIT,
    progress=None,
    blocks: range | None = None,
    cluster=None,
    nonportable_cluster: bool = False,
    executor=None,
    communicating: bool | None = None,
) -> Report:
    """Run ``kernel`` (flashsim.ptx.Module.kernel) on the CPU (the module docstring); returns a Report.
    ``check``: None, "memcheck", "racecheck" or "initcheck" (flashsim.ptx.sanitize); ``trace``: a
    flashsim.ptx.trace.Trace of what to record; ``progress``: None (a progress line on stderr when it is a terminal
    and the launch runs past a few seconds), True (always), False (never), or a callable given (blocks done, blocks
    in all, seconds so far) after each wave (flashsim.ptx.progress); ``blocks``: a range of linear block indices
    (x fastest) to run instead of the whole grid (a share of one launch: their %ctaid are the launch's), default
    every block; with ``blocks`` the report's ``writes`` holds what the blocks stored (flashsim.ptx.writes.Written:
    ``mask`` and ``bytes`` per array); ``cluster``: None or (x, y, z) blocks per thread-block cluster
    (flashsim.ptx.cluster: sm_90+, each dimension dividing the grid's, at most 8 blocks, 16 with
    ``nonportable_cluster``); with clusters ``blocks`` counts in the launch's order (cluster by cluster, rank
    fastest: the linear order when clusters span only x) and holds whole clusters. ``executor``: None (this
    process), "local:N" (N worker processes on this machine), a cluster engine's address ("tcp://host:8786") or a
    connected client (dask.distributed.Client): the blocks spread over its workers and the arrays are written as one
    process would write them (flashsim.ptx.distributed); ``communicating``: True runs every block on one worker
    (blocks that wait on each other through global memory), None decides from the PTX
    (flashsim.ptx.communication)."""
    plan = prepare(
        kernel,
        grid,
        block,
        args,
        shared_mem=shared_mem,
        check=check,
        max_threads=max_threads,
        spin_limit=spin_limit,
        cluster=cluster,
        nonportable_cluster=nonportable_cluster,
    )
    blocks_given = blocks is not None
    blocks = check_blocks(plan, blocks)
    if executor is not None:
        from .distributed import launch_distributed  # the engine's client is imported only when asked for

        return launch_distributed(plan, blocks, executor, trace=trace, progress=progress, communicating=communicating)
    if trace is not None:
        trace.bind(kernel.program, plan.grid, plan.block)
    log = WriteLog() if blocks_given else None
    display = progress_display(progress, len(blocks), "simulating blocks")
    try:
        report = run_blocks(plan, blocks, trace=trace, progress=display, writes=log)
    finally:
        display.close()
    if log is not None:
        report.writes = log.results(report_buffers(plan, log))
    return report
