#!/usr/bin/env bash
# Device round 1: runtime tests, kernel vs float64 reference, sanitizers, one benchmark shape.
# Usage on the GPU machine (repo root): bash tools/device_round1.sh   (writes logs under $OUT)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
python3 -c "import cuda.core, cuda.bindings, numpy; print('cuda.core', cuda.core.__version__, 'numpy', numpy.__version__)"
echo "== runtime tests"; timeout 120 python3 -m pytest -q -x -m gpu tests/test_gpu_runtime.py 2>&1 | tail -15
echo "== kernel vs reference"; timeout 200 python3 tools/kernel_vs_reference.py --quick 2>&1 | tee $OUT/kernel_vs_ref.txt | tail -40
echo "== memcheck"; timeout 120 compute-sanitizer --tool memcheck --leak-check no python3 tools/sanitize_kernel.py 2>&1 | tail -8
echo "== racecheck"; timeout 150 compute-sanitizer --tool racecheck python3 tools/sanitize_kernel.py 2>&1 | tail -8
echo "== bench"; timeout 120 python3 -m flashsim.cli bench kernel --shape 4,16,4096,128 --shape 4,16,4096,128,causal --reps 10 2>&1 | tail -6
