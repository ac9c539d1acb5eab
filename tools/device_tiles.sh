#!/usr/bin/env bash
# Device round: the two-m16-tiles-per-warp kernel: bit-exact against the emulator, then a tile-shape sweep.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
echo "== verify 4 warps x 2 m-tiles, kv 32"
timeout 200 python3 -m flashsim.cli verify --warps 4 --m-tiles 2 --kv-tile 32 --kinds normal,adversarial 2>&1 | tail -4
echo "== verify d=64 4 warps x 2 m-tiles, kv 64"
timeout 100 python3 -m flashsim.cli verify --only --shape 1,2,200,333,64 --shape 2,1,257,129,64,causal --warps 4 --m-tiles 2 --kv-tile 64 2>&1 | tail -3
S="--shape 4,16,4096,128 --shape 4,16,4096,64 --reps 5"
for cfg in "--warps 8 --m-tiles 1 --kv-tile 64 --stages 3" "--warps 4 --m-tiles 2 --kv-tile 32 --stages 2" "--warps 4 --m-tiles 2 --kv-tile 32 --stages 3" "--warps 4 --m-tiles 2 --kv-tile 64 --stages 2" "--warps 4 --m-tiles 2 --kv-tile 64 --stages 3" "--warps 8 --m-tiles 2 --kv-tile 32 --stages 2"; do
  echo "== $cfg"; timeout 90 python3 -m flashsim.cli bench kernel $S $cfg 2>&1 | tail -2; done
