# Sourced by the JAX engine's device scripts (jax_fused/, jax_ieee_cvt/, jax_staged/, jax_ptx/): `source .../jax_steps.sh NAME`
# gives a fresh folder D=/tmp/NAME, the environment they run under, and `step LOG LIMIT CMD...`: CMD under a timeout
# into $D/LOG.txt (its command first, its exit status last), then the log's last lines ($STEP_TAIL, default 4).
D=/tmp/$1; rm -rf "$D"; mkdir -p "$D"
export PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
_STEP_TAIL=${STEP_TAIL:-4}      # kept: a STEP_TAIL given with `source` lasts only while this file runs
step() { local name=$1 limit=$2; shift 2; echo "\$ $*" > "$D/$name.txt"
         timeout "$limit" "$@" >> "$D/$name.txt" 2>&1; echo "exit $?" >> "$D/$name.txt"; tail -"$_STEP_TAIL" "$D/$name.txt"; }
