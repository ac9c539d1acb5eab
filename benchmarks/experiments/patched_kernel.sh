# Sourced by the experiment scripts (from the repository root). patched_kernel PATCH DIR:
#   DIR/tree               the repository at the commit PATCH names on its first line ("base: <commit>", text patch(1)
#                          skips), unpacked by git archive (the checkout and .git are left alone)
#   DIR/kernel/flash_fwd.cu that commit's kernel with PATCH applied; its path is printed.
# An experiment runs inside DIR/tree (its flashsim, its probe) on DIR/kernel/flash_fwd.cu: a patch is measured with the
# Python side of its own commit, whose kernel build (defines, the shared-memory static_assert) matches it, whatever
# the kernel and the configuration are now.
patched_kernel() {
  local patch dir=$2 base
  patch=$(realpath "$1")
  base=$(sed -n '1s/^base: *//p' "$patch")
  [[ -n $base ]] || { echo "$patch: its first line must be 'base: <commit>'" >&2; return 2; }
  rm -rf "$dir" && mkdir -p "$dir/tree" "$dir/kernel"
  git archive "$base" | tar -x -C "$dir/tree"
  cp "$dir/tree/kernel/flash_fwd.cu" "$dir/kernel/flash_fwd.cu"
  patch -s -d "$dir" -p1 < "$patch"
  echo "$(realpath "$dir")/kernel/flash_fwd.cu"
}
