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

import time
from dataclasses import dataclass, field

import numpy as np

from ..arch import get_arch
from . import cluster as clusters
from .errors import LaunchError
from .machine import Machine
from .memory import Memory, address
from .module import Kernel
from .sanitize import make_sanitizer, wave_blocks
from .tensormap import TensorMap

__all__ = ["launch", "Report"]

MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
SMS = {"sm_90": 132, "sm_120": 170, "sm_100": 148, "sm_89": 128, "sm_86": 84, "sm_80": 108}  # H200, RTX 5090, ...


@dataclass
class Report:
    """What a launch did: ``counts`` warp instructions issued per opcode (predicated-off ones included, as a GPU
    issues them), ``instructions`` their sum, ``seconds`` the wall time, ``waves`` how many waves of blocks ran,
    ``printf`` the lines vprintf wrote, ``trace`` the recorded register values (flashsim.ptx.trace)."""

    kernel: str
    grid: tuple
    block: tuple
    counts: dict = field(default_factory=dict)
    instructions: int = 0
    seconds: float = 0.0
    waves: int = 0
    printf: list = field(default_factory=list)
    trace: object = None

    @property
    def rate(self) -> float:
        """Simulated warp instructions per second."""
        return self.instructions / self.seconds if self.seconds else 0.0

    def __str__(self) -> str:
        top = sorted(self.counts.items(), key=lambda kv: -kv[1])[:12]
        lines = [
            f"{self.kernel}: grid {self.grid}, block {self.block}: {self.instructions:,} warp instructions in "
            f"{self.seconds:.3f} s ({self.rate:,.0f}/s), {self.waves} wave(s)"
        ]
        lines += [f"  {n:>12,}  {op}" for op, n in top]
        return "\n".join(lines)


def _dims(value, what: str, limit) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    if isinstance(value, (str, bytes)):  # iterable, but "32" is not (3, 2)
        raise LaunchError(f"{what} must be an int or a tuple of up to 3 ints, got {value!r}")
    try:
        dims = tuple(int(v) for v in value)
    except TypeError:
        raise LaunchError(f"{what} must be an int or a tuple of up to 3 ints, got {value!r}") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise LaunchError(f"{what} must be 1 to 3 positive ints, got {value!r}")
    dims = dims + (1,) * (3 - len(dims))
    for d, lim, axis in zip(dims, limit, "xyz"):
        if d > lim:
            raise LaunchError(f"{what}.{axis} = {d} is past the limit {lim}")
    return dims


def _param_bytes(kernel: Kernel, args) -> tuple[bytes, list]:
    """The kernel's parameter bytes from ``args`` and the arrays among them (LaunchError naming a bad argument)."""
    layout = kernel.program.layout
    params = kernel.params
    if not isinstance(args, (list, tuple)):
        raise LaunchError(f"args must be a list or tuple of {len(params)} arguments, got {type(args).__name__}")
    if len(args) != len(params):
        names = ", ".join(f"{p.name} ({p.type}{f'[{p.count}]' if p.count > 1 else ''})" for p in params)
        raise LaunchError(f"{kernel.name} takes {len(params)} arguments ({names}), got {len(args)}")
    buf = bytearray(layout.param_size)
    arrays = []
    for i, (p, a) in enumerate(zip(params, args)):
        off, size, _ = layout.params[p.name]
        where = f"argument {i} ({p.name}, {p.type}{f'[{p.count}]' if p.count > 1 else ''})"
        if isinstance(a, np.ndarray) and a.dtype.names is None and a.ndim > 0:
            if size != 8:
                raise LaunchError(f"{where}: an array is passed by its 8-byte address, the parameter has {size} bytes")
            arrays.append(a)
            raw = int(address(a)).to_bytes(8, "little")
        elif isinstance(a, TensorMap):  # a .param .align 64 .b8 p[128]: flashsim's encoding of the map
            raw = a.bytes
        elif isinstance(a, (bytes, bytearray, memoryview)):
            raw = bytes(a)
        elif isinstance(a, (np.void, np.ndarray)) or (isinstance(a, np.generic) and a.dtype.names is not None):
            raw = np.asarray(a).tobytes()
        elif isinstance(a, np.generic):
            raw = a.tobytes()
            if p.type in (".f32", ".f64") and a.dtype.kind != "f":
                raise LaunchError(f"{where}: expects a float of {size} bytes, got {a.dtype}")
        elif isinstance(a, (bool, int, float)):
            raise LaunchError(
                f"{where}: pass a numpy scalar of the parameter's width (np.int32, np.float32, "
                f"np.uint64, ...), not a Python {type(a).__name__}: its width is ambiguous"
            )
        else:
            raise LaunchError(f"{where}: a numpy array, numpy scalar or bytes expected, got {type(a).__name__}")
        if len(raw) != size:
            raise LaunchError(f"{where}: {size} bytes expected, got {len(raw)}")
        buf[off : off + size] = raw
    return bytes(buf), arrays


