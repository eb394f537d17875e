#!/bin/bash
# Device run for the CUDA backend: environment, correctness tests (with
# RADAR_REQUIRE_CUDA=1, so nothing can skip), then the benchmark REPS times.
# Usage on the GPU machine: bash .device-bin/cuda/run.sh [radar-dsp bench args...]
# (prepare.sh builds the bundle here). Logs and JSON go to $OUT.
set -u
B=$(dirname "$0")
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{
echo "== bundle commit $(cat "$B/COMMIT" 2>/dev/null)"
echo "== device"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
echo "== ldconfig"; ldconfig -p | grep -E "libcuda\.|libnvrtc|libcufft" 
echo "== files"; find /usr/local /usr/lib /opt -xdev \( -name 'libnvrtc.so*' -o -name 'libcufft.so*' -o -name 'libcuda.so*' \) 2>/dev/null | grep -v stubs | head -30
} > "$OUT/env.txt" 2>&1
head -3 "$OUT/env.txt"
# cudarc (cuda-12060 names) tries libnvrtc.so, .so.12, .so.11 ...; CUDA 13 ships .so.13:
# give it unversioned links to whatever is installed.
mkdir -p /tmp/culibs
for lib in nvrtc cufft; do
  if ! ldconfig -p | grep -q "lib$lib.so "; then
    f=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu /opt -xdev -name "lib$lib.so.*" 2>/dev/null | grep -v builtins | sort | head -1)
    if [ -n "$f" ]; then ln -sf "$f" /tmp/culibs/lib$lib.so; echo "linked lib$lib.so -> $f"; export LD_LIBRARY_PATH=$(dirname "$f"):${LD_LIBRARY_PATH:-}; fi
  fi
done
export LD_LIBRARY_PATH=/tmp/culibs:${LD_LIBRARY_PATH:-}
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
export RADAR_REQUIRE_CUDA=1
echo "== unit tests (cuda, select)"
"$B/radar_dsp_unit" cuda select 2>&1 | tee "$OUT/unit.log" | grep -E "^test |test result"
echo "== cuda vs cpu"
"$B/cuda_matches_cpu" --test-threads=1 --nocapture > "$OUT/tests.log" 2>&1; echo "tests rc=$?" | tee -a "$OUT/tests.log"
grep -E "^test |test result|matched|panicked|Worst|^[a-z0-9-]+: Worst" "$OUT/tests.log" | cut -c1-400 | head -40
for rep in ${REPS:-1 2}; do
  echo "== bench run $rep"
  "$B/radar-dsp" bench --backend cuda --json "$OUT/bench-$rep.json" "$@" > "$OUT/bench-$rep.log" 2>&1; echo "bench rc=$?" >> "$OUT/bench-$rep.log"
  cat "$OUT/bench-$rep.log"
done
if [ -n "${NCU:-}" ] && command -v ncu >/dev/null; then
  echo "== ncu kernel durations"
  ncu --clock-control none --metrics gpu__time_duration.sum -c 45 "$B/radar-dsp" bench --backend cuda --frames 2 --warmup 0 --slots 1 --stage-reps 1 > "$OUT/ncu.log" 2>&1
  grep -E "^  [a-zA-Z_0-9]+.*\(|gpu__time_duration" "$OUT/ncu.log" | paste - - | awk '{print $1, $(NF)}' | tail -30
fi
