#!/usr/bin/env bash
# bench/realtime-device.sh BUNDLE — rtomod in real time on one GPU, from a
# bundle made by shared/tools/gpu-bundle (bin/, lib/): the SBDX reference
# stream at 30 frames/s and as fast as it goes, a continuous tomography
# stream, the ingest benchmark with 2 and 4 ZeroMQ I/O threads, and one
# 2048^3 scan through the daemon.  JSON and a log go to $OUT; the tables
# are printed.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/realtime.log
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
step sbdx30 "$b/bench_daemon_stream" --rtomod "$b/rtomod" --backend cuda \
  --rate 30 --frames 300 --json "$out/sbdx30.json"
step sbdxmax "$b/bench_daemon_stream" --rtomod "$b/rtomod" --backend cuda \
  --rate 0 --frames 300 --connections 2 --json "$out/sbdxmax.json"
step continuous "$b/bench_daemon_stream" --rtomod "$b/rtomod" --backend cuda \
  --mode continuous --projections 1800 --every 180 --slices 64 --rate 600 \
  --frames 3600 --json "$out/continuous.json"
step ingest-io2 "$b/bench_ingest" --rtomod "$b/rtomod" --backend cuda \
  --frames 1000 --slices 8 --connections 1,2,4 --json "$out/ingest-io2.json"
step ingest-io4 "$b/bench_ingest" --rtomod "$b/rtomod" --backend cuda \
  --frames 1000 --slices 8 --connections 1,2,4 --json "$out/ingest-io4.json" \
  --arg --set --arg ingest.io_threads=4
step scan2048 "$b/bench_daemon_scan" --rtomod "$b/rtomod" --backend cuda \
  --devices 0 --json "$out/scan2048-1gpu.json"
