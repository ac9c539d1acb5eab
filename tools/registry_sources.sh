#!/usr/bin/env bash
# Which third-party Hopper / Blackwell kernels ship their CUDA sources on a package registry (what the tests may build
# from: sources reach the project only as pinned registry packages). For each name: the versions pip's index lists,
# and for those listed, whether the sdist holds any .cu / .cuh / .h file (the kernel) or only Python around it.
#
#     [FLASH_ATTN_SDIST=flash_attn-2.8.3.post2.tar.gz] bash tools/registry_sources.sh > registry_sources.txt
set -uo pipefail
NAMES=(deep-gemm deepgemm thunderkittens flash-attn-3 flash_attn_3 flashattn-hopper sageattention sageattn3
       sageattention3)
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
echo "registry check $(date -u +%FT%TZ), pip $(python3 -m pip --version | cut -d' ' -f2)"
for n in "${NAMES[@]}"; do
  line=$(python3 -m pip index versions "$n" 2>&1 | grep -v '^WARNING' | head -1)
  echo "$n: ${line:-nothing listed}"
  ver=$(sed -n 's/^[^ ]* (\([^)]*\)).*/\1/p' <<<"$line")
  [[ -z $ver ]] && continue
  d="$TMP/$n"; mkdir -p "$d"
  if python3 -m pip download -q --no-deps --no-binary :all: "$n==$ver" -d "$d" >/dev/null 2>&1; then
    f=$(ls "$d"); all=$(tar tzf "$d/$f" | wc -l); cuda=$(tar tzf "$d/$f" | grep -cE '\.(cu|cuh|h|hpp)$')
    echo "  sdist $f: $all entries, $cuda CUDA / C++ sources or headers"
    tar tzf "$d/$f" | grep -E '\.(cu|cuh|h|hpp)$' | head -5 | sed 's/^/    /'
  else
    echo "  no sdist for $n==$ver"
  fi
done
# flash-attn's own sdist (FLASH_ATTN_SDIST: the file benchmarks/experiments/fa3_cute/compile.py takes, checked against
# its pinned sha256; pip cannot download it alone, its setup.py builds at metadata time): FlashAttention-3's CUDA
# kernels live in the repository's hopper/, which the sdist leaves out; its flash_attn/cute is what fa3_cute builds.
if [[ -n ${FLASH_ATTN_SDIST:-} ]]; then
  pin=$(sed -n 's/^SDIST_SHA256 = "\(.*\)"/\1/p' "$(dirname "$0")/../benchmarks/experiments/fa3_cute/compile.py")
  got=$(sha256sum "$FLASH_ATTN_SDIST" | cut -d' ' -f1)
  [[ $got == "$pin" ]] || { echo "$FLASH_ATTN_SDIST: sha256 $got, not the pinned $pin"; exit 1; }
  echo "flash-attn 2.8.3.post2 sdist (sha256 $got, the pinned one): $(tar tzf "$FLASH_ATTN_SDIST" | grep -c '^[^/]*/hopper/')" \
       "entries under hopper/, $(tar tzf "$FLASH_ATTN_SDIST" | grep -cE '^[^/]*/hopper/.*\.(cu|cuh|h|hpp)$') of them CUDA /" \
       "C++ (the rest Python: its interface, tests, benchmarks); $(tar tzf "$FLASH_ATTN_SDIST" | grep -c '/flash_attn/cute/')" \
       "entries under flash_attn/cute/"
fi
