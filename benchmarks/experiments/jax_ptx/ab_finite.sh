#!/usr/bin/env bash
# GPU, A/B: the chains' finite branch (tensorcore._block_generic ``finite``, chosen per chain by xp.when) against the
# general form alone, in one call on the same machine. Runs tools/jax_fused_sweep.py at N = 16384 for $SHAPES, then
# makes a scratch copy of the repository in which xp.when always takes the general form and runs the same sweep
# there (the copy only; the checkout is untouched). Usage (device, repo root):
#   OUT=dir bash benchmarks/experiments/jax_ptx/ab_finite.sh  -> $OUT/jax_ab.tgz
set -uo pipefail
source "$(dirname "$0")/../jax_steps.sh" jax_ab
STEP_TAIL=3
step sweep_finite_branch ${SWEEP_S:-120} python3 tools/jax_fused_sweep.py --n 16384 --shapes ${SHAPES:-16x16p} \
     --reps 10 --emu-reps 5 --json $D/sweep_finite_branch.json
G=/tmp/jax_ab_general; rm -rf $G; mkdir -p $G; cp -r flashsim tools kernel $G/
python3 - $G/flashsim/numerics/xp.py <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
old = '    if isinstance(pred, (bool, np.bool_, np.ndarray)):'
assert old in s
open(p, 'w').write(s.replace(old, '    return general()\n' + old, 1))
PY
(cd $G && step sweep_general_only ${SWEEP_S:-120} python3 tools/jax_fused_sweep.py --n 16384 \
     --shapes ${SHAPES:-16x16p} --reps 10 --emu-reps 5 --json $D/sweep_general_only.json)
tar czf ${OUT:-.}/jax_ab.tgz -C /tmp jax_ab
