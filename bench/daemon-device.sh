#!/usr/bin/env bash
# bench/daemon-device.sh BUNDLE — rtomod end to end on a GPU machine, with
# the programs bundled by shared/tools/gpu-bundle into BUNDLE (bin/, lib/):
# a CUDA reconstruction sanity check, then the ingest benchmark (2048x2048
# uint16 frames over 1, 2 and 4 connections) and the latency of a full
# 2048^3 scan from its last frame to its last slice.  Results go to $OUT.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64"
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv
nproc
"$bundle/bin/rtomo-simrecon" --backend cuda --size 512 --angles 512 \
  --output "$out/simrecon" 2>&1 | tail -6
"$bundle/bin/bench_ingest" --rtomod "$bundle/bin/rtomod" --backend cuda \
  --frames 1000 --slices 8 --connections 1,2,4 --json "$out/ingest.json" \
  2>&1 | tee "$out/ingest.log" | grep -v '^[{} ]'
"$bundle/bin/bench_ingest" --rtomod "$bundle/bin/rtomod" --backend cuda \
  --frames 2048 --slices 2048 --connections 4 --json "$out/scan2048.json" \
  2>&1 | tee "$out/scan2048.log" | grep -v '^[{} ]'
