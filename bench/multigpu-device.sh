#!/usr/bin/env bash
# bench/multigpu-device.sh BUNDLE — the runs that need two GPUs (nvidia-h200-x2),
# from a bundle made by shared/tools/gpu-bundle: every GPU test program
# (their multi-device cases run when two GPUs are visible), then one and two
# GPUs side by side in the same run: the FBP engine's 2048^3 end to end, the
# SBDX engine's reference stream, a 2048^3 scan through rtomod, the SBDX
# stream through rtomod (and at 30 frames/s over one and two connections),
# a continuous tomography stream; and rtomod's ingest rate.  A log and a tarball of
# the JSON results go to $OUT; the tables are printed.
set -u
bundle=${1:-.gpu}
out=${OUT:-/tmp/rtomo-out}
json=$(mktemp -d)
mkdir -p "$out"
export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64"
export RTOMO_CACHE_DIR=/tmp/rtomo-cache NCCL_NVLS_ENABLE=0
mkdir -p "$RTOMO_CACHE_DIR"
b=$bundle/bin
log=$out/multigpu.log
: > "$log"
step() {   # step NAME SECONDS COMMAND...: run, keep everything, print the tail
  local name=$1 limit=$2; shift 2
  echo "== $name: $*" | tee -a "$log"
  timeout "$limit" "$@" > "$json/$name.out" 2>&1
  local rc=$?
  cat "$json/$name.out" >> "$log"
  sed -n '/^{/q;p' "$json/$name.out" | grep -v '^ *[0-9]*%\?$' | tail -n 14
  echo "exit $rc" | tee -a "$log"
}
nvidia-smi --query-gpu=index,name,clocks.sm,memory.total --format=csv | tee -a "$log"
nvidia-smi topo -m >> "$log" 2>&1
for t in test_cuda_fbp_bp test_cuda_fbp_filter test_cuda_fbp_pipeline test_cuda_sbdx; do
  step "$t" 200 "$b/$t"
done
for d in 0 0,1; do
  step "fbp-e2e-$d" 150 "$b/bench-fbp" --sizes 2048 --kernels auto \
    --precisions float --interps linear --no-bp --e2e 2048 --devices "$d" \
    --json "$json/fbp-e2e-$d.json"
  step "sbdx-$d" 120 "$b/bench-sbdx" --frames 40 --detector-frames 1 \
    --ranges 0.6-2.25 --devices "$d" --json "$json/sbdx-$d.json"
done
step daemon-scan 240 "$b/bench_daemon_scan" --rtomod "$b/rtomod" --backend cuda \
  --devices 0 --devices 0,1 --json "$json/daemon-scan.json"
step daemon-sbdx30 120 "$b/bench_daemon_stream" --rtomod "$b/rtomod" \
  --backend cuda --devices 0 --rate 30 --frames 300 --json "$json/daemon-sbdx30.json"
step daemon-sbdx30-2conn 120 "$b/bench_daemon_stream" --rtomod "$b/rtomod" \
  --backend cuda --devices 0 --rate 30 --frames 300 --connections 2 \
  --json "$json/daemon-sbdx30-2conn.json"
step daemon-continuous 120 "$b/bench_daemon_stream" --rtomod "$b/rtomod" \
  --backend cuda --devices 0 --mode continuous --projections 1800 --every 180 \
  --slices 64 --rate 600 --frames 3600 --json "$json/daemon-continuous.json"
for d in 0 0,1; do
  step "daemon-sbdxmax-$d" 120 "$b/bench_daemon_stream" --rtomod "$b/rtomod" \
    --backend cuda --devices "$d" --rate 0 --frames 300 --connections 2 \
    --json "$json/daemon-sbdxmax-$d.json"
done
step ingest 120 "$b/bench_ingest" --rtomod "$b/rtomod" --backend cuda \
  --frames 1000 --slices 8 --connections 1,2,4 --json "$json/ingest.json" \
  --arg --set --arg ingest.io_threads=4
tar -C "$json" -czf "$out/multigpu-json.tgz" .
