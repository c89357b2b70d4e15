# bench/device-steps.sh — sourced by the rtomod device scripts: the bundle's
# environment (libraries, autotune cache) and `step`, which runs one
# benchmark, keeps all it printed in the log and shows its table.
# Before sourcing set: bundle (the gpu-bundle folder), out (results), log
# (the log file); optionally step_lines (table lines shown, default 12) and
# step_timeout (seconds per step, default 240).
# Defines b, the bundle's bin/.
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64"
export RTOMO_CACHE_DIR=/tmp/rtomo-cache
mkdir -p "$out" "$RTOMO_CACHE_DIR"
b=$bundle/bin
: > "$log"
step() {   # step NAME COMMAND...: run, keep everything, print the table
  local name=$1; shift
  echo "== $name: $*" | tee -a "$log"
  timeout "${step_timeout:-240}" "$@" > "$out/$name.out" 2>&1
  echo "exit $?" >> "$out/$name.out"
  cat "$out/$name.out" >> "$log"
  sed -n '/^{/q;p' "$out/$name.out" | tail -n "${step_lines:-12}"
  rm -f "$out/$name.out"
}
