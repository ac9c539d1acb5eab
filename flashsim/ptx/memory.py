"""The simulated GPU's memory: global buffers at synthetic device addresses, a block's shared memory, a thread's local
memory and parameter frames, the kernel's parameters and the constant bank, with vectorised loads and stores that
never touch anything outside the arrays they hold.

Global memory is made of numpy arrays. ``address(array)`` gives an array a device address (its root buffer gets one
the first time, 256-byte aligned, with an unmapped gap after it, as cudaMalloc's would be; a view's address is its
root's plus its offset), so that a by-value struct can carry pointers; every array passed to a launch, and every
array given an address that is still alive, is memory the kernel may read and write, in place. An access that falls
outside all of them (or straddles the end of one) is a MemoryFault, whatever ``check`` is; a misaligned access is one
too (the GPU faults on it).

The generic address space (``cvta``, and loads without a state space): the windows of flashsim.ptx.program.SPACE_BASE
for shared, local, const and param memory, global addresses below them. The shared window holds shared::cluster
addresses (flashsim.ptx.program.CLUSTER_RANK_SHIFT): an offset in the CTA's own shared memory, or in another CTA of
its cluster (a row of ``Memory.shared``: the blocks of a wave are whole clusters, rank fastest).
"""

from __future__ import annotations

import weakref

import numpy as np

from .errors import MemcheckError, MemoryFault
from .ir import Function, Var
from .program import CLUSTER_OFFSET_MASK, CLUSTER_RANK_SHIFT, FUNCTION_BASE, SPACE_BASE, var_align

__all__ = ["address", "ModuleImage", "Layout", "Memory", "Buffer", "launch_buffers", "GLOBAL_BASE"]

GLOBAL_BASE = 0x0000_7000_0000_0000
_GAP = 1 << 16  # unmapped bytes after each buffer: an access just past its end falls in no buffer
_ALIGN = 256

_REGISTRY: dict[int, tuple] = {}  # id(root) -> (weakref to root, address)
_NEXT = [GLOBAL_BASE]


def _root(array: np.ndarray) -> np.ndarray:
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root


