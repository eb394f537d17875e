#!/bin/bash
# radard on the GPU machine: CUDA backend, simulator, default geometry,
# 60 s at 8 ms frames (chunk period 500 us) and 60 s at 1 ms frames (62.5 us),
# with the appliance's real-time set-up (SCHED_FIFO, mlockall, one core), and
# the hot-loop allocation test with CUDA required. Copied into the device
# bundle by prepare.sh's caller; figures go to docs/performance.md.
# Usage there: bash .device-bin/<bundle>/gpu-run.sh   (OUT: where logs go)
set -u
B=$(dirname "$0")
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
echo "== bundle commit $(cat "$B/COMMIT" 2>/dev/null); $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
mkdir -p /tmp/culibs
for lib in nvrtc cufft; do
  if ! ldconfig -p | grep -q "lib$lib.so "; then
    f=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu /opt -xdev -name "lib$lib.so.*" 2>/dev/null | grep -v builtins | sort | head -1)
    [ -n "$f" ] && ln -sf "$f" /tmp/culibs/lib$lib.so && export LD_LIBRARY_PATH=$(dirname "$f"):${LD_LIBRARY_PATH:-}
  fi
done
export LD_LIBRARY_PATH=/tmp/culibs:${LD_LIBRARY_PATH:-}
echo "== hot loop (allocations, CUDA required)"
RADAR_REQUIRE_CUDA=1 "$B/radard_hot_loop_alloc" 2>&1 | tee "$OUT/hot_loop.log" | tail -6
run() { # name, frames, radard args...
  local name=$1 frames=$2; shift 2
  echo "== radard $name: $frames frames $*"
  "$B/radard" --backend cuda --frames "$frames" --print-every 0 --config "$B/gpu-run.toml" \
    --stats-json "$OUT/radard-$name.json" "$@" > "$OUT/radard-$name.log" 2>&1
  echo "rc=$?"
  grep -E "^radard: (backend|chunk|rt|ring)|^summary|DEADLINE-MISS|NOT-PROCESSED" "$OUT/radard-$name.log" | head -40
  grep -E "^status" "$OUT/radard-$name.log" | tail -2
}
run 8ms 7500 --chunk-period-us 500
run 1ms 60000 --chunk-period-ns 62500
