#!/usr/bin/env bash
# bench/chunks-device.sh BUNDLE — streaming back-projection's chunks in
# rtomod (issue 11): what the last frame leaves to do, A against B in the
# same run on one GPU.  BUNDLE/bin holds rtomod (the code measured) and,
# when present, rtomod-base (the baseline, e.g. the parent commit), plus
# bench_daemon_scan and bench_daemon_stream.  2048 projections of
# 2048x2048 uint16 over 4 connections:
#   1. the 2048^3 volume in half precision, 2 scans: the baseline, the new
#      code with its chunks held to 256 projections (the old bound, through
#      the RTOMO_CUDA_FBP_STREAM_CHUNK hook), the new code;
#   2. the same in float, baseline and new;
#   3. 64 selected slices, 2 scans, baseline and new;
#   4. continuous 2048x2048, window 1800 every 180, 64 slices, at 1000
#      projections/s, baseline and new.
# The new code's runs set RTOMO_CUDA_FBP_STREAM_TRACE=1: each chunk's
# size and GPU time, in the log.  Tables go to stdout, everything to
# $OUT/chunks.log.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/chunks.log
step_lines=${step_lines:-4}
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=name,clocks.sm,memory.total --format=csv | tee -a "$log"
scan() {   # scan NAME RTOMOD ARGS...
  local name=$1 daemon=$2; shift 2
  step "$name" "$b/bench_daemon_scan" --rtomod "$daemon" --backend cuda \
    --devices 0 --connections 4 "$@"
}
trace() { RTOMO_CUDA_FBP_STREAM_TRACE=1 "$@"; }
chunks() {   # the trace of the step just run: chunk sizes and GPU ms
  grep "stream trace" "$log" | tail -n "$1" |
    sed 's/.*chunk \([0-9]*\): \([0-9]*\) projections.*(\(.*\) ms)/\2:\3/' |
    tr '\n' ' '
  echo
}
half=(--scans 2 --arg --set --arg engine.precision=half)
[ -x "$b/rtomod-base" ] && scan volume-half-base "$b/rtomod-base" "${half[@]}"
RTOMO_CUDA_FBP_STREAM_CHUNK=256 trace scan volume-half-256 "$b/rtomod" "${half[@]}"
trace scan volume-half "$b/rtomod" "${half[@]}"
echo "chunks (projections:GPU ms) of the last scan: $(chunks 12)"
[ -x "$b/rtomod-base" ] && scan volume-float-base "$b/rtomod-base" --scans 2
trace scan volume-float "$b/rtomod" --scans 2
echo "chunks (projections:GPU ms) of the last scan: $(chunks 12)"
[ -x "$b/rtomod-base" ] && scan slices64-base "$b/rtomod-base" --slices 64 --scans 2
scan slices64 "$b/rtomod" --slices 64 --scans 2
step_timeout=100
for d in rtomod-base rtomod; do
  [ -x "$b/$d" ] || continue
  step "continuous-$d" "$b/bench_daemon_stream" --rtomod "$b/$d" \
    --backend cuda --mode continuous --width 2048 --height 2048 \
    --projections 1800 --every 180 --slices 64 --rate 1000 --frames 3600 \
    --connections 4
done
