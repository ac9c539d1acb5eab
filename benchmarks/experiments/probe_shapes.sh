# Sourced by experiment scripts, from the repository root: checks OUT (the results folder) and makes it absolute,
# exports PYTHONPATH (the checkout) and PYTHONUNBUFFERED, and defines
# probe_shapes SRC DEFINE CASES TAG LOG SHAPE...
#   kernel_variant_probe.py on kernel source SRC with the switch DEFINE over case set CASES, once per shape (B,H,N),
#   each run's command and table appended to $OUT/LOG_probe.txt and its JSON written to $OUT/TAG_<B>x<H>x<N>.json.
probe_shapes() {
  local src=$1 define=$2 cases=$3 tag=$4 log=$5 shape
  shift 5
  for shape in "$@"; do
    echo "\$ python3 benchmarks/experiments/kernel_variant_probe.py --source $src --define $define --cases $cases" \
         "--shape $shape" | tee -a "$OUT/${log}_probe.txt"
    python3 benchmarks/experiments/kernel_variant_probe.py --source "$src" --define "$define" --cases "$cases" \
        --shape "$shape" --json "$OUT/${tag}_${shape//,/x}.json" 2>&1 | tee -a "$OUT/${log}_probe.txt"
  done
}

: "${OUT:?set OUT}"
OUT=$(realpath -m "$OUT") && mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
