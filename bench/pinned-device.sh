#!/usr/bin/env bash
# bench/pinned-device.sh BUNDLE — what page-locked slice buffers kept
# across scans (publish.pinned_mb, issue 11) change in rtomod's output
# path, A against B in the same run on one GPU: every row once with
# publish.pinned_mb=0 (ordinary memory per scan, read through the
# engine's staging buffers: the behaviour before) and once with the
# default.  bench_daemon_scan --scans sends several scans to one daemon,
# so the first scan (buffers allocated, pages touched or locked) shows
# apart from the later ones.  2048 projections of 2048x2048 uint16 over 4
# connections:
#   1. 64 selected slices, 3 scans: last frame -> slices in host memory
#      (ready_s), scan_end -> scan_complete (tail_s);
#   2. the 2048^3 volume in half precision, 2 scans;
#   3. the same in float, 2 scans.
# Tables go to stdout, everything to $OUT/pinned.log.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/pinned.log
step_lines=${step_lines:-5}
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,memory.total --format=csv | tee -a "$log"
scan() {   # scan NAME PINNED_MB ARGS...
  local name=$1 mb=$2; shift 2
  step "$name-pinned$mb" "$b/bench_daemon_scan" --rtomod "$b/rtomod" \
    --backend cuda --devices 0 --connections 4 \
    --arg --set --arg "publish.pinned_mb=$mb" "$@"
}
for mb in 0 4096; do
  scan slices64 "$mb" --slices 64 --scans 3
done
for mb in 0 4096; do
  scan volume-half "$mb" --scans 2 --arg --set --arg engine.precision=half
done
for mb in 0 4096; do
  scan volume-float "$mb" --scans 2
done
