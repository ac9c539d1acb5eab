"""What flashsim.triton needs from Triton, and the errors it raises: the supported Triton releases, the targets, and
one clear error for each thing a user can get wrong (Triton missing or of another release, a target Triton cannot
build, an argument that does not match the kernel)."""

from __future__ import annotations

import re

from ..errors import CompileError
from ..ptx.errors import LaunchError

__all__ = [
    "SUPPORTED",
    "TARGETS",
    "Target",
    "TritonUnavailable",
    "TritonArgumentError",
    "TritonCompileError",
    "import_triton",
    "target",
]

# The launcher conventions flashsim.triton follows (the two hidden scratch pointers, how a TensorDescriptor expands
# into parameters, which scalars become constants) were read in and tested against this release line; another one
# may change any of them, so it is refused rather than run with a silently different argument list.
SUPPORTED = ((3, 9), (3, 10))  # [first, last) release lines
INSTALL = "pip install 'flashsim[triton]'"


class TritonUnavailable(ImportError):
    """Triton is not installed, or its release is outside flashsim.triton's supported range."""


class TritonArgumentError(LaunchError):
    """An argument that does not match the kernel: its signature, a missing constexpr, a tensor on a GPU, a value of
    the wrong kind. The message names the argument."""


class TritonCompileError(CompileError):
    """Triton's compiler refused the kernel for the target (the message keeps Triton's own, which names the line)."""


class Target:
    """A target as flashsim.triton names it: ``name`` ("sm_90"), ``capability`` (Triton's GPUTarget arch, 90),
    ``arch`` (the GPU, a flashsim.arch name, that runs the build unless a launch names another), ``build`` (the
    architecture Triton compiles for: "sm_90a")."""

    def __init__(self, name: str, capability: int, arch: str, build: str):
        self.name, self.capability, self.arch, self.build = name, capability, arch, build

    def __repr__(self) -> str:
        return f"Target({self.name!r}: Triton's {self.build} build)"


# Triton builds sm_90 and later with the architecture-specific suffix (its sm_arch_from_capability): "sm_90" here is
# the sm_90a build (wgmma, TMA), "sm_120" the sm_120a one, as `triton.jit` makes them for those GPUs.
# The GPU that runs a build, by default: the H200 (sm_90), as flashsim.ptx.load's default, for every build it can run
# (an sm_80 / sm_89 build runs there as the driver runs it, its PTX compiled for sm_90): the H200 is the GPU whose
# every unit flashsim models from silicon, and whose bits a launch can be checked against; an A100's or Ada's SFU has
# no captured model, so most kernels would be refused there. An sm_120a build runs only on sm_120. A launch's ``arch``
# names another GPU (arch="sm_80": the A100).
TARGETS = {
    t.name: t
    for t in (
        Target("sm_80", 80, "sm_90", "sm_80"),
        Target("sm_89", 89, "sm_90", "sm_89"),
        Target("sm_90", 90, "sm_90", "sm_90a"),
        Target("sm_120", 120, "sm_120", "sm_120a"),
    )
}


def target(name) -> Target:
    """The Target called ``name`` ("sm_90", "90", "sm_90a"); TritonArgumentError naming the supported ones."""
    key = str(name).strip().lower() if isinstance(name, (str, int)) else None
    if key is not None:
        key = re.sub(r"a$", "", key if key.startswith("sm_") else "sm_" + key)
    if key not in TARGETS:
        raise TritonArgumentError(
            f"target must be one of {', '.join(TARGETS)} (Triton's builds for A100, Ada, H100/H200 and RTX 50xx), "
            f"got {name!r}"
        )
    return TARGETS[key]


def _version(text: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m[1]), int(m[2])) if m else (0, 0)


def import_triton():
    """The ``triton`` module, checked: TritonUnavailable (naming the extra) where it is missing or of a release
    outside SUPPORTED."""
    try:
        import triton
    except ImportError as exc:
        raise TritonUnavailable(
            f"flashsim.triton needs Triton, which is not installed ({exc}): {INSTALL}", name="triton"
        ) from None
    have = _version(triton.__version__)
    first, last = SUPPORTED
    if not first <= have < last:
        raise TritonUnavailable(
            f"flashsim.triton supports Triton {first[0]}.{first[1]}.x (its launcher conventions were checked against "
            f"that release line); this is Triton {triton.__version__}: {INSTALL}",
            name="triton",
        )
    return triton
