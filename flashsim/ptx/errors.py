"""Errors of flashsim.ptx: text that is not PTX, a kernel name that names no kernel, an instruction the simulator
does not implement, a launch the arguments or the arch do not allow, a kernel that never finishes, and one error per
sanitizer finding. Every runtime error names the kernel, and where it concerns threads, the block and thread, the
PTX line (and the CUDA source line where the PTX has ``.loc``)."""

from __future__ import annotations


class PTXSyntaxError(ValueError):
    """PTX text the parser does not accept. Carries ``line`` and ``column`` (1-based), the ``source_line`` and the
    bare ``reason``; its message shows all of them with a caret under the column."""

    def __init__(self, reason: str, line: int, column: int, source_line: str):
        self.reason = reason
        self.line = line
        self.column = column
        self.source_line = source_line
        shown = source_line.expandtabs(1)
        super().__init__(f"PTX line {line}, column {column}: {reason}\n    {shown}\n    {' ' * (column - 1)}^")


class UnknownKernel(ValueError, LookupError):
    """A kernel name that matches no ``.entry`` of a module, or matches several by its demangled name."""


class UnsupportedInstruction(ValueError):
    """An instruction (opcode and modifiers) the simulator does not implement for the arch: never guessed, never
    skipped. ``opcode`` is the full spelling (``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``), ``line`` its
    PTX line, ``kernel`` the entry being built, ``reason`` what is missing. Raised when a thread reaches the
    instruction; ``Kernel.program.unsupported`` lists every one of a kernel beforehand."""

    def __init__(self, opcode: str, line: int, kernel: str, reason: str):
        self.opcode, self.line, self.kernel, self.reason = opcode, line, kernel, reason
        super().__init__(f"{kernel}: PTX line {line}: {opcode}: {reason}")


class LaunchError(ValueError):
    """A launch that cannot run: wrong arguments for the entry's parameters, grid / block / shared memory past the
    arch's limits, an array too small for what a by-value struct says. Raised before anything runs."""


class SimulationError(RuntimeError):
    """A failure while the kernel runs. ``kernel``, ``block`` (x, y, z), ``thread`` (x, y, z), ``line`` (PTX),
    ``source`` ("file:line" from ``.loc``, or None) locate the first thread concerned; ``rank`` its block's rank in
    its thread-block cluster (None without a cluster launch)."""

    def __init__(self, message: str, *, kernel: str, block=None, thread=None, line=None, source=None, rank=None):
        self.kernel, self.block, self.thread, self.line, self.source = kernel, block, thread, line, source
        self.rank = rank
        where = [kernel]
        if block is not None:
            where.append(f"block {tuple(block)}" + (f" (cluster rank {rank})" if rank is not None else ""))
        if thread is not None:
            where.append(f"thread {tuple(thread)}")
        if line is not None:
            where.append(f"PTX line {line}" + (f" ({source})" if source else ""))
        super().__init__(f"{', '.join(where)}: {message}")


class Deadlock(SimulationError):
    """Every warp that has not exited waits forever: on a barrier, an mbarrier phase, another lane of its warp, or a
    spin loop that no other thread can end. The message names each waiting warp's PC and what it waits on."""


class MemoryFault(SimulationError):
    """An access outside every buffer the launch was given (raised whatever ``check`` is: the simulator never reads
    or writes outside the arrays it holds). ``address`` and ``space`` name the access."""


class MemcheckError(MemoryFault):
    """check="memcheck": an out-of-bounds or misaligned access to global, shared or local memory."""


class RaceError(SimulationError):
    """check="racecheck": two threads of a block access the same shared-memory byte, at least one of them writing,
    with no barrier or mbarrier between them."""


class InitcheckError(SimulationError):
    """check="initcheck": a read of shared or local memory that no thread wrote."""


class BlockRace(SimulationError):
    """Two blocks of one launch store the same global byte (or an atomic and a store meet there), seen where a
    launch's blocks ran apart (flashsim.ptx.distributed): nothing orders blocks on a GPU, so the byte's value
    depends on which ran last. Names both blocks, the array and the byte's offset in it."""


class WorkerError(RuntimeError):
    """A distributed launch that could not run on its executor: the engine cannot be reached, a worker lacks
    flashsim or runs another version of it, a worker died running blocks more often than the engine retries, the
    arrays do not fit a worker. Nothing of a failed launch is merged into the arrays."""
