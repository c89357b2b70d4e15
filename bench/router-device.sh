#!/usr/bin/env bash
# bench/router-device.sh BUNDLE — rtomo-router against fan-out (issue 16),
# from a bundle made by shared/tools/gpu-bundle of rtomod, rtomo-router,
# rtomo-push and rtomoctl.  Three rtomod on this host each reconstruct a
# third of the detector's rows (one slice in each third, so that ingest and
# not the back-projection is measured); one scan of SIZE x SIZE uint16
# frames (ANGLES projections, 4 darks, 4 flats) is pushed
#   - through the router (the camera sends each frame once, every daemon
#     gets its rows), then
#   - fanned out by the sender (every daemon gets every whole frame),
# A B A B.  Printed per run: the sender's rate (rtomo-push's summary line),
# the bytes each daemon received (its status) and the router's counters.
# Environment: SIZE (2048), ANGLES (1024), BACKEND (cuda), CONNECTIONS (4),
# BASE_PORT (5600).  JSON replies and a log go to $OUT.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
size=${SIZE:-2048}
angles=${ANGLES:-1024}
backend=${BACKEND:-cuda}
connections=${CONNECTIONS:-4}
port=${BASE_PORT:-5600}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64"
export RTOMO_CACHE_DIR=/tmp/rtomo-cache
mkdir -p "$RTOMO_CACHE_DIR"
b=$bundle/bin
log=$out/router.log
: > "$log"

third=$((size / 3))
first=(0 "$third" $((2 * third)))
count=("$third" "$third" $((size - 2 * third)))
ingest=() control=() pids=()
for k in 0 1 2; do
  p=$((port + 10 * k))
  ingest[k]=tcp://127.0.0.1:$p
  control[k]=tcp://127.0.0.1:$((p + 2))
done
router_in=tcp://127.0.0.1:$((port + 50))
router_ctl=tcp://127.0.0.1:$((port + 51))
slices="${first[0]},${first[1]},${first[2]}"

stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  wait 2>/dev/null
}
trap stop_all EXIT

# Start the three daemons and wait until each answers.
start_daemons() {
  pids=()
  for k in 0 1 2; do
    p=$((port + 10 * k))
    "$b/rtomod" --backend "$backend" --ingest "${ingest[k]}" \
      --publish "tcp://127.0.0.1:$((p + 1))" --control "${control[k]}" \
      --log-level warn \
      --set "reconstruction.rows={\"first\": ${first[k]}, \"count\": ${count[k]}}" \
      >> "$log" 2>&1 &
    pids+=($!)
  done
  for k in 0 1 2; do
    for _ in $(seq 100); do
      "$b/rtomoctl" --control "${control[k]}" ping > /dev/null 2>&1 && break
      sleep 0.2
    done
  done
}

push() {   # push NAME ARGS...: one scan, the sender's summary and the bytes
  local name=$1; shift
  echo "== $name" | tee -a "$log"
  timeout 300 "$b/rtomo-push" --size "$size" --height "$size" \
    --angles "$angles" --darks 4 --flats 4 --slices "$slices" \
    --connections "$connections" --rate 0 --quiet --scan "$name" "$@" \
    > "$out/$name.push" 2>&1
  echo "exit $?" >> "$out/$name.push"
  cat "$out/$name.push" >> "$log"
  tail -n 3 "$out/$name.push"
  for k in 0 1 2; do
    "$b/rtomoctl" --control "${control[k]}" status > "$out/$name-daemon$k.json" 2>&1
  done
}

nvidia-smi --query-gpu=index,name --format=csv 2> /dev/null | tee -a "$log"
echo "host cores: $(nproc); detector ${size}x${size} uint16, $angles" \
  "projections, rows ${count[*]}" | tee -a "$log"
start_daemons
targets=()
for k in 0 1 2; do
  targets+=(--daemon "${ingest[k]}=${first[k]}:${count[k]}")
done
"$b/rtomo-router" --ingest "$router_in" --control "$router_ctl" \
  "${targets[@]}" >> "$log" 2>&1 &
pids+=($!)
sleep 1
fanout="${ingest[0]},${ingest[1]},${ingest[2]}"
controls="${control[0]},${control[1]},${control[2]}"
for round in 1 2; do
  push "router-$round" --ingest "$router_in" --control "${control[0]}"
  "$b/rtomoctl" --control "$router_ctl" request '{"cmd": "status"}' \
    > "$out/router-$round-router.json" 2>&1
  push "fanout-$round" --fanout "$fanout" --control "$controls"
done
echo "== the router's last status" | tee -a "$log"
tee -a "$log" < "$out/router-2-router.json"
echo "== each daemon's status after the last run: $out/fanout-2-daemon*.json"
