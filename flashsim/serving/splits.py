"""How many parts split-KV cuts each row's keys into, and which KV tiles a part covers.

``num_splits=None`` asks ``choose_splits``, which follows FlashAttention-2's heuristic (flash_api.cpp,
num_splits_heuristic; re-derived here from its description, not copied): with ``blocks`` thread blocks of one split
and ``slots`` blocks the GPU holds at once, s splits fill ``n = blocks * s / slots`` waves, at efficiency
``n / ceil(n)``; take the smallest s whose efficiency is at least 85% of the best one's (s from 1 to
min(max_splits, slots, key tiles), skipping an s that gives as many tiles per split as s - 1 does), and no split at
all when one split's blocks already fill 80% of the slots. FlashAttention-2 counts slots as twice the SMs (its
128-thread blocks); the kernel here has its own block shapes, so slots are the SMs times the blocks of this
configuration one SM holds (``resident_blocks``: the shared-memory and warp limits, with registers at the 255 a
thread may use under the kernel's __launch_bounds__, so that the count does not depend on a ptxas run and the
emulator and the GPU count alike). The SMs are the device's on the GPU and flashsim.arch's ``sm_count`` in the
emulator: the same on the reference GPU (132 on the H200); pass num_splits to compare bits on another.

A split's tiles: the row's ceil(nk / kv_tile) KV tiles in num_splits runs of ceil(tiles / num_splits), the last ones
shorter or empty; a block visits the intersection with its own causal / window range (kernel/flash_fwd.cu, SPLIT).
"""

from __future__ import annotations

import math

import numpy as np

from ..arch import get_arch
from ..config import KernelConfig
from ..constants import MAX_SPLITS  # FlashAttention-2's bound; the partial outputs grow with it
from ..resources.occupancy import occupancy

FILL_NO_SPLIT = 0.8  # one split's blocks fill this much of the slots: no split
EFFICIENCY_KEPT = 0.85  # the smallest split count within this share of the best efficiency


def resident_blocks(config: KernelConfig, arch) -> int:
    """Blocks of ``config`` one SM of ``arch`` holds (cuda_occupancy.h's rules; registers at the 255 a thread may use
    under __launch_bounds__(threads, 1), so no build is needed and every host counts alike)."""
    a = get_arch(arch)
    return max(1, occupancy(a.name, config.threads, a.regs_per_thread_max, config.smem_bytes).blocks_per_sm)


def split_heuristic(blocks: int, slots: int, key_tiles: int, max_splits: int = MAX_SPLITS) -> int:
    """The split count for ``blocks`` blocks per split, ``slots`` resident blocks and ``key_tiles`` KV tiles per row
    (module docstring)."""
    if blocks >= FILL_NO_SPLIT * slots:
        return 1
    top = min(max_splits, slots, max(key_tiles, 1))

    def eligible(s):
        return s == 1 or math.ceil(key_tiles / s) != math.ceil(key_tiles / (s - 1))

    def efficiency(s):
        waves = blocks * s / slots
        return waves / math.ceil(waves)

    effs = {s: efficiency(s) for s in range(1, top + 1) if eligible(s)}
    best = max(effs.values())
    return next(s for s, e in effs.items() if e >= EFFICIENCY_KEPT * best)


def sm_count_of(arch, sm_count: int | None = None) -> int:
    """``sm_count``, or where it is None the SMs of ``arch``'s reference GPU (flashsim.arch): the GPU the split
    choices are made for."""
    return get_arch(arch).sm_count if sm_count is None else int(sm_count)


def resident_slots(config: KernelConfig, arch, sm_count: int | None = None) -> int:
    """Blocks of ``config`` the GPU holds at once: sm_count_of's SMs times resident_blocks."""
    return sm_count_of(arch, sm_count) * resident_blocks(config, arch)


def choose_splits(config: KernelConfig, arch, blocks: int, key_tiles: int, sm_count: int | None = None) -> int:
    """num_splits for ``blocks`` blocks of ``config`` per split and rows of ``key_tiles`` KV tiles on ``arch`` with
    ``sm_count`` SMs (default: the arch's reference GPU, flashsim.arch)."""
    return split_heuristic(blocks, resident_slots(config, arch, sm_count), key_tiles)


def split_tiles(key_tiles, num_splits: int, split):
    """[first, end) of the KV tiles split ``split`` covers in a row of ``key_tiles`` tiles (ints or numpy arrays,
    broadcast): runs of ceil(key_tiles / num_splits), the last ones shorter or empty."""
    per = -(-np.asarray(key_tiles) // num_splits)
    first = np.asarray(split) * per
    return first, np.minimum(first + per, key_tiles)
