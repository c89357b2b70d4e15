#!/usr/bin/env bash
# bench/iterative-device.sh BUNDLE — the iterative engine on one GPU (issue
# 14), from a bundle made by shared/tools/gpu-bundle (bin/, lib/), every
# figure beside its baselines from the same run:
#   - bench-fbp: the FBP engine's back-projectors (autotuned, ALU,
#     texture) on 64 slices of 2048^2 from 2048 projections;
#   - test_cuda_iter's bench mode on the same sizes: the matched pair's A
#     and A^T, the unmatched ray-driven projector, one CGLS iteration;
#   - rtomod end to end, 2048 projections of 2048x2048 uint16, 64 slices
#     over 4 connections: FBP alone, then CGLS and SIRT of 5 iterations
#     after it (the tail, scan_end -> scan_complete, less FBP's is the
#     solve's).
# The log goes to $OUT/iterative.log; the tables are printed.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/iterative.log
step_lines=${step_lines:-8}
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
step fbp-backprojectors "$b/bench-fbp" --sizes 2048 --slices 64 \
  --kernels auto,alu,texture --spp 1 --precisions float --interps linear
export RTOMO_ITER_BENCH=2048,64,2048
step_lines=6 step matched-pair "$b/test_cuda_iter"
unset RTOMO_ITER_BENCH
for method in fbp cgls sirt; do
  step "daemon-$method" "$b/bench_daemon_scan" --rtomod "$b/rtomod" \
    --backend cuda --devices 0 --connections 4 --slices 64 \
    --arg --set --arg "reconstruction.method=$method" \
    --arg --set --arg reconstruction.iterations=5 \
    --json "$out/daemon-$method.json"
done
