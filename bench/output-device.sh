#!/usr/bin/env bash
# bench/output-device.sh BUNDLE — how fast rtomod's HDF5 sink writes
# volumes on a GPU machine, against the disk's own rate there (issue 13).
#   1. the disk: dd of 8 GiB with fdatasync into the output directory;
#   2. the 2048^3 scan (2048 projections of 2048x2048 uint16, all 2048
#      slices: 32 GiB of float32) through rtomod with
#      output.hdf5.directory set, once with when_full = drop (the default)
#      and once with block, beside the same scan without output; rtomod's
#      bytes handed to the file system (/proc/PID/io wchar) are sampled
#      every 0.2 s, and a sync after the scan says how long the rest took
#      to reach the disk.
# Results (a table and the samples) go to $OUT.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
log=$out/output.log
step_lines=4
. "$(dirname "$0")/device-steps.sh"
dir=${RTOMO_OUTPUT_DIR:-/tmp/rtomo-h5}
mkdir -p "$dir"
df -h "$dir" | tee -a "$log"
echo "== disk: dd 8 GiB, fdatasync" | tee -a "$log"
dd if=/dev/zero of="$dir/dd.bin" bs=16M count=512 conv=fdatasync 2>&1 | tail -1 | tee -a "$log"
rm -f "$dir/dd.bin"
scan="$b/bench_daemon_scan --rtomod $b/rtomod --backend cuda --devices 0 --connections 4"

# Sample rtomod's wchar while `$@` runs; prints the peak 1-s rate and the
# total, GB/s and GB.
sampled() {   # sampled NAME COMMAND...
  local name=$1; shift
  "$@" > "$out/$name.out" 2>&1 &
  local runner=$! pid=""
  : > "$out/$name.io"
  while kill -0 $runner 2>/dev/null; do
    [ -z "$pid" ] && pid=$(pgrep -f "^$b/rtomod " | head -1)
    if [ -n "$pid" ] && [ -r "/proc/$pid/io" ]; then
      echo "$(date +%s.%N) $(awk '/^wchar/ {print $2}' /proc/$pid/io)" >> "$out/$name.io"
    fi
    sleep 0.2
  done
  wait $runner
  local t0=$(date +%s.%N)
  sync
  local t1=$(date +%s.%N)
  echo "== $name" | tee -a "$log"
  sed -n "/^devices/,+1p" "$out/$name.out" | tee -a "$log"
  grep -h "event output_file\\|event output_dropped" "$out/$name.out" | cut -c1-220 | tee -a "$log"
  /usr/bin/python3 - "$out/$name.io" "$t0" "$t1" <<'PY' | tee -a "$log"
import sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 2]
t0, t1 = float(sys.argv[2]), float(sys.argv[3])
if len(rows) < 2:
    print("no samples"); sys.exit()
best = 0.0
for i in range(len(rows)):
    for j in range(i + 1, len(rows)):
        if rows[j][0] - rows[i][0] >= 1.0:
            best = max(best, (rows[j][1] - rows[i][1]) / (rows[j][0] - rows[i][0]))
            break
total = rows[-1][1] - rows[0][1]
moving = [r for k, r in enumerate(rows[1:]) if r[1] > rows[k][1]]
span = moving[-1][0] - moving[0][0] if len(moving) > 1 else float("nan")
print("wchar total %.2f GB over %.2f s of writing (%.2f GB/s), best 1-s "
      "%.2f GB/s; sync after the scan %.2f s" % (total / 1e9, span,
      total / 1e9 / span if span == span and span > 0 else float("nan"),
      best / 1e9, t1 - t0))
PY
  ls -la "$dir" | tail -3 | tee -a "$log"
  rm -f "$dir"/*.h5
}
sampled none $scan --json "$out/none.json"
sampled drop $scan --arg --set --arg "output.hdf5.directory=$dir" --json "$out/drop.json"
sampled block $scan --arg --set --arg "output.hdf5.directory=$dir" \
  --arg --set --arg output.hdf5.when_full=block --json "$out/block.json"
