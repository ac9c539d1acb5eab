"""One launch over many processes or machines: ``launch(..., executor=...)`` (docs/ptx.md, "One launch over many
machines").

The driver checks the launch as ``launch`` does (flashsim.ptx.plan.prepare), then asks every worker who it is
(``identity``: flashsim's version and a fingerprint of its source; a worker without flashsim, or with another
flashsim, is refused before anything runs) and puts on every worker once (``Executor.broadcast``) the PTX text, the
arch, the contraction decisions, the launch and every global buffer the kernel may reach (the array arguments and
every array with an address, at the driver's addresses). It splits the blocks into shares, contiguous ranges of
linear block indices, and submits one task per share; a worker decodes the module once per process
(``_module``: decoded ops are closures, not worth shipping), runs its share in waves as one process would
(flashsim.ptx.plan.run_blocks, ``%ctaid`` the launch's), over copies of the buffers made at their first store, and
returns what its stores wrote (flashsim.ptx.writes.Written) with its counts, printf lines and trace rows.

Shares: where the kernel's blocks communicate through global memory (flashsim.ptx.communication, or
``communicating=True``) the whole launch is one share on one worker, and the report says why. Otherwise a share is
a whole number of the launch's waves where the order of the simulation is visible (a trace, printf, %clock /
%globaltimer: their rows, lines and values are then those of one process), else of whole clusters, sized so that
every worker gets work (``share_size``). The driver merges the shares into staging copies as they arrive (copies
without a race and the reductions give the same bytes in any order) and copies them into the arrays only once every
share succeeded and merged (flashsim.ptx.writes.Merger: a byte that
two blocks stored is a BlockRace, an integer ``red`` merges by its reduction): nothing of a failed launch reaches
the arrays. A share whose worker died is run again by the engine; past the engine's retries the launch fails with
WorkerError naming the blocks. An error a share raised (a fault, a sanitizer's finding, a deadlock) is raised on the
driver as the same error, naming its block, thread and line; of several, the one of the lowest blocks (what one
process running the blocks in order would have met first).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .. import __version__
from ..settings import limit_mma_threads
from . import errors
from .communication import communicates
from .errors import LaunchError, WorkerError
from .executor import Died, resolve
from .ir import Sym
from .memory import Buffer, launch_buffers
from .module import Module
from .plan import LaunchPlan, Report, run_blocks
from .progress import progress_display
from .trace import Trace
from .writes import Merger, WriteLog

__all__ = ["launch_distributed", "identity", "run_share", "share_size", "shares", "MEMORY_FACTOR"]

MEMORY_FACTOR = 3  # a worker holds the broadcast buffers, its copies of those it stores into, and their write log
MIN_SHARE_THREADS = 4096  # a share's waves hold at least this many threads where the blocks allow: numpy's per-call
# overhead is then a small part of each simulated instruction (the rate is flat from about 2,048 threads up)
SHARES_PER_WORKER = 4  # at most: later shares go to the workers that finish first
_CLOCKS = ("%clock", "%clock64", "%clock_hi", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi")
_TEST_FAULT = None  # tests: (linear block, marker path or None): the worker running that block exits (os._exit)


@lru_cache(maxsize=1)
def _fingerprint() -> str:
    """A hash of flashsim's Python source: two processes with equal fingerprints simulate alike."""
    root = pathlib.Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def identity() -> dict:
    """Who this process is, for the driver's check of its workers: flashsim's version and source fingerprint."""
    import platform
    import socket

    return {
        "version": __version__,
        "fingerprint": _fingerprint(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


_PROBE = "__import__('flashsim.ptx.distributed', fromlist=['identity']).identity()"


@dataclass
class Payload:
    """What every worker receives once: the module (PTX, arch, contraction table, the address of its .global image,
    a key for the worker's cache), the kernel's name, the launch (a LaunchPlan without kernel and arrays) and the
    buffers (name, device address, writable, bytes: a flat uint8 array, or the size of a buffer of zeros)."""

    module_key: str
    ptx: str
    arch: str
    contraction: dict
    image_base: int
    kernel: str
    launch: dict
    buffers: list


_MODULES: dict = {}  # module key -> Module, per worker process


def _module(p: Payload) -> Module:
    module = _MODULES.get(p.module_key)
    if module is None:
        if len(_MODULES) >= 8:
            _MODULES.pop(next(iter(_MODULES)))
        module = _MODULES[p.module_key] = Module(p.ptx, p.arch, p.contraction, image_base=p.image_base)
    return module


@dataclass
class ShareResult:
    """A share's outcome: its blocks, the worker, counts per opcode, waves, seconds, printf lines, the trace's
    chunks, the Written list; or ``error`` (an ErrorInfo)."""

    start: int
    stop: int
    worker: str = ""
    counts: dict | None = None
    waves: int = 0
    seconds: float = 0.0
    printf: list | None = None
    trace: tuple | None = None
    writes: list | None = None
    error: tuple | None = None


def _error_info(exc: BaseException) -> tuple:
    """A raised error as (module, class name, message, attributes): flashsim's errors take keyword arguments, which
    pickling an exception does not keep; the driver rebuilds the same class (``_raise``)."""
    import traceback

    cls = type(exc)
    message = str(exc)
    if not cls.__module__.startswith("flashsim"):
        message += "\n" + "".join(traceback.format_exception(exc)[-6:])
    attrs = {k: v for k, v in vars(exc).items() if isinstance(v, (int, str, tuple, float, type(None)))}
    return cls.__module__, cls.__name__, message, attrs


def _rebuild(info: tuple, where: str) -> BaseException:
    module, name, message, attrs = info
    cls = getattr(errors, name, None) if module == errors.__name__ else None
    if cls is None or not (isinstance(cls, type) and issubclass(cls, Exception)):
        return WorkerError(f"{where} raised {module}.{name}: {message}")
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    vars(err).update(attrs)
    return err


def run_share(payload: Payload, start: int, stop: int, trace_spec, races: bool, fault) -> ShareResult:
    """A worker's task: run blocks ``start``..``stop`` of the payload's launch (the module docstring)."""
    result = ShareResult(start, stop, worker=f"{os.uname().nodename}:{os.getpid()}")
    # a share is one task of a worker: its tensor-core calls run on one thread, the parallelism is the workers'
    # (else N workers of 8 threads each would share N cores); a worker's own setting wins
    limit_mma_threads(1)
    try:
        if fault is not None and start <= fault[0] < stop:
            marker = fault[1]
            if marker is None or not os.path.exists(marker):
                if marker is not None:
                    pathlib.Path(marker).write_text(result.worker)
                os._exit(1)
        module = _module(payload)
        kernel = module.kernel(payload.kernel)
        plan = LaunchPlan(kernel=kernel, arrays=[], **payload.launch)
        buffers = [
            Buffer(data, name, base=base, writable=writable, private=False)
            if isinstance(data, np.ndarray)
            else Buffer(np.zeros(data, np.uint8), name, base=base, writable=writable)  # sent as its size: zeros
            for name, base, writable, data in payload.buffers
        ]
        trace = None
        if trace_spec is not None:
            trace = Trace(**trace_spec)
            trace.bind(kernel.program, plan.grid, plan.block)
        log = WriteLog(races=races, grid=plan.grid)
        report = run_blocks(plan, range(start, stop), trace=trace, buffers=buffers, writes=log)
        result.counts = report.counts
        result.waves = report.waves
        result.seconds = report.seconds
        result.printf = report.printf
        if trace is not None:
            result.trace = (trace._chunks, len(trace), trace.truncated)
        result.writes = log.results([b for b in buffers if b.base in log.bases])
    except Exception as exc:  # noqa: BLE001 - every error goes back to the driver, which raises it
        result.error = _error_info(exc)
    return result


def share_size(n_blocks: int, workers: int, align: int, block_threads: int) -> int:
    """Blocks per share: enough shares for every worker (at most SHARES_PER_WORKER each), each at least
    MIN_SHARE_THREADS threads where that leaves every worker one, a multiple of ``align``."""
    lo = -(-n_blocks // (SHARES_PER_WORKER * workers))
    hi = -(-n_blocks // workers)
    size = min(max(-(-MIN_SHARE_THREADS // block_threads), lo), hi)
    return max(align, -(-size // align) * align)


def shares(blocks: range, size: int) -> list[range]:
    return [range(s, min(s + size, blocks.stop)) for s in range(blocks.start, blocks.stop, size)]


def _check_workers(ex, workers: list) -> None:
    if not workers:
        raise WorkerError(f"the {ex.name} executor has no workers")
    mine = identity()
    for worker, got in ex.run_everywhere(_PROBE).items():
        if isinstance(got, BaseException):
            why = f"{type(got).__name__}: {got}"
            if isinstance(got, ImportError):
                why = f"flashsim is not importable there ({why}): install this flashsim ({__version__}) on every worker"
            raise WorkerError(f"worker {worker} cannot run flashsim.ptx: {why}")
        if (got.get("version"), got.get("fingerprint")) != (mine["version"], mine["fingerprint"]):
            raise WorkerError(
                f"worker {worker} runs flashsim {got.get('version')} (source {got.get('fingerprint')}), this process "
                f"{mine['version']} (source {mine['fingerprint']}): every worker must run the same flashsim"
            )


def _check_memory(ex, buffers: list) -> None:
    total = sum(b.nbytes for b in buffers)
    limits = {w: m for w, m in ex.memory_limits().items() if m}
    if not limits:
        return
    worker, least = min(limits.items(), key=lambda kv: kv[1])
    if MEMORY_FACTOR * total > least:
        big = sorted(buffers, key=lambda b: -b.nbytes)[:3]
        listing = ", ".join(f"{b.name} {b.nbytes / 2**20:.1f} MiB" for b in big)
        raise WorkerError(
            f"the launch's global buffers hold {total / 2**20:.1f} MiB ({listing}); a worker needs about "
            f"{MEMORY_FACTOR}x that, past the {least / 2**20:.1f} MiB memory limit of worker {worker}"
        )


def _payload(plan: LaunchPlan, buffers: list) -> Payload:
    kernel = plan.kernel
    module = kernel.module
    launch = {
        k: getattr(plan, k)
        for k in ("grid", "block", "shared_mem", "total_shared", "shape", "params", "check", "spin_limit", "per_wave")
    }
    launch["order"] = plan.order
    contraction = dict(module.contraction)
    key = hashlib.sha256(
        "\0".join([module.ptx, module.arch, repr(sorted(contraction.items())), str(module.image.base)]).encode()
    ).hexdigest()
    # a buffer of zeros (an output not written yet, as a rule) goes as its size: the worker's np.zeros costs only the
    # pages its stores touch, where the bytes would cost the transfer to every worker and a copy in every share
    shipped = [(b.name, b.base, b.writable, b.bytes if b.bytes.any() else b.nbytes) for b in buffers]
    return Payload(key, module.ptx, module.arch, contraction, module.image.base, kernel.name, launch, shipped)


def _trace_spec(trace) -> dict | None:
    if trace is None:
        return None
    return {
        "registers": trace.registers,
        "lines": trace.lines,
        "pcs": trace.wanted_pcs,
        "source_lines": trace.source_lines,
        "threads": trace.threads,
        "limit": trace.limit,
    }


def _prints(prog) -> bool:
    """Whether the kernel's code calls vprintf (its lines come in the order the blocks of a wave ran)."""
    for info in prog.functions.values():
        for ins in info.fn.body:
            callee = getattr(ins, "callee", None)
            if isinstance(callee, Sym) and callee.name == "vprintf":
                return True
    return False


def launch_distributed(plan: LaunchPlan, blocks: range, executor, *, trace=None, progress=None, communicating=None):
    """``launch(..., executor=...)``: the module docstring. Returns the merged Report."""
    if communicating not in (None, True, False):
        raise LaunchError(f"communicating must be None, True or False, got {communicating!r}")
    t0 = time.perf_counter()
    ex = resolve(executor)
    try:
        return _launch(plan, blocks, ex, trace, progress, communicating, t0)
    finally:
        ex.close()


def _launch(plan: LaunchPlan, blocks: range, ex, trace, progress, communicating, t0: float) -> Report:
    """The distributed launch on a resolved Executor (closed by the caller)."""
    kernel = plan.kernel
    prog = kernel.program
    if trace is not None:
        trace.bind(prog, plan.grid, plan.block)
    workers = ex.workers()
    _check_workers(ex, workers)
    buffers = launch_buffers(plan.arrays, prog.layout.global_image)
    _check_memory(ex, buffers)
    notes = []
    reason = "communicating=True" if communicating else (None if communicating is False else communicates(prog))
    if reason is not None:
        notes.append(f"every block ran on one worker: the blocks communicate ({reason})")
        parts = [blocks] if len(blocks) else []
    else:
        ordered = trace is not None or _prints(prog) or any(s in prog.specials for s in _CLOCKS)
        align = plan.per_wave if ordered else plan.shape.size
        parts = shares(blocks, share_size(len(blocks), len(workers), align, plan.block_threads))
    handle = ex.broadcast(_payload(plan, buffers))
    display = progress_display(progress, len(blocks), f"simulating blocks on {len(workers)} workers")
    merger = Merger({b.base: (b.bytes, b.name) for b in buffers}, plan.grid, kernel.name)
    tasks = {}
    try:
        spec = _trace_spec(trace)
        # the shares dealt round-robin over the workers: left to the scheduler, a worker that finished its first
        # share early could take them all (two shares of a small launch once ran on 1 of 2 workers)
        for i, part in enumerate(parts):
            where = workers[i % len(workers)]
            task = ex.submit(run_share, handle, part.start, part.stop, spec, reason is None, _TEST_FAULT, worker=where)
            tasks[task] = part
        results = _collect(ex, tasks, display, kernel.name, merger, t0)
    finally:
        display.close()
        ex.cancel([t for t in tasks])
        ex.release(handle)
    merger.commit()  # every share merged without a race: now the arrays
    report = Report(kernel.name, plan.grid, plan.block, trace=trace)
    for r in results:
        for op, n in r.counts.items():
            report.counts[op] = report.counts.get(op, 0) + n
        report.waves += r.waves
        report.printf += r.printf
        if trace is not None:
            trace.absorb(*r.trace)
    report.instructions = sum(report.counts.values())
    report.workers = len({r.worker for r in results})
    report.seconds = time.perf_counter() - t0
    notes.append(f"{len(results)} share(s) of blocks on {report.workers} of {len(workers)} worker(s) ({ex.name})")
    report.notes = notes
    return report


def _collect(ex, tasks: dict, display, kernel: str, merger: Merger, t0: float) -> list:
    """Every share's result in block order, its stores merged into ``merger``'s staging copies as it arrives (while
    the other shares run: the reductions and a race-free set of copies give the same bytes in any order); raises the
    error of the lowest share that failed (later shares are cancelled), or WorkerError for a share whose worker kept
    dying."""
    results, failed, died = {}, None, []
    done_blocks, instructions = 0, 0
    total = sum(len(p) for p in tasks.values())
    for task, result in ex.completed(list(tasks)):
        part = tasks[task]
        if failed is not None and part.start > failed.start:
            continue
        if isinstance(result, Died):
            died.append((result.dropped, part, result))  # the others finish or die too: the one that killed, first
            continue
        if isinstance(result, BaseException):
            raise WorkerError(f"{kernel}: blocks {part.start}..{part.stop - 1}: {type(result).__name__}: {result}")
        results[part.start] = result
        if result.error is not None:
            if failed is None or part.start < failed.start:
                failed = result
                ex.cancel([t for t, p in tasks.items() if p.start > part.start])
            if all(p.start in results for p in tasks.values() if p.start < failed.start):
                break
            continue
        if failed is not None and all(p.start in results for p in tasks.values() if p.start < failed.start):
            break
        merger.add(result.writes)
        result.writes = None
        done_blocks += len(part)
        instructions += sum(result.counts.values())
        display(done_blocks, total, time.perf_counter() - t0, instructions)
    if died:
        _, part, why = min(died, key=lambda d: (d[0], d[1].start))
        raise WorkerError(
            f"{kernel}: the worker running blocks {part.start}..{part.stop - 1} died, and so did the workers the "
            f"engine ran them on again ({why}); nothing was merged into the arrays"
        )
    if failed is not None:
        where = f"{kernel}: blocks {failed.start}..{failed.stop - 1} on worker {failed.worker}"
        raise _rebuild(failed.error, where)
    return [results[p.start] for p in sorted(tasks.values(), key=lambda p: p.start)]
