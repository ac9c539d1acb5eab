for f in "" "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" "--xla_gpu_enable_while_loop_double_buffering=true"; do
  echo "== XLA_FLAGS='$f'"; XLA_FLAGS="$f" PYTHONPATH=. timeout 150 python3 tools/jax_gpu_variants.py --n 16384 --only base,unroll+8,base+4 --no-parts 2>&1 | grep -v -i warn | tail -4
done
