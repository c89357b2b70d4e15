#!/bin/sh
# bench/fbp-device.sh — one device run for the CUDA FBP engine: the GPU
# tests against the CPU backend, then the benchmark, with the GPU's clocks
# sampled throughout.  Logs and results go to $OUT (at most 8 files: the
# device tool returns no more); a summary is printed last.
#
#   bench/fbp-device.sh BUNDLE STEP...
#     BUNDLE  a directory made by gpu-bundle (bin/, lib/)
#     STEP    tests        the three test_cuda_fbp programs
#             sanitize     test_cuda_fbp_pipeline under compute-sanitizer
#                          (at most $SANITIZE_SECONDS, default 60)
#             sass         the ALU kernel's inner loop, disassembled
#             bench-quick  bench-fbp at 2048 only (all modes, full path,
#                          the 2048^3 end-to-end run)
#             bench        the same at 512, 1024, 2048 and 4096
#   Extra bench-fbp options can be passed in $BENCH_ARGS.
set -u
bundle=$1
shift
out=${OUT:-/tmp/fbp-device}
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RTOMO_CACHE_DIR=/tmp/rtomo-cache
mkdir -p "$RTOMO_CACHE_DIR"
summary="$out/summary.txt"
extra="$out/extra.log"
: > "$summary"

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu \
  --format=csv >> "$summary" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,utilization.gpu \
  --format=csv,noheader -lms 500 > "$out/clocks.csv" 2>/dev/null &
smi=$!

run_bench() {
  # shellcheck disable=SC2086
  timeout 420 "$bundle/bin/bench-fbp" "$@" ${BENCH_ARGS:-} >> "$out/bench.log" 2>&1
  echo "bench-fbp $*: exit $?" >> "$summary"
}

for step in "$@"; do
  t0=$(date +%s)
  case $step in
    tests)
      for t in test_cuda_fbp_bp test_cuda_fbp_filter test_cuda_fbp_pipeline; do
        timeout 300 "$bundle/bin/$t" > "$out/$t.log" 2>&1
        echo "$t: exit $? $(grep -E 'Checks' "$out/$t.log" | tail -1)" >> "$summary"
      done ;;
    sanitize)
      # Bounded in time: errors are printed as they are found.
      timeout "${SANITIZE_SECONDS:-60}" compute-sanitizer --tool memcheck --print-limit 20 \
        "$bundle/bin/test_cuda_fbp_pipeline" >> "$extra" 2>&1
      echo "sanitize: exit $? $(grep -E 'ERROR SUMMARY' "$extra" | tail -1)," \
        "$(grep -c -E 'Invalid|out of bounds' "$extra") invalid accesses" >> "$summary" ;;
    sass)
      cuobjdump -sass "$bundle/bin/bench-fbp" 2>/dev/null |
        awk '/Function : _Z10alu_kernelILi1ELb0ELi64ELb1E/ {p = 1} p && /EXIT/ {n++} p {print} n > 1 {exit}' |
        head -600 >> "$extra" ;;
    bench-quick)
      run_bench --sizes 2048 --repeats 3 --full --e2e 2048 --json "$out/bench.json" ;;
    bench)
      run_bench --sizes 512,1024,2048,4096 --repeats 3 --full --e2e 2048 \
        --json "$out/bench.json" ;;
    *)
      echo "unknown step $step" >> "$summary" ;;
  esac
  echo "step $step: $(( $(date +%s) - t0 )) s" >> "$summary"
done

kill "$smi" 2>/dev/null
echo "SM clock (MHz) during the run: $(cut -d, -f2 "$out/clocks.csv" | tr -dc '0-9\n' | sort -n | uniq -c | sort -rn | head -3 | tr '\n' ' ')" >> "$summary"
echo "===== bench (tail)"
tail -n 80 "$out/bench.log" 2>/dev/null
echo "===== test failures"
grep -h -E ":[EF]:" "$out"/test_cuda_fbp_*.log 2>/dev/null | head -40
echo "===== summary"
cat "$summary"
