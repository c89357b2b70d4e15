#!/bin/sh
# bench/suite-device.sh BUNDLE — the whole `make check` suite on a GPU
# machine.  Here the four test_cuda_* programs run for real instead of
# skipping, and the daemon tests start an rtomod whose "auto" backend picks
# the GPU, so the daemon's CUDA path is exercised end to end too.
#
# BUNDLE is a folder made by shared/tools/gpu-bundle from build/tests/test_*
# (the compiled ones; the shell tests need a build tree), build/rtomod and
# build/rtomo-simrecon.  Run from the source root, as the device tool does.
# One log per test goes to $OUT; a PASS/SKIP/FAIL table is printed last and
# the exit status is 1 when any test failed.
set -u
bundle=${1:?usage: suite-device.sh BUNDLE}
out=${OUT:-/tmp/suite-device}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# daemon_process.c finds rtomod through $RTOMOD; test_fbp_simrecon finds
# rtomo-simrecon in $top_builddir; test_daemon_config reads its example
# configurations under $top_srcdir.
export RTOMOD="$bundle/bin/rtomod" top_builddir="$bundle/bin" top_srcdir=.
export RTOMO_CACHE_DIR=/tmp/rtomo-cache
mkdir -p "$RTOMO_CACHE_DIR"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv,noheader
failed=0
table=""
for t in "$bundle"/bin/test_*; do
  name=$(basename "$t")
  t0=$(date +%s)
  timeout 300 "$t" > "$out/$name.log" 2>&1
  rc=$?
  case $rc in
    0) verdict=PASS ;;
    77) verdict=SKIP ;;
    *) verdict="FAIL (exit $rc)"; failed=1 ;;
  esac
  checks=$(grep -E '^[0-9]+%: Checks' "$out/$name.log" | tail -1)
  table="$table$(printf '%-26s %-14s %4ss  %s' "$name" "$verdict" \
    "$(( $(date +%s) - t0 ))" "$checks")
"
done
echo "===== failures"
grep -h -E ':[EF]:' "$out"/test_*.log | head -40
echo "===== suite on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
printf '%s' "$table" | tee "$out/summary.txt"
exit $failed
