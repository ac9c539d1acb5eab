"""GPU: where compute-sanitizer's racecheck warnings on the serving builds come from.

Runs one serving variant of benchmarks/serving/sanitize_serving.py (chosen by a part of its name) with its kernel
built with line information, so that racecheck names CUDA lines, and writes the SASS of the same build (nvdisasm,
with line info) so that the offsets of the earlier reports can be read. Usage on the GPU machine:

    compute-sanitizer --tool racecheck python3 benchmarks/experiments/racecheck_warnings/locate.py "varlen q[3, 0" OUT
"""

import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "serving"))

import sanitize_serving  # noqa: E402

from flashsim.commands import verify_serving as vs  # noqa: E402
from flashsim.gpu import launch  # noqa: E402
from flashsim.gpu import runtime as rt  # noqa: E402


def main(part: str, out: pathlib.Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    case = next(c for c in sanitize_serving.VARIANTS if part in c.name())
    arrays = case.arrays()
    arch = rt.current_arch()
    prob, _ = vs.problem_of(case, arrays, arch)
    cfg = prob.config
    built = launch.build_kernel(cfg, arch, extra_options=("--generate-line-info",))
    (out / "flash_fwd.cubin").write_bytes(built.cubin)
    kern = rt.load(built, launch.KERNEL_NAME)
    rt.set_dynamic_smem(kern, cfg.smem_bytes)
    launch._KERNELS[(cfg, arch)] = kern  # the plan's kernel: this build, with line information
    print(case.name(), "|", cfg.describe(), flush=True)
    vs.gpu_outputs(case, arrays, prob)
    sass = subprocess.run(["nvdisasm", "-g", "-c", str(out / "flash_fwd.cubin")], capture_output=True, text=True)
    (out / "flash_fwd.sass").write_text(sass.stdout + sass.stderr)
    print("sass lines:", sass.stdout.count("\n"), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], pathlib.Path(sys.argv[2]))
