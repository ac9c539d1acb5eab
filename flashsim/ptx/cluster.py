"""Thread-block clusters (sm_90+): the shape of a launch's clusters, the order its blocks run in, the cluster special
registers, and the blocks of a cluster that a CTA mask names.

A cluster is a box of ``dims`` = (x, y, z) blocks of the grid (each dimension divides the grid's); its blocks are
co-resident on a GPU, and here by construction: a launch runs its blocks in waves made of whole clusters, in the
launch order of ``launch_order`` (clusters in the order of their linear index, x fastest; within one, the blocks by
rank), so wave block ``b`` is rank ``b % size`` of the cluster of wave blocks ``b - b % size ..``. A cluster whose
blocks hold more threads than a wave's ``max_threads`` is still one wave. Without a cluster launch every block is
its own implicit 1x1x1 cluster, as the PTX ISA describes (rank 0 of 1, %clusterid = %ctaid,
%is_explicit_cluster false).

Limits (CUDA C++ Programming Guide, "Thread Block Clusters"; cudaFuncAttributeNonPortableClusterSizeAllowed): at
most 8 blocks per cluster (the portable size); 16 where the launch opts in to non-portable sizes
(``nonportable_cluster=True``), which the H100 / H200 (sm_90) and B200 (sm_100) allow; sm_90 and later only, for
the arch the module is loaded for and the PTX's own ``.target``. A kernel's ``.reqnctapercluster`` fixes the
shape (a launch's ``cluster=`` must agree), ``.explicitcluster`` requires a cluster launch, ``.maxclusterrank``
bounds the blocks per cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import LaunchError

__all__ = ["Cluster", "resolve", "launch_order", "special_values", "cluster_blocks", "rank_of", "PORTABLE", "MAXIMUM"]

PORTABLE = 8  # blocks per cluster every sm_90+ GPU runs
MAXIMUM = 16  # with the non-portable opt-in, on the archs of NONPORTABLE_ARCHS
NONPORTABLE_ARCHS = ("sm_90", "sm_100")


@dataclass(frozen=True)
class Cluster:
    """A launch's cluster shape: ``dims`` (x, y, z) blocks, ``explicit`` whether the launch (or the kernel's
    ``.reqnctapercluster``) asked for clusters (%is_explicit_cluster)."""

    dims: tuple = (1, 1, 1)
    explicit: bool = False

    @property
    def size(self) -> int:
        return self.dims[0] * self.dims[1] * self.dims[2]


def _sm(target: str) -> int:
    digits = "".join(c for c in target.split("_", 1)[-1] if c.isdigit())
    return int(digits) if digits else 0


def resolve(kernel, grid: tuple, cluster, arch: str, nonportable: bool = False) -> Cluster:
    """The Cluster of a launch of ``kernel`` on ``grid`` with ``cluster`` (None or 3 positive ints, as launch parses
    them), checked against the kernel's cluster directives, the grid and the arch (LaunchError naming the rule)."""
    fn = kernel.fn
    name = kernel.name
    req = fn.directive(".reqnctapercluster")
    want = None if req is None else tuple(int(x) for x in req.args) + (1,) * (3 - len(req.args))
    if cluster is not None:
        dims = tuple(cluster)
        if want is not None and dims != want:
            raise LaunchError(f"{name} declares .reqnctapercluster {', '.join(map(str, req.args))}; cluster is {dims}")
    elif want is not None:
        dims = want
    else:
        if fn.directive(".explicitcluster") is not None:
            raise LaunchError(f"{name} declares .explicitcluster: launch it with cluster=(x, y, z)")
        return Cluster()
    shape = Cluster(dims, True)
    target = kernel.module.ir.target or ""
    for what, sm in ((f"the module's arch {arch}", _sm(arch)), (f"the PTX's .target {target}", _sm(target))):
        if sm and sm < 90:
            raise LaunchError(f"{name}: thread-block clusters need sm_90 or later, and {what} is older")
    for axis, g, c in zip("xyz", grid, dims):
        if g % c:
            raise LaunchError(
                f"cluster {dims} does not divide grid {tuple(grid)}: grid.{axis} = {g} is not a multiple of {c}"
            )
    limit = PORTABLE
    if nonportable:
        if arch not in NONPORTABLE_ARCHS:
            raise LaunchError(
                f"non-portable cluster sizes (up to {MAXIMUM} blocks) exist on "
                f"{', '.join(NONPORTABLE_ARCHS)}, not {arch}"
            )
        limit = MAXIMUM
    if shape.size > limit:
        raise LaunchError(
            f"cluster {dims} has {shape.size} blocks, past the {'non-portable' if nonportable else 'portable'} limit "
            f"of {limit}" + ("" if nonportable else f" (nonportable_cluster=True allows {MAXIMUM} on sm_90)")
        )
    cap = fn.directive(".maxclusterrank")
    if cap is not None and shape.size > int(cap.args[0]):
        raise LaunchError(f"{name} declares .maxclusterrank {cap.args[0]}; cluster {dims} has {shape.size} blocks")
    return shape