def _data(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _register(root: np.ndarray) -> int:
    entry = _REGISTRY.get(id(root))
    if entry is not None and entry[0]() is root:
        return entry[1]
    base = _NEXT[0]
    _NEXT[0] = base + (-(-max(root.nbytes, 1) // _ALIGN) * _ALIGN) + _GAP

    key = id(root)

    def forget(ref):  # only this array's entry: its id may already name a newer array
        if _REGISTRY.get(key, (None,))[0] is ref:
            del _REGISTRY[key]

    _REGISTRY[key] = (weakref.ref(root, forget), base)
    return base


def address(array: np.ndarray) -> int:
    """The device address of ``array`` (a numpy array) in the simulated GPU's global memory: for a by-value struct
    parameter that carries pointers. Stable while the array's buffer is alive; the buffer is then memory every launch
    may access."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"address() takes a numpy array, got {type(array).__name__}")
    root = _root(array)
    return _register(root) + (_data(array) - _data(root))


class Buffer:
    """One global buffer of a launch: ``bytes`` (a flat uint8 view of its root array), ``base`` (its device address),
    ``name`` (for errors), ``writable``. By default the root's own address and bytes, written in place; a worker of
    a distributed launch (flashsim.ptx.distributed) gives the driver's ``base``, ``name`` and ``writable`` for a
    received copy of the driver's array, with ``private=False``: the first store copies the bytes (``own``), so the
    received array, shared by the worker's shares, stays as the driver sent it."""

    __slots__ = ("base", "nbytes", "bytes", "name", "writable", "private")

    def __init__(self, root: np.ndarray, name: str, *, base=None, writable=None, private: bool = True):
        self.base = _register(root) if base is None else int(base)
        self.nbytes = root.nbytes
        self.bytes = root.reshape(-1).view(np.uint8) if root.flags.c_contiguous else None
        if self.bytes is None:
            raise ValueError(f"{name}: a global buffer must be C-contiguous")
        self.name = name
        self.writable = root.flags.writeable if writable is None else bool(writable)
        self.private = private

    def own(self) -> None:
        """Make ``bytes`` this buffer's own copy before a store (a no-op where it is already)."""
        if not self.private:
            self.bytes = self.bytes.copy()
            self.private = True


def launch_buffers(arrays, image=None) -> list:
    """The global buffers a launch reaches, sorted by address: ``arrays`` (the launch's array arguments, named
    "argument i") and every array with an address that is still alive (``image``: the module's .global variables,
    named so)."""
    roots = {}
    for i, a in enumerate(arrays):
        root = _root(a)
        roots.setdefault(id(root), (root, f"argument {i}"))
    # dict.copy, not list(items()): a collected array's weakref callback may pop an entry mid-iteration
    for key, (ref, _addr) in _REGISTRY.copy().items():
        root = ref()
        if root is not None and key not in roots:
            name = "the module's .global variables" if root is image else "an array with an address"
            roots[key] = (root, name)
    return sorted((Buffer(r, n) for r, n in roots.values()), key=lambda b: b.base)


def _align_up(x: int, a: int) -> int:
    return -(-x // a) * a


class ModuleImage:
    """A module's own memory, shared by its kernels: the .global variables in the global image (an array with a
    device address, initialised from the PTX, relocations applied), the .const variables in the constant bank, and
    the functions' addresses (for function pointers)."""

    def __init__(self, module, base: int | None = None):
        self.module = module
        self.globals: dict[str, int] = {}
        offset = 0
        placed = []
        for var in module.vars.values():
            if var.space == ".global":
                offset = _align_up(offset, var_align(var))
                placed.append((var, offset))
                offset += var.size or 0
        self.global_image = np.zeros(max(offset, 1), np.uint8)
        # ``base``: the address the driver's copy of this module has (a worker of a distributed launch builds the
        # same image at the same address, so that every address the kernel computes is the driver's); unregistered
        if base is None:
            base = address(self.global_image)
        self.base = base
        for var, off in placed:
            self.globals[var.name] = base + off
        self.const: dict[str, int] = {}
        offset = 0
        const_vars = []
        for var in module.vars.values():
            if var.space == ".const":
                offset = _align_up(offset, var_align(var))
                self.const[var.name] = offset
                const_vars.append((var, offset))
                offset += var.size or 0
        self.const_image = np.zeros(max(offset, 1), np.uint8)
        self._fill(placed, self.global_image, base)
        self._fill(const_vars, self.const_image, SPACE_BASE[".const"])
        self.functions = {name: FUNCTION_BASE + 16 * i for i, name in enumerate(module.functions)}

    def _fill(self, placed, image, base) -> None:
        for var, off in placed:
            if var.init is not None:
                image[off : off + len(var.init)] = np.frombuffer(var.init, np.uint8)
            for r in var.relocs:
                target = self._reloc_target(r.symbol, r.generic) + r.addend
                raw = int(target).to_bytes(8, "little")[r.byte : r.byte + r.width]
                image[off + r.offset : off + r.offset + r.width] = np.frombuffer(raw, np.uint8)

    def _reloc_target(self, name: str, generic: bool) -> int:
        if name in self.globals:
            return self.globals[name]
        if name in self.const:
            return self.const[name] + (SPACE_BASE[".const"] if generic else 0)
        if name in self.module.functions:
            return FUNCTION_BASE + 16 * list(self.module.functions).index(name)
        raise ValueError(f"relocation to {name!r}: not a .global / .const variable or a function")


class Layout:
    """Where every symbol of a kernel's program lives: the module's image (ModuleImage) for .global and .const
    variables and functions; the kernel's parameters in its parameter space, function parameters and call sequences'
    .param variables in a per-thread parameter frame, .shared variables (static, then the dynamic ``extern .shared``
    at the end) in the block's shared memory, .local variables in the thread's local frame (``bind``, once the
    program has placed its functions)."""

    def __init__(self, image: ModuleImage):
        self.image = image
        self.module = image.module
        self.globals, self.const, self.functions = image.globals, image.const, image.functions
        self.global_image, self.const_image = image.global_image, image.const_image

    def bind(self, prog) -> None:
        """Lay out the kernel's parameters and the frames of ``prog``'s reachable functions."""
        self.prog = prog
        kernel = prog.kernel_fn
        self.params: dict[str, tuple] = {}
        offset = 0
        for p in kernel.params:
            a = max(p.align or 1, min(p.size, 8) if p.count == 1 else (p.align or 1))
            offset = _align_up(offset, a)
            self.params[p.name] = (offset, p.size, p)
            offset += p.size
        self.param_size = offset
        # per-thread frame: every function's params and returns, every call sequence's .param variables
        self.frame: dict[tuple[str, str], int] = {}
        offset = 0
        for info in prog.functions.values():
            fn = info.fn
            items = [] if fn.entry else [(p.name, p.size, p.align or 8) for p in (*fn.params, *fn.returns)]
            items += [(v.name, v.size or 0, var_align(v)) for v in fn.vars.values() if v.space == ".param"]
            for name, size, align in items:
                offset = _align_up(offset, max(align, 1))
                self.frame[(fn.name, name)] = offset
                offset += size
        self.frame_size = offset
        # shared memory: module-scope .shared, then each reachable function's, then the dynamic extern array
        self.shared: dict[tuple[str | None, str], int] = {}
        offset = 0
        dynamic, dyn_align = [], 16
        shared_vars = [(None, v) for v in self.module.vars.values() if v.space == ".shared"]
        for info in prog.functions.values():
            shared_vars += [(info.name, v) for v in info.fn.vars.values() if v.space == ".shared"]
        for owner, v in shared_vars:
            if v.count is None:
                dynamic.append((owner, v))
                dyn_align = max(dyn_align, v.align or 1)
                continue
            offset = _align_up(offset, var_align(v))
            self.shared[(owner, v.name)] = offset
            offset += v.size
        self.static_shared = offset
        self.dynamic_offset = _align_up(offset, dyn_align)
        for owner, v in dynamic:
            self.shared[(owner, v.name)] = self.dynamic_offset
        self.local: dict[tuple[str, str], int] = {}
        offset = 0
        for info in prog.functions.values():
            for v in info.fn.vars.values():
                if v.space == ".local":
                    offset = _align_up(offset, var_align(v))
                    self.local[(info.name, v.name)] = offset
                    offset += v.size or 0
        self.local_size = offset

    def symbol(self, prog, fn: Function, name: str) -> tuple[str, int]:
        """(space, address in that space) of symbol ``name`` as ``fn`` sees it."""
        if name in fn.vars:
            v: Var = fn.vars[name]
            if v.space == ".shared":
                return ".shared", self.shared[(fn.name, name)]
            if v.space == ".local":
                return ".local", self.local[(fn.name, name)]
            if v.space == ".param":
                return ".frame", self.frame[(fn.name, name)]
        if fn.entry and name in self.params:
            return ".param", self.params[name][0]
        if (fn.name, name) in self.frame:
            return ".frame", self.frame[(fn.name, name)]
        if name in self.globals:
            return ".global", self.globals[name]
        if name in self.const:
            return ".const", self.const[name]
        if (None, name) in self.shared:
            return ".shared", self.shared[(None, name)]
        if name in self.functions:
            return ".function", self.functions[name]
        raise ValueError(f"{fn.name}: unknown symbol {name!r}")


class Memory:
    """The memory of one launch (one wave of blocks): ``global`` buffers (the launch's arrays, every array with an
        address, the module's global image), ``shared`` (blocks x bytes), ``local`` and ``frame`` (threads x bytes),
        ``params`` (the kernel's parameter bytes) and ``const`` (the constant bank). ``load`` / ``store`` take the
        addresses of the lanes that access (uint64, one per lane), the thread index of each lane and the access width;
        an access out of every buffer raises MemoryFault (MemcheckError with check="memcheck") located by ``locate`` and
    naming the address, the space and the buffer (the launch argument and how far past its end, or no buffer).
    ``hook``: None, or a sanitizer (flashsim.ptx.sanitize) that sees every access once its addresses are resolved and in
    bounds: ``hook.access(space, addresses in the space, width, threads, write, atomic, pc, blocks)``, ``blocks`` the
    wave block whose shared memory each lane reaches (None: each thread's own; a shared::cluster access gives them,
    with ".shared" and the offsets in those blocks); None costs one test per load / store, nothing per lane."""

    def __init__(
        self,
        layout: Layout,
        arrays,
        param_bytes: bytes,
        n_blocks: int,
        block_threads: int,
        shared_bytes: int,
        check,
        locate,
        cluster_size: int = 1,
        buffers=None,
    ):
        self.layout = layout
        self.cluster_size = cluster_size  # CTAs per cluster: wave block b is rank b % cluster_size of its cluster
        self.buffers = launch_buffers(arrays, layout.global_image) if buffers is None else buffers
        self.bases = np.array([b.base for b in self.buffers], np.uint64)
        self.ends = np.array([b.base + b.nbytes for b in self.buffers], np.uint64)
        # rows padded to 16 bytes, so that every naturally aligned access is aligned in the flat array too
        self.shared = np.zeros((n_blocks, _align_up(max(shared_bytes, 1), 16)), np.uint8)
        self.shared_bytes = shared_bytes
        threads = n_blocks * block_threads
        self.local = np.zeros((threads, _align_up(max(layout.local_size, 1), 16)), np.uint8)
        self.frame = np.zeros((threads, _align_up(max(layout.frame_size, 1), 16)), np.uint8)
        self.params = np.zeros(_align_up(max(len(param_bytes), 1), 16), np.uint8)
        self.params[: len(param_bytes)] = np.frombuffer(bytes(param_bytes), np.uint8)
        self.const = np.zeros(_align_up(layout.const_image.size, 16), np.uint8)
        self.const[: layout.const_image.size] = layout.const_image
        self.block_threads = block_threads
        self.fault = MemcheckError if check == "memcheck" else MemoryFault
        self.locate = locate
        self.hook = None
        self.writes = None  # a flashsim.ptx.writes.WriteLog that sees every global store once it is done, or None

    # -- address resolution -----------------------------------------------------------------------------

    def _error(self, lanes, threads, addr, what: str, space: str = ".global", where: str = ""):
        t = int(threads[lanes[0]])
        a = int(addr[lanes[0]])
        shown = f"address {a:#x}" if space in (".global", ".shared::cluster") else f"{space[1:]} offset {a:#x}"
        err = self.fault(f"{what} at {shown}{where or self._whereabouts(space, a)}", **self.locate(t))
        err.address, err.space = a, space
        raise err

    def _whereabouts(self, space: str, a: int) -> str:
        """Which buffer a faulting global address belongs to, or is just past: ``(argument 2, 4096 bytes: the
        access starts at its end)``, ``(no buffer)``."""
        if space != ".global":
            return ""
        i = int(np.searchsorted(self.bases, np.uint64(a), side="right")) - 1
        if i < 0 or a >= int(self.ends[i]) + _GAP:
            return " (no buffer)"
        b = self.buffers[i]
        if a < int(self.ends[i]):
            return f" ({b.name}, {b.nbytes} bytes: offset {a - b.base})"
        past = a - int(self.ends[i])
        return f" ({b.name}, {b.nbytes} bytes: the access starts {f'{past} bytes past' if past else 'at'} its end)"

    def _check_align(self, addr, width, threads, space):
        if width > 1:
            bad = np.flatnonzero(addr % np.uint64(min(width, 16)))
            if bad.size:
                self._error(bad, threads, addr, f"misaligned {width}-byte {space[1:]} access", space)

    def _one_buffer(self, addr, width: int) -> int | None:
        """The index of the one buffer holding every byte of these accesses when one does (the lowest and the highest
        address fall in it: buffers do not overlap), else None: the common case decided from two addresses instead of
        a search per lane (a tensor copy's box, a warp's row)."""
        if not addr.size or not self.buffers:
            return None
        lo, hi = addr.min(), addr.max()
        i = int(np.searchsorted(self.bases, lo, side="right")) - 1
        if i < 0 or int(hi) + width > int(self.ends[i]):
            return None
        return i

    def _global_rows(self, addr, width, threads, write: bool):
        """(buffer index per lane, byte offset per lane) of global accesses, every byte inside one buffer."""
        idx = np.searchsorted(self.bases, addr, side="right").astype(np.int64) - 1
        inside = idx >= 0
        safe = np.where(inside, idx, 0)
        end_ok = addr + np.uint64(width) <= self.ends[safe]
        bad = np.flatnonzero(~(inside & end_ok))
        if bad.size:
            k, a = int(bad[0]), int(addr[bad[0]])
            what = f"{width}-byte global {'store' if write else 'load'} outside every buffer"
            if inside[k] and a < int(self.ends[safe[k]]):  # starts inside, ends past the end
                b = self.buffers[int(safe[k])]
                end = a + width - int(self.ends[safe[k]])
                self._error(bad, threads, addr, what, where=f" ({b.name}, {b.nbytes} bytes: ends {end} bytes past it)")
            self._error(bad, threads, addr, what)
        if write:
            for i in np.unique(safe):
                if not self.buffers[i].writable:
                    lanes = np.flatnonzero(safe == i)
                    self._error(lanes, threads, addr, f"store into a read-only array ({self.buffers[i].name})")
                self.buffers[i].own()
        return safe, (addr - self.bases[safe]).astype(np.int64)

    def _rows(self, space: str, addr, width: int, threads, write: bool):
        """[(flat uint8 array, byte offsets, lane indices)] for accesses of ``width`` bytes in ``space``."""
        if space == ".global":
            self._check_align(addr, width, threads, ".global")
            one = self._one_buffer(addr, width)
            if one is not None and (not write or self.buffers[one].writable):
                if write:
                    self.buffers[one].own()
                return [(self.buffers[one].bytes, (addr - self.bases[one]).astype(np.int64), None)]
            buf, off = self._global_rows(addr, width, threads, write)
            if buf.size and (buf == buf[0]).all():
                return [(self.buffers[int(buf[0])].bytes, off, None)]
            return [(self.buffers[int(i)].bytes, off[buf == i], np.flatnonzero(buf == i)) for i in np.unique(buf)]
        if space == ".shared::cluster":
            row, off = self.cluster_rows(addr, width, threads, write)
            flat = self.shared.reshape(-1)
            return [(flat, row * self.shared.shape[1] + off, None)]
        if space == ".shared":
            limit, arr, row = self.shared_bytes, self.shared, threads // self.block_threads
        elif space == ".local":
            limit, arr, row = self.layout.local_size, self.local, threads
        elif space == ".frame":
            limit, arr, row = self.layout.frame_size, self.frame, threads
        elif space == ".param":
            if write:
                raise self.fault("store to the kernel's parameter space", **self.locate(int(threads[0])))
            limit, arr, row = self.layout.param_size, self.params[None, :], np.zeros_like(threads)
        elif space == ".const":
            if write:
                raise self.fault("store to the constant bank", **self.locate(int(threads[0])))
            limit, arr, row = self.const.size, self.const[None, :], np.zeros_like(threads)
        else:
            raise ValueError(f"unknown state space {space}")
        self._check_align(addr, width, threads, space)
        bad = np.flatnonzero(addr + np.uint64(width) > np.uint64(limit))
        if bad.size:
            what = f"{width}-byte {space[1:]} {'store' if write else 'load'} past its {self._extent(space, limit)}"
            self._error(bad, threads, addr, what, space)
        flat = arr.reshape(-1)
        off = row.astype(np.int64) * arr.shape[1] + addr.astype(np.int64)
        return [(flat, off, None)]

    def cluster_rows(self, addr, width: int, threads, write: bool = False):
        """(wave block, byte offset) of each lane's shared::cluster address (flashsim.ptx.program.CLUSTER_RANK_SHIFT:
        below 2^24 the thread's own CTA, else CTA rank ``(addr >> 24) - 1`` of its cluster), int64 each; a rank past
        the cluster, a misaligned access or one past the CTA's shared bytes is a fault naming the CTA rank and
        offset."""
        addr = np.asarray(addr, np.uint64)
        own = np.asarray(threads) // self.block_threads
        hi = (addr >> np.uint64(CLUSTER_RANK_SHIFT)).astype(np.int64)
        off = (addr & np.uint64(CLUSTER_OFFSET_MASK)).astype(np.int64)
        cs = self.cluster_size
        if not hi.any():
            row = own.astype(np.int64)
        else:
            bad = np.flatnonzero(hi > cs)
            if bad.size:
                self._error(
                    bad,
                    threads,
                    addr,
                    f"shared::cluster address names CTA rank {int(hi[bad[0]]) - 1}, past the cluster's {cs} "
                    f"CTA{'s' if cs > 1 else ''}",
                    ".shared::cluster",
                )
            row = np.where(hi == 0, own, own - own % cs + hi - 1).astype(np.int64)
        if width > 1:
            bad = np.flatnonzero(off % min(width, 16))
            if bad.size:
                self._cluster_error(bad, threads, row, off, f"misaligned {width}-byte shared::cluster access")
        bad = np.flatnonzero(off + width > self.shared_bytes)
        if bad.size:
            what = f"{width}-byte shared::cluster {'store' if write else 'load'} past its "
            self._cluster_error(bad, threads, row, off, what + self._extent(".shared", self.shared_bytes))
        return row, off

    def _cluster_error(self, lanes, threads, row, off, what: str):
        k = int(lanes[0])
        t = int(threads[k])
        rank, o = int(row[k]) % self.cluster_size, int(off[k])
        err = self.fault(f"{what} at shared offset {o:#x} of CTA rank {rank} of the cluster", **self.locate(t))
        err.address, err.space, err.target_rank = o, ".shared::cluster", rank
        raise err

    def _extent(self, space: str, limit: int) -> str:
        if space == ".shared":
            dyn = limit - self.layout.dynamic_offset if limit > self.layout.static_shared else 0
            return f"{limit} bytes ({self.layout.static_shared} static, {max(dyn, 0)} dynamic)"
        return f"{limit} bytes"

    def classify(self, generic):
        """The state space of each generic address (a numpy array of str codes would be slow: a list of (space,
        lane indices, address in the space) for the spaces present)."""
        out = []
        rest = np.ones(generic.shape, bool)
        for space, base in SPACE_BASE.items():
            inside = (generic >= np.uint64(base)) & (generic < np.uint64(base + (1 << 32)))
            if inside.any():
                lanes = np.flatnonzero(inside)
                # the shared window holds shared::cluster addresses (the CTA's own below 2^24)
                named = ".shared::cluster" if space == ".shared" else space
                out.append((named, lanes, generic[lanes] - np.uint64(base)))
                rest &= ~inside
        if rest.any():
            lanes = np.flatnonzero(rest) if len(out) else None
            out.append((".global", lanes, generic if lanes is None else generic[lanes]))
        return out

    # -- loads and stores -------------------------------------------------------------------------------

    def load(self, space: str | None, addr, width: int, threads, *, atomic: bool = False) -> np.ndarray:
        """The ``width`` bytes at each lane's address, as an (n, width) uint8 array; ``space`` None: generic.
        ``atomic``: the read of an atomic read-modify-write (for the sanitizers)."""
        addr = np.asarray(addr, np.uint64)
        threads = np.asarray(threads)
        out = np.empty((addr.size, width), np.uint8)
        parts = [(space, None, addr)] if space is not None else self.classify(addr)
        for sp, lanes, a in parts:
            th = threads if lanes is None else threads[lanes]
            for flat, off, sub in self._rows(sp, a, width, th, write=False):
                got = _gather(flat, off, width)
                if lanes is None and sub is None:
                    out[...] = got
                else:
                    dest = lanes if sub is None else (sub if lanes is None else lanes[sub])
                    out[dest] = got
            if self.hook is not None:
                self._notify(sp, a, width, th, False, atomic, None)
        return out

    def store(self, space: str | None, addr, data: np.ndarray, threads, *, atomic: bool = False, pc=None) -> None:
        """Write ``data`` ((n, width) uint8) at each lane's address; lanes in order, the last lane to write a byte
        wins (as one of them does on a GPU: which one is undefined there). ``atomic``: the write of an atomic;
        ``pc``: the instruction the write belongs to when it is not the one running (a cp.async completing)."""
        addr = np.asarray(addr, np.uint64)
        threads = np.asarray(threads)
        width = data.shape[1]
        parts = [(space, None, addr)] if space is not None else self.classify(addr)
        for sp, lanes, a in parts:
            th = threads if lanes is None else threads[lanes]
            d = data if lanes is None else data[lanes]
            for flat, off, sub in self._rows(sp, a, width, th, write=True):
                _scatter(flat, off if sub is None else off, d if sub is None else d[sub], width)
            if self.writes is not None and sp == ".global":
                self.writes.record(self, a, width, th, atomic, pc)
            if self.hook is not None:
                self._notify(sp, a, width, th, True, atomic, pc)

    def _notify(self, space, addr, width, threads, write, atomic, pc) -> None:
        """Tell the sanitizer of an access (in bounds: checked first); a shared::cluster one as ".shared" offsets in
        the blocks it reaches."""
        if space == ".shared::cluster":
            rows, off = self.cluster_rows(addr, width, threads, write)
            self.hook.access(".shared", off.astype(np.uint64), width, threads, write, atomic, pc, rows)
        else:
            self.hook.access(space, addr, width, threads, write, atomic, pc, None)


def _unit(width: int, size: int) -> int:
    """The widest integer (8, 4, 2 or 1 bytes) that divides the access width and the array's size."""
    for u in (8, 4, 2, 1):
        if width % u == 0 and size % u == 0:
            return u
    return 1


def _typed(flat: np.ndarray, off: np.ndarray, width: int):
    """(``flat`` viewed in units of u bytes, u): 16-byte units (numpy's void type: one index per 16 bytes, a fifth of
    the cost of two 8-byte ones) where the accesses are whole 16-byte units at 16-byte offsets of it, else
    ``_unit``'s integers."""
    if width % 16 == 0 and flat.size % 16 == 0 and not (off % 16).any():
        return flat.view("V16"), 16
    u = _unit(width, flat.size)
    return flat.view(np.dtype(f"u{u}")), u


def _gather(flat: np.ndarray, off: np.ndarray, width: int) -> np.ndarray:
    """The (n, width) bytes at ``off`` (aligned to the access: checked by the caller) of ``flat``."""
    typed, u = _typed(flat, off, width)
    k = width // u
    idx = off // u if k == 1 else (off // u)[:, None] + np.arange(k)
    return typed[idx].view(np.uint8).reshape(-1, width)


def _scatter(flat: np.ndarray, off: np.ndarray, data: np.ndarray, width: int) -> None:
    typed, u = _typed(flat, off, width)
    k = width // u
    idx = off // u if k == 1 else (off // u)[:, None] + np.arange(k)
    typed[idx] = np.ascontiguousarray(data).view(typed.dtype).reshape(idx.shape)
