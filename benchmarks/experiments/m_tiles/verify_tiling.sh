# Sourced by run.sh and sanitize.sh (from the repository root). verify_tiling D ACC WxMxKVxS: `flashsim verify` of one
# tiling against the emulator, bit for bit, on a ragged GQA problem (Nq 777, Nk 1000, two query heads on one K / V
# head): full and causal in one call, a sliding window (300, 0) in another. $RUNNER (an array, default empty) goes in
# front of each call, e.g. compute-sanitizer and its options.
verify_tiling() {
  local d=$1 acc=$2 w m kv s
  IFS=x read -r w m kv s <<< "$3"
  local common=(--only --kv-heads 1 --pv-accum "$acc" --warps "$w" --m-tiles "$m" --kv-tile "$kv" --stages "$s"
                --kinds normal)
  echo "\$ ${RUNNER[*]} python3 -m flashsim.cli verify ${common[*]} --shape 1,2,777,1000,$d --shape 1,2,777,1000,$d,causal"
  "${RUNNER[@]}" python3 -m flashsim.cli verify "${common[@]}" --shape "1,2,777,1000,$d" --shape "1,2,777,1000,$d,causal"
  echo "\$ ${RUNNER[*]} python3 -m flashsim.cli verify ${common[*]} --shape 1,2,777,1000,$d --window=300,0"
  "${RUNNER[@]}" python3 -m flashsim.cli verify "${common[@]}" --shape "1,2,777,1000,$d" --window=300,0
}
