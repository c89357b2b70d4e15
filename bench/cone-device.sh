#!/usr/bin/env bash
# bench/cone-device.sh BUNDLE — cone-beam FDK through rtomod on one GPU
# (issue 15): 1024^3 voxels from 1024 projections of 1024x1024 uint16 (one
# dark, one flat), from a bundle made by shared/tools/gpu-bundle with
# rtomod, bench_daemon_cone and test_cuda_daemon_cone in bin/.
#   - test_cuda_daemon_cone: the daemon's GPU slices against the CPU
#     engine's FDK (correctness first; exit 77 means no GPU);
#   - the scan sent as fast as rtomod takes it: how fast the whole chain
#     (normalise, filter, back-project, read out, publish) goes; before
#     it, the engine's back-projection alone on the wall clock
#     (engine_bp: 256 filtered projections into the 1024^3 volume);
#   - the scan at a camera's pace, 50 and 25 frames/s: the reconstruction
#     keeps up with the acquisition, and tail_s / latency_s are what is
#     left after the last frame (the issue asks <= 2 s);
#   - once more at 50 frames/s with the 4 GB of slices received by the
#     benchmark over loopback (publication to a subscriber included).
# Figures per run: tail_s (scan_end sent -> scan_complete), the daemon's
# ready_s (last input -> last slice in host memory) and latency_s (-> last
# slice published), bp_GU/s (the daemon's: voxels x projections / the
# engine's filtering and back-projection time), engine_bp (the
# back-projection alone on the wall clock: the figure the issue asks
# for), scan_GU/s (voxels x projections / first frame -> scan_complete:
# the whole chain).
# JSON and a log go to $OUT.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/cone.log
step_lines=3
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
export RTOMOD="$b/rtomod"
step_lines=12 step test-cuda-daemon-cone "$b/test_cuda_daemon_cone"
common=(--rtomod "$b/rtomod" --backend cuda --devices 0 --size 1024
        --projections 1024)
step cone1024-fast "$b/bench_daemon_cone" "${common[@]}" \
  --json "$out/cone1024-fast.json"
for rate in 50 25; do
  step "cone1024-rate$rate" "$b/bench_daemon_cone" "${common[@]}" \
    --rate "$rate" --engine-bp 0 --json "$out/cone1024-rate$rate.json"
done
step cone1024-rate50-received "$b/bench_daemon_cone" "${common[@]}" \
  --rate 50 --receive-slices --engine-bp 0 \
  --json "$out/cone1024-rate50-received.json"
echo "results in $out (cone1024-*.json, cone.log)"
