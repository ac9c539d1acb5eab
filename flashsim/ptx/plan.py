"""A launch's plan and its blocks' run: the checks made before anything runs (``prepare``: arguments, grid,
block, clusters, shared memory; ``check_blocks``), the waves of blocks (``run_blocks``) and the ``Report``; apart from
the public ``flashsim.ptx.launch``, which runs a plan in this process or over a cluster engine
(flashsim.ptx.distributed), so that both build on this module and neither on the other.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..arch import get_arch
from . import cluster as clusters
from .errors import LaunchError
from .machine import DEFAULT_SPIN_LIMIT, Machine
from .memory import Memory, address, launch_buffers
from .module import Kernel
from .sanitize import make_sanitizer, wave_blocks
from .tensormap import TensorMap

__all__ = ["Report", "LaunchPlan", "prepare", "check_blocks", "run_blocks", "report_buffers", "SMS"]


MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
MAX_WAVE_THREADS = 1 << 15  # simulated threads of one wave, by default (launch's max_threads)
SMS = {"sm_90": 132, "sm_120": 170, "sm_100": 148, "sm_89": 128, "sm_86": 84, "sm_80": 108}  # H200, RTX 5090, ...


@dataclass
class Report:
    """What a launch did: ``counts`` warp instructions issued per opcode (predicated-off ones included, as a GPU
    issues them), ``instructions`` their sum, ``seconds`` the wall time, ``waves`` how many waves of blocks ran,
    ``printf`` the lines vprintf wrote, ``trace`` the recorded register values (flashsim.ptx.trace); ``writes``
    what a launch of some ``blocks`` stored (flashsim.ptx.writes.Written per array it wrote); ``workers`` the
    executor's workers that ran blocks (0: this process) and ``notes`` what the distributed launch decided."""

    kernel: str
    grid: tuple
    block: tuple
    counts: dict = field(default_factory=dict)
    instructions: int = 0
    seconds: float = 0.0
    waves: int = 0
    printf: list = field(default_factory=list)
    trace: object = None
    writes: list = field(default_factory=list)
    workers: int = 0
    notes: list = field(default_factory=list)

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
        lines += [f"  note: {note}" for note in self.notes]
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


@dataclass
class LaunchPlan:
    """A launch checked and ready to run (``prepare``): the kernel, its grid and block, the shared memory, the
    cluster shape, the parameter bytes and the array arguments, the sanitizer, the blocks per wave and the launch
    order of the blocks (None: linear)."""

    kernel: Kernel
    grid: tuple
    block: tuple
    shared_mem: int
    total_shared: int
    shape: clusters.Cluster
    params: bytes
    arrays: list
    check: str | None
    spin_limit: int
    per_wave: int
    order: np.ndarray | None

    @property
    def block_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def n_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]


def prepare(
    kernel: Kernel,
    grid,
    block,
    args,
    *,
    shared_mem: int = 0,
    check=None,
    max_threads: int = MAX_WAVE_THREADS,
    spin_limit: int = DEFAULT_SPIN_LIMIT,
    cluster=None,
    nonportable_cluster: bool = False,
) -> LaunchPlan:
    """Check a launch (``launch``'s arguments) and lay out its parameters: a LaunchPlan, or LaunchError."""
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
    per_wave = wave_blocks(check, bt, total_shared, max(1, int(max_threads) // bt), cs)
    per_wave = max(cs, per_wave - per_wave % cs)  # whole clusters: a cluster past max_threads is still one wave
    return LaunchPlan(
        kernel,
        grid,
        block,
        int(shared_mem),
        total_shared,
        shape,
        params,
        arrays,
        check,
        int(spin_limit),
        per_wave,
        clusters.launch_order(grid, shape),
    )


def check_blocks(plan: LaunchPlan, blocks) -> range:
    """``blocks`` (None: every block) as a range of whole clusters of the launch (LaunchError otherwise)."""
    n_grid = plan.n_blocks
    cs = plan.shape.size
    if blocks is None:
        return range(n_grid)
    if not isinstance(blocks, range) or blocks.step != 1 or not 0 <= blocks.start <= blocks.stop <= n_grid:
        raise LaunchError(
            f"blocks must be a range(start, stop) of linear block indices within 0..{n_grid}, got {blocks!r}"
        )
    if blocks.start % cs or blocks.stop % cs:
        raise LaunchError(
            f"blocks {blocks!r} must hold whole clusters of {cs} blocks (start and stop multiples of {cs})"
        )
    return blocks


def run_blocks(plan: LaunchPlan, blocks: range, *, trace=None, progress=None, buffers=None, writes=None) -> Report:
    """Run the ``blocks`` of a checked launch in waves (the module docstring) over ``buffers`` (flashsim.ptx.memory
    Buffers; None: the arrays in place); ``writes``: a WriteLog to record global stores in, or None; ``progress``:
    None or called with (blocks done, blocks in all, seconds, warp instructions) after each wave."""
    kernel = plan.kernel
    prog = kernel.program
    layout = prog.layout
    grid, block, bt, cs = plan.grid, plan.block, plan.block_threads, plan.shape.size
    order, per_wave = plan.order, plan.per_wave
    arch = kernel.module.arch
    report = Report(kernel.name, grid, block, trace=trace)
    if buffers is None:
        buffers = launch_buffers(plan.arrays, layout.global_image)
    counts = np.zeros(len(prog.ops), np.int64)
    t0 = time.perf_counter()
    for first in range(blocks.start, blocks.stop, per_wave):
        n_blocks = min(per_wave, blocks.stop - first)
        linear = np.arange(first, first + n_blocks) if order is None else order[first : first + n_blocks]

        def locate(t, linear=linear):
            return _locate(kernel, prog, machine, t, linear, grid, block)

        memory = Memory(
            layout, plan.arrays, plan.params, n_blocks, bt, plan.total_shared, plan.check, locate, cs, buffers
        )
        specials = _specials(linear, grid, block, arch, plan.shared_mem, plan.total_shared, plan.shape)
        machine = Machine(
            prog,
            memory,
            n_blocks,
            bt,
            specials,
            kernel=kernel.name,
            locate=locate,
            spin_limit=plan.spin_limit,
            trace=trace,
            cluster_size=cs,
        )
        if trace is not None:
            trace.wave(first, n_blocks, None if order is None else linear)
        if writes is not None:
            writes.wave(machine, linear)
            memory.writes = writes
        sanitizer = make_sanitizer(plan.check, machine, block)
        memory.hook = sanitizer
        machine.sanitizer = sanitizer if plan.check == "racecheck" else None
        machine.run()
        counts += machine.counts
        report.printf += machine.state.get("printf", [])
        report.waves += 1
        if progress is not None:
            progress(first + n_blocks - blocks.start, len(blocks), time.perf_counter() - t0, int(counts.sum()))
    report.seconds = time.perf_counter() - t0
    for pc in np.flatnonzero(counts):
        name = prog.op_names[pc]
        report.counts[name] = report.counts.get(name, 0) + int(counts[pc])
    report.instructions = int(counts.sum())
    return report


def report_buffers(plan: LaunchPlan, log) -> list:
    """The buffers a local launch wrote (its arrays in place), for WriteLog.results."""
    return [b for b in launch_buffers(plan.arrays, plan.kernel.program.layout.global_image) if b.base in log.bases]


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
