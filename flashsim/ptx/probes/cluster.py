"""Probes of thread-block clusters (kernel/capture/isa/cluster.cu): the cluster special registers with a cluster
launch (``Probe.cluster``), with ``__cluster_dims__`` (the PTX's .reqnctapercluster) and without a cluster (the
implicit 1x1x1 cluster), distributed shared memory through mapa / st / red / ld .shared::cluster and a generic mapa
address, getctarank and isspacep of mapped addresses, barrier.cluster, a remote mbarrier arrive, and st.async /
red.async completing on the receiving CTA's mbarrier. What they store
is values, never addresses (the simulator's shared::cluster encoding is its own, docs/ptx.md)."""

from __future__ import annotations

import numpy as np

from . import Arg, Probe

SOURCE = "capture/isa/cluster.cu"
SPECIALS = 18  # words per block: see cluster.cu's specials()


def _bits(n: int):
    return lambda rng: rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


def _specials(name: str, kernel: str, grid: tuple, cluster) -> Probe:
    blocks = int(np.prod(grid))
    return Probe(
        "cluster",
        name,
        SOURCE,
        kernel,
        grid,
        (32,),
        (Arg("out", "out", shape=(blocks, SPECIALS), fill=0xFFFFFFFF),),
        cluster=cluster,
    )


def _exchange(n: int, blocks: int = 8, threads: int = 64) -> Probe:
    total = blocks * threads
    args = (
        Arg("in", "in", _bits(total)),
        Arg("out", "out", shape=(total,)),
        Arg("out2", "out", shape=(total,)),
        Arg("info", "out", shape=(total,)),
        Arg("cnt", "out", shape=(blocks,)),
    )
    return Probe(
        "cluster", f"dsmem_exchange_{n}", SOURCE, "dsmem_exchange", (blocks,), (threads,), args, cluster=(n, 1, 1)
    )


PROBES = [
    _specials("specials_launch_2x2x1", "cluster_specials", (4, 2, 2), (2, 2, 1)),
    _specials("specials_launch_1x2x2", "cluster_specials", (4, 2, 2), (1, 2, 2)),
    _specials("specials_static_2x2x1", "cluster_specials_static", (4, 2, 2), None),
    _specials("specials_implicit", "cluster_specials", (4, 2, 2), None),
    _exchange(2),
    _exchange(4),
    _exchange(8),
    Probe(
        "cluster",
        "st_red_async_4",
        SOURCE,
        "st_red_async",
        (8,),
        (32,),
        (Arg("in", "in", _bits(256)), Arg("out", "out", shape=(512,)), Arg("sums", "out", shape=(8,))),
        cluster=(4, 1, 1),
    ),
    Probe(
        "cluster",
        "remote_mbarrier_4",
        SOURCE,
        "remote_mbarrier",
        (8,),
        (32,),
        (Arg("in", "in", _bits(256)), Arg("out", "out", shape=(256,))),
        cluster=(4, 1, 1),
    ),
]
