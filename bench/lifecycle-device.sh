#!/usr/bin/env bash
# bench/lifecycle-device.sh BUNDLE BASELINE — what the hardened scan
# lifecycle costs on a GPU, against the code before it in the same run.
# BUNDLE holds this tree's rtomod, bench programs and bench-sbdx
# (shared/tools/gpu-bundle); BASELINE the rtomod and bench-sbdx of the
# commit before the hardening, built the same way.  Each measurement runs
# for the baseline and the new code in turn, twice (ABAB), with the same
# bench client:
#   - bench-sbdx, reference configuration, two ratio ranges, 200 frames
#     (the SBDX kernels now sum the plane responses exactly and mark "no
#     plane" in the depth map);
#   - the SBDX reference stream through rtomod at 30 frames/s, 4 connections;
#   - the SBDX stream as fast as sent, 4 connections;
#   - a 2048^3 scan through rtomod over 4 connections (bench_daemon_scan).
# Logs and JSON go to $OUT; the tables are printed.
set -u
bundle=${1:-.gpu}
baseline=${2:-.gpu-baseline}
out=${OUT:-/tmp/rtomo-out}
log=$out/lifecycle.log
step_lines=8
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
echo "cores: $(nproc)" | tee -a "$log"
for round in 1 2; do
  for code in baseline new; do
    if [ "$code" = new ]; then dir=$bundle; else dir=$baseline; fi
    step "sbdx-engine-$code-$round" "$dir/bin/bench-sbdx" \
      --ranges 0.6-2.25,1.0-1.5 --frames 200 --detector-frames 0 \
      --json "$out/sbdx-engine-$code-$round.json"
    step "sbdx30-$code-$round" "$b/bench_daemon_stream" \
      --rtomod "$dir/bin/rtomod" --backend cuda --rate 30 --frames 300 \
      --connections 4 --json "$out/sbdx30-$code-$round.json"
    step "sbdxmax-$code-$round" "$b/bench_daemon_stream" \
      --rtomod "$dir/bin/rtomod" --backend cuda --rate 0 --frames 300 \
      --connections 4 --json "$out/sbdxmax-$code-$round.json"
    step "scan2048-$code-$round" "$b/bench_daemon_scan" \
      --rtomod "$dir/bin/rtomod" --backend cuda --devices 0 \
      --json "$out/scan2048-$code-$round.json"
  done
done
