#!/usr/bin/env bash
# bench/streaming-multigpu-device.sh BUNDLE — issue 17 on nvidia-h200-x2
# (or x4): rtomod with streaming back-projection on one GPU beside two
# (and four where present) in the same run, from a gpu-bundle folder.
#   - the 2048^3 scan (2048 projections of 2048x2048 uint16, all slices)
#     over 4 connections: whole scan (first frame -> last slice ready,
#     to_ready_s), ingest, tail, the speed-up over one GPU;
#   - the SBDX reference stream through rtomod as fast as sent, 4
#     connections (2 bound it at their ingest, 5.7 GB/s: run 30), one GPU
#     beside two;
#   - the multi-device tests of the streaming and FBP backends (two GPUs
#     visible: their cross-device cases run).
# JSON and a log go to $OUT; the tables are printed.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/streaming-multigpu.log
step_lines=6
. "$(dirname "$0")/device-steps.sh"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
sets="--devices 0 --devices 0,1"
[ "$gpus" -ge 4 ] && sets="$sets --devices 0,1,2,3"
for t in test_cuda_fbp_stream test_cuda_fbp_pipeline test_cuda_fbp_plane; do
  step "$t" "$b/$t"
done
# shellcheck disable=SC2086
step scan2048 "$b/bench_daemon_scan" --rtomod "$b/rtomod" --backend cuda \
  $sets --connections 4 --json "$out/scan2048-multi.json"
for d in 0 0,1; do
  step "sbdxmax-$d" "$b/bench_daemon_stream" --rtomod "$b/rtomod" \
    --backend cuda --devices "$d" --rate 0 --frames 300 --connections 4 \
    --json "$out/sbdxmax-$d.json"
done
# The iterative engine (issue 14) through rtomod: FBP and one CGLS
# iteration of 64 selected slices, one GPU beside two (each GPU solves
# its half of the rows).
# shellcheck disable=SC2086
step iterative "$b/bench_daemon_scan" --rtomod "$b/rtomod" --backend cuda \
  $sets --connections 4 --slices 64 \
  --arg --set --arg reconstruction.method=cgls \
  --arg --set --arg reconstruction.iterations=1 \
  --json "$out/iterative-multi.json"
