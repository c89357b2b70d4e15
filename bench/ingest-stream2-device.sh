#!/usr/bin/env bash
# bench/ingest-stream2-device.sh BUNDLE — DECTRIS Stream V2 ingest (issue 16)
# beside rtomo's native protocol in the same run: 2048x2048 uint16 frames
# natively, as Stream V2 uncompressed and as Stream V2 bitshuffle-LZ4, each
# over 1 and 4 connections, into rtomod with the CUDA backend (8 slices
# reconstructed, so the run measures transport and decoding), from a
# bundle made by shared/tools/gpu-bundle of rtomod and bench_stream2:
#   shared/tools/gpu-bundle .gpu build/rtomod build/bench/bench_stream2 \
#     build/bench/bench_bitshuffle
# The table gives GB/s of pixels, frames/s, the daemon's decoding time and
# its share of the run (decode%): the target is that bslz4 over 4
# connections is not limited by decoding (decode% well below 100, GB/s
# near the native run's).  A second pass repeats bslz4 over 4 connections
# with rtomod and the sender confined to 2 cores (taskset: one decoding
# helper beside the loop), to show what the helpers buy.  A log and the
# JSON results go to $OUT.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/ingest-stream2.log
step_lines=10
step_timeout=300
# shellcheck source=bench/device-steps.sh
. "$(dirname "$0")/device-steps.sh"
nproc | tee -a "$log"
step stream2 "$b/bench_stream2" --rtomod "$b/rtomod" --backend cuda \
  --frames 400 --slices 8 --connections 1,4 --modes native,raw,bslz4 \
  --json "$out/ingest-stream2.json"
step stream2-1cpu taskset -c 0,1 "$b/bench_stream2" --rtomod "$b/rtomod" \
  --backend cuda --frames 200 --slices 8 --connections 4 --modes bslz4 \
  --json "$out/ingest-stream2-1helper.json"
# The decoder alone on this host's cores (no daemon): each transpose's and
# the whole bslz4 decode's GB/s per core, and on the decoding helpers.
step bitshuffle "$b/bench_bitshuffle" --runs 21 --threads 8
