#!/usr/bin/env bash
# bench/chain-device.sh BUNDLE — the cost of the beamline processing chain
# (issue 12) on one GPU, from a bundle made by shared/tools/gpu-bundle.
# The 2048^3 scan (2048 projections of 2048x2048 uint16, all 2048 slices,
# 4 connections) through rtomod:
#   - plain FBP (the baseline, measured in the same run, A B A B);
#   - the whole chain: phase retrieval (20 keV, 0.5 m, 1.3 um pixels,
#     delta/beta 500: a reach of about 27 pixels, so each 2048x2048 frame
#     is padded to about 2500x2500 for the 2-D transform), ring removal and
#     "axis": "auto";
#   - each step alone.
# Ring removal back-projects after the scan (its correction needs the
# whole sinogram), so the chain is compared with plain FBP both ways:
# streaming (the default) and after the scan.
# With "quick" as the second argument only plain FBP after the scan, ring
# removal alone and the whole chain run, A B C A B C (for a short device
# session).  JSON and a log go to $OUT; the tables are printed.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/chain.log
step_lines=4
. "$(dirname "$0")/device-steps.sh"
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
scan="$b/bench_daemon_scan --rtomod $b/rtomod --backend cuda --devices 0 --connections 4"
phase="--arg --set --arg phase.delta_beta=500 --arg --set --arg phase.energy_kev=20 --arg --set --arg phase.distance_m=0.5 --arg --set --arg phase.pixel_m=1.3e-6"
rings="--arg --set --arg reconstruction.rings=column_mean"
after="--arg --set --arg reconstruction.streaming=false"
if [ "${2:-}" = quick ]; then
  for round in 1 2; do
    # shellcheck disable=SC2086
    step "plain-after-$round" $scan $after --json "$out/plain-after-$round.json"
    # shellcheck disable=SC2086
    step "rings-$round" $scan $rings --json "$out/rings-$round.json"
    # shellcheck disable=SC2086
    step "chain-$round" $scan $phase $rings --axis-auto \
      --json "$out/chain-$round.json"
  done
else
for round in 1 2; do
  # shellcheck disable=SC2086
  step "plain-$round" $scan --json "$out/plain-$round.json"
  # shellcheck disable=SC2086
  step "plain-after-$round" $scan $after --json "$out/plain-after-$round.json"
  # shellcheck disable=SC2086
  step "chain-$round" $scan $phase $rings --axis-auto \
    --json "$out/chain-$round.json"
done
# shellcheck disable=SC2086
step phase $scan $phase --json "$out/phase.json"
# shellcheck disable=SC2086
step rings $scan $rings --json "$out/rings.json"
# shellcheck disable=SC2086
step axis $scan --axis-auto --json "$out/axis.json"
fi
echo "== summary: ingest_s total_s tail_s ready_s to_ready_s" | tee -a "$log"
for f in "$out"/*.json; do
  /usr/bin/python3 - "$f" <<'PY' | tee -a "$log"
import json, sys, os
d = json.load(open(sys.argv[1]))
for r in d.get("runs", [d]):
    print("%-16s" % os.path.basename(sys.argv[1])[:-5] + "".join(
        " %6.2f" % r.get(k, float("nan")) for k in
        ("ingest_s", "total_s", "tail_s", "ready_s", "to_ready_s")))
PY
done