def _specials(linear_blocks, grid, block, arch: str, dyn: int, total: int, cluster=None) -> dict:
    """Every special register's values over the threads of a wave of blocks (their linear indices)."""
    bt = block[0] * block[1] * block[2]
    linear_blocks = np.asarray(linear_blocks, np.int64)
    t = np.arange(linear_blocks.size * bt)
    local = t % bt
    linear = linear_blocks[t // bt]
    gx, gy = grid[0], grid[1]
    lane = local % 32
    n_sm = SMS.get(arch, 132)
    values = {
        "%tid.x": local % block[0],
        "%tid.y": (local // block[0]) % block[1],
        "%tid.z": local // (block[0] * block[1]),
        "%ntid.x": block[0],
        "%ntid.y": block[1],
        "%ntid.z": block[2],
        "%ctaid.x": linear % gx,
        "%ctaid.y": (linear // gx) % gy,
        "%ctaid.z": linear // (gx * gy),
        "%nctaid.x": grid[0],
        "%nctaid.y": grid[1],
        "%nctaid.z": grid[2],
        "%laneid": lane,
        "%warpid": local // 32,
        "%nwarpid": -(-bt // 32),
        "%smid": linear % n_sm,
        "%nsmid": n_sm,
        "%gridid": 0,
        "%lanemask_eq": (np.uint64(1) << lane.astype(np.uint64)).astype(np.uint32),
        "%lanemask_lt": ((np.uint64(1) << lane.astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
        "%lanemask_le": ((np.uint64(1) << (lane + 1).astype(np.uint64)) - np.uint64(1)).astype(np.uint32),
        "%lanemask_ge": (~((np.uint64(1) << lane.astype(np.uint64)) - np.uint64(1))).astype(np.uint32),
        "%lanemask_gt": (~((np.uint64(1) << (lane + 1).astype(np.uint64)) - np.uint64(1))).astype(np.uint32),
        "%dynamic_smem_size": dyn,
        "%total_smem_size": total,
        "%aggr_smem_size": total,
    }
    for i in range(32):
        values[f"%envreg{i}"] = 0
    ctaid = (values["%ctaid.x"], values["%ctaid.y"], values["%ctaid.z"])
    values.update(clusters.special_values(cluster or clusters.Cluster(), grid, ctaid))
    return values


def launch(
    kernel: Kernel,
    grid,
    block,
    args,
    *,
    shared_mem: int = 0,
    check=None,
    trace=None,
    max_threads: int = 1 << 15,
    spin_limit: int = 100_000,
    progress=None,
    blocks: range | None = None,
    cluster=None,
    nonportable_cluster: bool = False,
) -> Report:
    """Run ``kernel`` (flashsim.ptx.Module.kernel) on the CPU (the module docstring); returns a Report.
    ``check``: None, "memcheck", "racecheck" or "initcheck" (flashsim.ptx.sanitize); ``trace``: a
    flashsim.ptx.trace.Trace of what to record; ``progress``: None or a callable given (blocks done, blocks in all,
    seconds so far) after each wave (the CLI's progress line); ``blocks``: a range of linear block indices (x fastest)
    to run instead of the whole grid (a share of one launch for one worker: their %ctaid are the launch's), default
    every block; ``cluster``: None or (x, y, z) blocks per thread-block cluster (flashsim.ptx.cluster: sm_90+, each
    dimension dividing the grid's, at most 8 blocks, 16 with ``nonportable_cluster``); with clusters ``blocks``
    counts in the launch's order (cluster by cluster, rank fastest: the linear order when clusters span only x) and
    holds whole clusters."""
    if not isinstance(kernel, Kernel):
        raise LaunchError(f"kernel must be a flashsim.ptx Kernel (Module.kernel(name)), got {type(kernel).__name__}")
    if check not in (None, "memcheck", "racecheck", "initcheck"):
        raise LaunchError(f"check must be None, 'memcheck', 'racecheck' or 'initcheck', got {check!r}")
    arch = get_arch(kernel.module.arch)
    grid = _dims(grid, "grid", MAX_GRID)
    block = _dims(block, "block", MAX_BLOCK)
    bt = block[0] * block[1] * block[2]
    if bt > MAX_THREADS_PER_BLOCK:
        raise LaunchError(f"block {block} has {bt} threads, past {MAX_THREADS_PER_BLOCK}")
    for name in (".reqntid", ".maxntid"):
        dv = kernel.fn.directive(name)
        if dv is not None:
            want = tuple(int(x) for x in dv.args) + (1,) * (3 - len(dv.args))
            n = want[0] * want[1] * want[2]
            if (name == ".reqntid" and block != want) or (name == ".maxntid" and bt > n):
                raise LaunchError(f"{kernel.name} declares {name} {', '.join(map(str, dv.args))}; block is {block}")
    if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
        raise LaunchError(f"shared_mem must be a number of bytes >= 0, got {shared_mem!r}")
    prog = kernel.program
    layout = prog.layout
    total_shared = layout.dynamic_offset + int(shared_mem) if shared_mem else layout.static_shared
    cap = arch.smem_per_block_optin
    if total_shared > cap:
        raise LaunchError(
            f"{total_shared} bytes of shared memory per block ({layout.static_shared} static + "
            f"{int(shared_mem)} dynamic) past {arch.name}'s {cap} ({cap // 1024} KB, the most a block may opt in to on "
            f"compute capability {'.'.join(map(str, arch.compute_capability))})"
        )
    if cluster is not None:
        cluster = _dims(cluster, "cluster", (clusters.MAXIMUM,) * 3)
    shape = clusters.resolve(kernel, grid, cluster, arch.name, bool(nonportable_cluster))
    cs = shape.size
    params, arrays = _param_bytes(kernel, args)
    if trace is not None:
        trace.bind(prog, grid, block)
    report = Report(kernel.name, grid, block, trace=trace)
    n_grid = grid[0] * grid[1] * grid[2]
    if blocks is None:
        blocks = range(n_grid)
    if not isinstance(blocks, range) or blocks.step != 1 or not 0 <= blocks.start <= blocks.stop <= n_grid:
        raise LaunchError(
            f"blocks must be a range(start, stop) of linear block indices within 0..{n_grid}, got {blocks!r}"
        )
    if blocks.start % cs or blocks.stop % cs:
        raise LaunchError(
            f"blocks {blocks!r} must hold whole clusters of {cs} blocks (start and stop multiples of {cs})"
        )
    order = clusters.launch_order(grid, shape)
    n_total = blocks.stop
    per_wave = wave_blocks(check, bt, total_shared, max(1, int(max_threads) // bt), cs)
    per_wave = max(cs, per_wave - per_wave % cs)  # whole clusters: a cluster past max_threads is still one wave
    counts = np.zeros(len(prog.ops), np.int64)
    t0 = time.perf_counter()
    for first in range(blocks.start, n_total, per_wave):
        n_blocks = min(per_wave, n_total - first)
        linear = np.arange(first, first + n_blocks) if order is None else order[first : first + n_blocks]

        def locate(t, linear=linear):
            return _locate(kernel, prog, machine, t, linear, grid, block)

        memory = Memory(layout, arrays, params, n_blocks, bt, total_shared, check, lambda t: locate(t), cs)
        specials = _specials(linear, grid, block, arch.name, int(shared_mem), total_shared, shape)
        machine = Machine(
            prog,
            memory,
            n_blocks,
            bt,
            specials,
            kernel=kernel.name,
            locate=locate,
            spin_limit=spin_limit,
            trace=trace,
            cluster_size=cs,
        )
        if trace is not None:
            trace.wave(first, n_blocks, None if order is None else linear)
        sanitizer = make_sanitizer(check, machine, block)
        memory.hook = sanitizer
        machine.sanitizer = sanitizer if check == "racecheck" else None
        machine.run()
        counts += machine.counts
        report.printf += machine.state.get("printf", [])
        report.waves += 1
        if progress is not None:
            progress(first + n_blocks - blocks.start, len(blocks), time.perf_counter() - t0)
    report.seconds = time.perf_counter() - t0
    for pc in np.flatnonzero(counts):
        name = prog.op_names[pc]
        report.counts[name] = report.counts.get(name, 0) + int(counts[pc])
    report.instructions = int(counts.sum())
    return report


def _locate(kernel, prog, machine, t: int, linear_blocks, grid, block) -> dict:
    bt = block[0] * block[1] * block[2]
    linear = int(linear_blocks[t // bt])
    local = t % bt
    b = (linear % grid[0], (linear // grid[0]) % grid[1], linear // (grid[0] * grid[1]))
    th = (local % block[0], (local // block[0]) % block[1], local // (block[0] * block[1]))
    pc = machine.current_pc if machine.current_pc is not None else int(machine.pc[t])
    pc = min(pc, len(prog.ops) - 1)
    op = prog.ops[pc]
    where = dict(kernel=kernel.name, block=b, thread=th, line=op.line, source=prog.source_of(pc))
    if machine.cluster_size > 1:
        where["rank"] = int(t // bt) % machine.cluster_size
    return where
