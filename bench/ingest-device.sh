#!/usr/bin/env bash
# bench/ingest-device.sh BUNDLE — rtomod's ingest rate beside its baseline,
# ZeroMQ alone (bench_zmq), in the same run: 2048x2048 uint16 frames over 1,
# 2 and 4 connections with rtomod's default settings and with more I/O
# threads or without buffer reuse; 128 MB SBDX-sized messages for ZeroMQ
# alone.  A log goes to $OUT; the tables are printed.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64"
b=$bundle/bin
log=$out/ingest.log
: > "$log"
step() {
  echo "== $*" | tee -a "$log"
  timeout 120 "$@" 2>&1 | tee -a "$log" | sed -n '/^{/q;p'
}
nproc | tee -a "$log"
step "$b/bench_zmq" --messages 1000
step "$b/bench_zmq" --messages 1000 --io-threads 8
step "$b/bench_zmq" --messages 60 --mb 128 --connections 1,2
for extra in "" "--arg --set --arg ingest.io_threads=4" \
             "--arg --set --arg ingest.io_threads=8" \
             "--arg --set --arg ingest.io_threads=4 --arg --set --arg ingest.keep_buffers=false"; do
  # shellcheck disable=SC2086
  step "$b/bench_ingest" --rtomod "$b/rtomod" --backend cuda --frames 1000 \
    --slices 8 --connections 1,2,4 $extra
done
