#!/bin/sh
# bench/sbdx-device.sh BUNDLE — one full SBDX session on the GPU machine:
# the GPU tests (against the CPU backend), bench-sbdx on the reference
# configuration (all ratio ranges, x-pass tuning sweep), the pipeline with
# a single host copy thread and with 4, 8, 12 and 16 (200 frames each), a
# kernel profile of one frame, and (with
# SBDX_MEMCHECK=1) the pipeline test under compute-sanitizer.  BUNDLE is a
# folder made by /work/shared/tools/gpu-bundle holding test_cuda_sbdx_host,
# test_cuda_sbdx and bench-sbdx.  Logs and JSON go to $OUT (or /tmp/sbdx-out); a summary
# is printed last.
#   sh BUNDLE/sbdx-device.sh BUNDLE [bench options...]
set -u
bundle=${1:?usage: sbdx-device.sh BUNDLE [bench options]}
shift
out=${OUT:-/tmp/sbdx-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
bin=$bundle/bin

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,pcie.link.gen.current,pcie.link.width.current,memory.total \
  --format=csv > "$out/gpu.txt" 2>&1
echo "cores: $(nproc)" >> "$out/gpu.txt"

echo "== host replay test"
timeout 60 "$bin/test_cuda_sbdx_host" > "$out/test_host.log" 2>&1
echo "rc=$?" >> "$out/test_host.log"

echo "== device test"
CK_VERBOSITY=verbose timeout 60 "$bin/test_cuda_sbdx" > "$out/test.log" 2>&1
echo "rc=$?" >> "$out/test.log"

echo "== bench"
timeout 90 "$bin/bench-sbdx" --tune --frames 40 --detector-frames 1 --json "$out/bench.json" "$@" \
  > "$out/bench.txt" 2>&1
echo "rc=$?" >> "$out/bench.txt"

echo "== host copy threads: 1"
timeout 20 "$bin/bench-sbdx" --ranges 0.6-2.25 --frames 30 --detector-frames 0 \
  --copy-threads 1 --json "$out/bench_copy1.json" > "$out/bench_copy1.txt" 2>&1
echo "rc=$?" >> "$out/bench_copy1.txt"

echo "== host copy threads sweep (200 frames)"
for t in 4 8 12 16; do
  timeout 40 "$bin/bench-sbdx" --ranges 0.6-2.25,1.0-1.5 --frames 200 \
    --detector-frames 0 --copy-threads "$t" > "$out/bench_copy_sweep_$t.txt" 2>&1
  echo "copy threads $t:" >> "$out/bench_copy_sweep.txt"
  grep -E '^n ' "$out/bench_copy_sweep_$t.txt" >> "$out/bench_copy_sweep.txt"
  rm -f "$out/bench_copy_sweep_$t.txt"
done

echo "== kernel profile (first frame's x-pass, y-pass, composite)"
if command -v ncu >/dev/null 2>&1; then
  timeout 40 ncu --section SpeedOfLight --section Occupancy --section LaunchStats \
    -k regex:"xpass|ypass|composite" -c 3 \
    "$bin/bench-sbdx" --ranges 0.6-2.25 --frames 2 --detector-frames 0 \
    > "$out/ncu.txt" 2>&1
  echo "rc=$?" >> "$out/ncu.txt"
else
  echo "ncu not found" > "$out/ncu.txt"
fi

echo "== pipeline case under compute-sanitizer"
if [ -n "${SBDX_MEMCHECK:-}" ] && command -v compute-sanitizer >/dev/null 2>&1; then
  CK_RUN_CASE=pipeline timeout 30 compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$bin/test_cuda_sbdx" > "$out/memcheck.log" 2>&1
  echo "rc=$?" >> "$out/memcheck.log"
else
  echo "memcheck skipped (set SBDX_MEMCHECK=1; needs compute-sanitizer)" > "$out/memcheck.log"
fi

echo "===================== summary"
cat "$out/gpu.txt"
tail -n 2 "$out/test_host.log"
awk '/max relative error/ { if ($NF + 0 > worst) worst = $NF + 0; n++ }
     END { printf "plane comparisons with the CPU: %d, worst max relative error %.2e\n", n, worst }' "$out/test.log"
awk '/near-ties/ { for (i = 1; i < NF; i++) if ($i == "at") ties += $(i + 1); n++ }
     END { printf "composite comparisons: %d, depth differences (all near-ties): %d\n", n, ties }' "$out/test.log"
grep -E "two devices" "$out/test.log" | head -n 1
grep -E "^[0-9]+%|:F:|:E:|rc=" "$out/test.log" | head -n 20
grep -E "ERROR SUMMARY|rc=|Checks" "$out/memcheck.log" | head -n 5
grep -E "xpass_kernel|ypass_kernel|composite_kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|rc=" "$out/ncu.txt" | head -n 24
cat "$out/bench.txt"
tail -n 3 "$out/bench_copy1.txt"
cat "$out/bench_copy_sweep.txt"