def launch_order(grid: tuple, cluster: Cluster) -> np.ndarray | None:
    """The linear block indices (x fastest) in the order the launch runs them: cluster by cluster, rank fastest
    within one; None when that is the linear order itself (clusters that span only x, or none)."""
    cx, cy, cz = cluster.dims
    if cy == 1 and cz == 1:
        return None  # rank = x % cx: consecutive linear indices already
    gx, gy, gz = grid
    nx, ny, nz = gx // cx, gy // cy, gz // cz
    c = np.arange(nx * ny * nz)
    r = np.arange(cluster.size)
    ix = (c % nx)[:, None] * cx + (r % cx)[None, :]
    iy = ((c // nx) % ny)[:, None] * cy + ((r // cx) % cy)[None, :]
    iz = (c // (nx * ny))[:, None] * cz + (r // (cx * cy))[None, :]
    return (ix + gx * (iy + gy * iz)).reshape(-1)


def special_values(cluster: Cluster, grid: tuple, ctaid: tuple) -> dict:
    """The cluster special registers of threads whose blocks have ``ctaid`` (x, y, z arrays)."""
    dims = cluster.dims
    n = np.asarray(ctaid[0]).shape
    out = {}
    for k, axis in enumerate("xyz"):
        out[f"%cluster_ctaid.{axis}"] = ctaid[k] % dims[k]
        out[f"%clusterid.{axis}"] = ctaid[k] // dims[k]
        out[f"%cluster_nctaid.{axis}"] = dims[k]
        out[f"%nclusterid.{axis}"] = grid[k] // dims[k]
    cx, cy = dims[0], dims[1]
    out["%cluster_ctarank"] = out["%cluster_ctaid.x"] + cx * (out["%cluster_ctaid.y"] + cy * out["%cluster_ctaid.z"])
    out["%cluster_nctarank"] = cluster.size
    out["%is_explicit_cluster"] = np.full(n, cluster.explicit)
    return out


def rank_of(machine, blocks) -> np.ndarray:
    """The cluster rank of each wave block of ``blocks``."""
    return np.asarray(blocks) % machine.cluster_size


def cluster_blocks(machine, block: int, cta_mask: int, thread: int | None = None) -> np.ndarray:
    """The wave block indices (rows of Memory.shared, indices of the machine's blocks) of the CTAs of ``block``'s
    cluster that ``cta_mask`` names: bit r (of 16) set names the CTA of rank r, as ``.multicast::cluster``'s
    ctaMask does; in rank order. A bit past the cluster's size is an error of ``machine`` located at ``thread`` (a
    wave thread index; default the block's first thread)."""
    cs = machine.cluster_size
    mask = int(cta_mask) & 0xFFFF
    if mask >> cs:
        t = int(block) * machine.block_threads if thread is None else int(thread)
        raise machine.error(
            f"CTA mask {mask:#06x} names rank {mask.bit_length() - 1}, past the cluster's {cs} "
            f"CTA{'s' if cs > 1 else ''}",
            t,
        )
    ranks = np.flatnonzero((mask >> np.arange(cs)) & 1)
    return (int(block) - int(block) % cs + ranks).astype(np.int64)
