#!/usr/bin/env bash
# bench/connections-device.sh BUNDLE — rtomod fed over several connections
# (docs/PERFORMANCE.md, second session, runs 9-11), from a bundle made by
# shared/tools/gpu-bundle of rtomod, bench_zmq, bench_ingest,
# bench_daemon_stream and bench_daemon_scan:
#   - ZeroMQ alone beside rtomod's ingest (1, 2, 4 connections; rtomod with
#     ingest.io_threads 2 and with the default 4);
#   - the SBDX reference stream at 30 frames/s over 1, 2 and 4 connections,
#     and over 2 with three variants (publish.stats_threads 4, 8 host copy
#     threads, 16-bit planes), then as fast as it is sent over 4;
#   - a 2048^3 scan through rtomod;
#   - with two GPUs visible, the SBDX stream and the scan on one GPU beside
#     two (run 11).
# Tables are printed; a log and the JSON results go to $OUT.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
json=$(mktemp -d)
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64"
export RTOMO_CACHE_DIR=/tmp/rtomo-cache
mkdir -p "$RTOMO_CACHE_DIR"
b=$bundle/bin
log=$out/connections.log
: > "$log"
step() {   # step NAME COMMAND...: run, keep everything, print the table
  local name=$1; shift
  echo "== $name" | tee -a "$log"
  timeout 150 "$@" > "$json/$name.out" 2>&1
  echo "exit $?" >> "$json/$name.out"
  cat "$json/$name.out" >> "$log"
  sed -n '/^{/q;p' "$json/$name.out" | tail -n 6
}
stream() {   # stream NAME ARGS...: bench_daemon_stream on the CUDA backend
  local name=$1; shift
  step "$name" "$b/bench_daemon_stream" --rtomod "$b/rtomod" --backend cuda \
    --frames 300 --json "$json/$name.json" "$@"
}
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
nvidia-smi --query-gpu=index,name,clocks.sm --format=csv | tee -a "$log"
echo "host cores: $(nproc)" | tee -a "$log"

step zmq-alone "$b/bench_zmq" --messages 1000
for io in 2 4; do
  step "ingest-io$io" "$b/bench_ingest" --rtomod "$b/rtomod" --backend cuda \
    --frames 1000 --slices 8 --connections 1,2,4 \
    --json "$json/ingest-io$io.json" --arg --set --arg "ingest.io_threads=$io"
done
for c in 1 2 4; do
  stream "sbdx30-c$c" --devices 0 --rate 30 --connections "$c"
done
stream sbdx30-c2-stats4 --devices 0 --rate 30 --connections 2 \
  --arg --set --arg publish.stats_threads=4
stream sbdx30-c2-copy8 --devices 0 --rate 30 --connections 2 \
  --arg --cpu-threads --arg 8
stream sbdx30-c2-u16 --devices 0 --rate 30 --connections 2 --planes uint16
devices="0"
[ "$gpus" -ge 2 ] && devices="0 0,1"
for d in $devices; do
  stream "sbdxmax-$d" --devices "$d" --rate 0 --connections 4
done
scan_devices=(--devices 0)
[ "$gpus" -ge 2 ] && scan_devices+=(--devices 0,1)
step scan2048 "$b/bench_daemon_scan" --rtomod "$b/rtomod" --backend cuda \
  "${scan_devices[@]}" --json "$json/scan2048.json"
tar -C "$json" -czf "$out/connections-json.tgz" .
