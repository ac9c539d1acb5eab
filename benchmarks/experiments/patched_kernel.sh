# Sourced by the experiment scripts (from the repository root). patched_kernel PATCH DIR:
#   DIR/tree               the repository at the commit PATCH names on its first line ("base: <commit>", text patch(1)
#                          skips), unpacked by git archive (the checkout and .git are left alone)
#   DIR/kernel/flash_fwd.cu that commit's kernel with PATCH applied; its path is printed.
# An experiment runs inside DIR/tree (its flashsim, its probe) on DIR/kernel/flash_fwd.cu: a patch is measured with the
# Python side of its own commit, whose kernel build (defines, the shared-memory static_assert) matches it, whatever
# the kernel and the configuration are now. Where that commit is missing (the device's copy of the repository holds
# only the session's base commit), DIR/tree is a link to the checkout, which must then be that commit's code: the
# patch still has to apply to its kernel.
patched_kernel() {
  local patch dir=$2 base
  patch=$(realpath "$1")
  base=$(sed -n '1s/^base: *//p' "$patch")
  [[ -n $base ]] || { echo "$patch: its first line must be 'base: <commit>'" >&2; return 2; }
  rm -rf "$dir" && mkdir -p "$dir/kernel"
  if git cat-file -e "$base^{commit}" 2>/dev/null; then
    mkdir -p "$dir/tree" && git archive "$base" | tar -x -C "$dir/tree"
  else   # a copy of the repository that stops before it (the device's): the checkout stands in for that commit
    echo "patched_kernel: $base is not in this repository; the checkout stands in for it (the patch must apply)" >&2
    ln -s "$PWD" "$dir/tree"
  fi
  cp "$dir/tree/kernel/flash_fwd.cu" "$dir/kernel/flash_fwd.cu"
  patch -s -d "$dir" -p1 < "$patch"
  echo "$(realpath "$dir")/kernel/flash_fwd.cu"
}
