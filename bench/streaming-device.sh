#!/usr/bin/env bash
# bench/streaming-device.sh BUNDLE — streaming reconstruction (issue 11) on
# one GPU, from a bundle made by shared/tools/gpu-bundle (bin/, lib/).
# Every figure has its baseline from the same run: rtomod with
# reconstruction.streaming=false (slices back-projected after the scan,
# continuous windows from scratch), runs alternating A B A B.
#   - the 2048^3 scan (2048 projections of 2048x2048 uint16, all 2048
#     slices) over 4 connections: ready_s (last frame -> last slice in host
#     memory), tail_s (scan_end sent -> scan_complete), total_s;
#   - 64 selected slices of the same scan: the tail to published;
#   - continuous 2048x2048, window 1800 every 180, 64 slices, at 1000
#     projections/s over 4 connections: window latency;
#   - bench-fbp --stream: streaming's read-modify-write as a ratio to plain
#     back-projection.
# JSON and a log go to $OUT; the tables are printed.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/streaming.log
step_lines=4
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
off="--arg --set --arg reconstruction.streaming=false"
for round in 1 2; do
  step "scan2048-stream-$round" "$b/bench_daemon_scan" --rtomod "$b/rtomod" \
    --backend cuda --devices 0 --connections 4 \
    --json "$out/scan2048-stream-$round.json"
  # shellcheck disable=SC2086
  step "scan2048-after-$round" "$b/bench_daemon_scan" --rtomod "$b/rtomod" \
    --backend cuda --devices 0 --connections 4 $off \
    --json "$out/scan2048-after-$round.json"
done
step scan64-stream "$b/bench_daemon_scan" --rtomod "$b/rtomod" \
  --backend cuda --devices 0 --connections 4 --slices 64 \
  --json "$out/scan64-stream.json"
# shellcheck disable=SC2086
step scan64-after "$b/bench_daemon_scan" --rtomod "$b/rtomod" \
  --backend cuda --devices 0 --connections 4 --slices 64 $off \
  --json "$out/scan64-after.json"
# Windows of 64 slices of 2048^2 are 1 GiB each: this client cannot take
# them in as fast as they come, so the daemon's own latency (last
# projection received -> window published) is the figure; a step ends
# after 100 s whatever the client still waits for.
step_timeout=100
for mode in stream after; do
  extra=""
  [ "$mode" = after ] && extra=$off
  # shellcheck disable=SC2086
  step "continuous-$mode" "$b/bench_daemon_stream" --rtomod "$b/rtomod" \
    --backend cuda --mode continuous --width 2048 --height 2048 \
    --projections 1800 --every 180 --slices 64 --rate 1000 --frames 3600 \
    --connections 4 $extra --json "$out/continuous-$mode.json"
done
