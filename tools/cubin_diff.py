"""Did a kernel edit change the machine code? Build every default configuration of kernel/flash_fwd.cu from a git
revision and from the working tree (causal and not), each with the defines of its own checkout, and compare the
cubins byte for byte.

    python3 tools/cubin_diff.py [--rev HEAD] [--arch sm_90 --arch sm_120]

No GPU needed (NVRTC). Both get this checkout's defines (flashsim.gpu.launch.build_kernel); one the revision's
source never mentions (a define added with the edit) does not change its build. Prints one line per configuration
that differs and a total; exit status 1 if any does.
Identical cubins run identically: an edit that keeps them (a comment, a rule moved into a define) changes no result,
though the captures must still be re-taken for the drift guard (tests/test_drift.py hashes the source).
Where the cubins differ, their code is compared too (the SASS text of every code section, tools/sass_ops.py's
disassembler): NVRTC keeps a symbol for every namespace-scope constant of the kernel, so a new constexpr changes
the cubin's bytes but not one instruction. Such builds count as the same machine code; only a build whose SASS
differs is printed, and sets the exit status.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import subprocess
import sys


def main(argv=None) -> int:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from sass_ops import disassemble

    from flashsim.config import SUPPORTED_HEAD_DIMS, KernelConfig, pv_accums
    from flashsim.gpu.build import kernel_path
    from flashsim.gpu.launch import KERNEL_FILE, build_kernel

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rev", default="HEAD", help="the git revision to compare with (default HEAD)")
    p.add_argument("--arch", action="append", default=[], help="default: sm_90 and sm_120")
    p.add_argument("--head-dim", type=int, action="append", default=[], help="default: 32 to 256 by 32")
    a = p.parse_args(argv)
    path = kernel_path(KERNEL_FILE)
    try:
        old = subprocess.run(
            ["git", "show", f"{a.rev}:kernel/{KERNEL_FILE}"],
            capture_output=True,
            text=True,
            check=True,
            cwd=path.parent,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"cubin_diff: cannot read kernel/{KERNEL_FILE} at {a.rev}: {exc}", file=sys.stderr)
        return 2
    n = differ = same_code = 0
    for arch in a.arch or ["sm_90", "sm_120"]:
        for quant in ("none", "int8", "int8-fp8"):
            for acc in pv_accums("f16", quant):
                for d, causal in itertools.product(a.head_dim or SUPPORTED_HEAD_DIMS, (False, True)):
                    cfg = KernelConfig.default(arch, head_dim=d, pv_accum=acc, quant=quant, causal=causal)
                    b_old, b_new = build_kernel(cfg, arch, source=old), build_kernel(cfg, arch)
                    n += 1
                    if b_old.cubin == b_new.cubin:
                        continue
                    if disassemble(b_old.cubin) == disassemble(b_new.cubin):
                        same_code += 1
                    else:
                        differ += 1
                        print(
                            f"differs: {arch} quant={quant} pv_accum={acc} d={d} causal={causal}  registers "
                            f"{b_old.registers} -> {b_new.registers}, spill bytes "
                            f"{b_old.spill_stores + b_old.spill_loads} -> {b_new.spill_stores + b_new.spill_loads}"
                        )
    print(
        f"{n - differ - same_code} of {n} default builds have byte-identical cubins, {same_code} more the same "
        f"machine code (SASS), {differ} different code ({a.rev} against the working tree)"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
