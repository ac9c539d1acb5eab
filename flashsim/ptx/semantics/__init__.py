"""The instruction semantics, one module per family; importing the package registers every builder in the
instruction table (flashsim.ptx.isa). Each module says which opcodes and forms it implements and how."""

from . import (
    asynchronous,
    atomic,
    bulk,
    cluster,
    control,
    convert,
    data,
    floating,
    integer,
    launchcontrol,
    matrix,
    matrix_b8,
    mma_kinds,
    registers,
    special,
    warp,
    wgmma,
)

__all__ = [
    "asynchronous",
    "atomic",
    "bulk",
    "cluster",
    "control",
    "convert",
    "data",
    "floating",
    "integer",
    "launchcontrol",
    "matrix",
    "matrix_b8",
    "mma_kinds",
    "registers",
    "special",
    "warp",
    "wgmma",
]
