#!/bin/bash
# Device run for the CUDA backend: environment, correctness tests (with
# RADAR_REQUIRE_CUDA=1, so nothing can skip), then the benchmark REPS times
# with the default launch options, then once per entry of VARIANTS (launch
# options for RADAR_CUDA_OPTIONS, e.g. VARIANTS="pdl=off select=kernel"),
# then once with the bundle in BASE (another prepare.sh bundle, for a
# comparison on the same machine), then once per entry of EXP_VARIANTS with
# the bundle in EXP (an experimental build). SMI_MS=50 logs nvidia-smi
# (clocks, PCIe link) every 50 ms during the benchmarks for correlate.py.
# RUN_PREFIX runs each benchmark under a command, e.g. "chrt -f 80 taskset
# -c 3" for the appliance loop's scheduling (SCHED_FIFO, one core).
# RADARD_FRAMES=N (default 0: skipped) runs radard itself on the simulator
# with the CUDA backend for N frames at the real 8 ms rate, once in
# chunk-streamed mode and once with --whole-frames, and checks that the
# built-in scene's four targets are reported in every frame.
# Usage on the GPU machine: bash .device-bin/cuda/run.sh [radar-dsp bench args...]
# (prepare.sh builds the bundle here). The logs and JSON files are packed
# into $OUT/cuda-run.tgz (the device tool returns at most 8 files); the
# summary table is printed last.
set -u
B=$(dirname "$0")
OUT=${OUT:-/tmp/out}
LOG=$(mktemp -d /tmp/cuda-run.XXXXXX)
mkdir -p "$OUT"
{
echo "== bundle commit $(cat "$B/COMMIT" 2>/dev/null)"
echo "== device"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
echo "== ldconfig"; ldconfig -p | grep -E "libcuda\.|libnvrtc|libcufft"
echo "== files"; find /usr/local /usr/lib /opt -xdev \( -name 'libnvrtc.so*' -o -name 'libcufft.so*' -o -name 'libcuda.so*' \) 2>/dev/null | grep -v stubs | head -30
} > "$LOG/env.txt" 2>&1
head -3 "$LOG/env.txt"
. "$B/culibs.sh"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
export RADAR_REQUIRE_CUDA=1
pack() { tar czf "$OUT/cuda-run.tgz" -C "$LOG" . 2>/dev/null; }
trap pack EXIT
if [ -z "${SKIP_TESTS:-}" ]; then
  echo "== unit tests (cuda, select)"
  "$B/radar_dsp_unit" cuda select 2>&1 | tee "$LOG/unit.log" | grep -E "^test |test result"
  echo "== cuda vs cpu"
  "$B/cuda_matches_cpu" --test-threads=1 --nocapture > "$LOG/tests.log" 2>&1; echo "tests rc=$?" | tee -a "$LOG/tests.log"
  grep -E "^test |test result|matched|panicked|Worst|^[a-z0-9-]+: Worst|pdl |chunk-streamed" "$LOG/tests.log" | cut -c1-400 | head -40
  echo "== radard hot loop (allocations; CUDA chunk-streamed)"
  "$B/radard_hot_loop_alloc" > "$LOG/hot_loop.log" 2>&1; echo "hot loop rc=$?" | tee -a "$LOG/hot_loop.log"
  grep -E "allocations|skipped|FAILED|ok:" "$LOG/hot_loop.log"
fi
if [ "${RADARD_FRAMES:-0}" -gt 0 ]; then
  for mode in streamed whole; do
    extra=""; [ "$mode" = whole ] && extra="--whole-frames"
    echo "== radard, cuda backend, $mode, $RADARD_FRAMES frames at 8 ms"
    "$B/radard" --no-rt --backend cuda $extra --frames "$RADARD_FRAMES" --print-every 1 \
      --stats-json "$LOG/radard-$mode.json" > "$LOG/radard-$mode.log" 2>&1
    echo "radard rc=$?" | tee -a "$LOG/radard-$mode.log"
    grep -E "^radard: (backend|chunk)|^summary" "$LOG/radard-$mode.log"
    python3 "$B/radard_targets.py" "$LOG/radard-$mode.log" "$RADARD_FRAMES"
    python3 - "$LOG/radard-$mode.json" "$RADARD_FRAMES" "$mode" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
n, streamed = int(sys.argv[2]), sys.argv[3] == "streamed"
got = s["frames_streamed"]
ok = got >= n - 1 if streamed else got == 0
verdict = "PASS" if ok else "FAIL"
print(f"{verdict}: {got} of {n} frames finished from streamed chunks, {s['chunk_errors']} chunk errors")
PY
  done
fi
bench() { # name, bundle dir, options, extra args...
  local name=$1 dir=$2 opts=$3; shift 3
  RADAR_CUDA_OPTIONS=$opts ${RUN_PREFIX:-} "$dir/radar-dsp" bench --backend cuda --json "$LOG/bench-$name.json" "$@" > "$LOG/bench-$name.log" 2>&1
  echo "bench rc=$?" >> "$LOG/bench-$name.log"
}
if [ -n "${SMI_MS:-}" ]; then
  # The GPU's state during the benchmarks, to line up with slow frames
  # (correlate.py): SM clock, PCIe link, clock event reasons, load.
  # (correlate.py keys on all but the last two fields, which vary too finely.)
  q=timestamp,clocks.sm,pcie.link.gen.current,pcie.link.width.current
  nvidia-smi --help-query-gpu | grep -q clocks_event_reasons.active && q=$q,clocks_event_reasons.active
  q=$q,power.draw,utilization.gpu
  nvidia-smi --query-gpu=$q --format=csv,noheader -lms "$SMI_MS" > "$LOG/smi.csv" 2>&1 &
  SMI_PID=$!
fi
names=()
for rep in ${REPS:-1 2}; do
  echo "== bench run $rep (defaults)"
  bench "$rep" "$B" "" "$@"; names+=("$rep")
  cat "$LOG/bench-$rep.log"
done
for v in ${VARIANTS:-}; do
  n=$(echo "$v" | tr ',=' '-_')
  echo "== bench variant $v"
  bench "$n" "$B" "$v" "$@"; names+=("$n")
  grep -E "GPU graph, resident|end to end, mapped|rc=" "$LOG/bench-$n.log"
done
for v in ${EXP_VARIANTS:-}; do
  n=exp-$(echo "$v" | tr ',=' '-_')
  echo "== bench $EXP variant $v"
  bench "$n" "$EXP" "$v" "$@"; names+=("$n")
  grep -E "GPU graph|end to end, mapped|rc=" "$LOG/bench-$n.log"
done
if [ -n "${BASE:-}" ]; then
  echo "== bench base bundle $(cat "$BASE/COMMIT" 2>/dev/null)"
  bench base "$BASE" "" "$@"; names+=(base)
  grep -E "GPU graph, resident|end to end, mapped|rc=" "$LOG/bench-base.log"
fi
if [ -n "${SMI_PID:-}" ]; then kill "$SMI_PID"; wait "$SMI_PID" 2>/dev/null; fi
if [ -n "${NCU:-}" ] && command -v ncu >/dev/null; then
  # Per-kernel GPU time and DRAM/L2 traffic with warm caches. With one slot
  # and one frame, kernels 33-40 are a resident frame's graph, 41-48 a
  # mapped slot's, 49-56 a resident frame's again (8 kernels a frame).
  echo "== ncu (launches ${NCU_SKIP:-32}+${NCU_COUNT:-24})"
  timeout 240 ncu --clock-control none --cache-control none --launch-skip "${NCU_SKIP:-32}" --launch-count "${NCU_COUNT:-24}" \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum \
    "$B/radar-dsp" bench --backend cuda --frames 1 --warmup 0 --slots 1 --stage-reps 1 > "$LOG/ncu.log" 2>&1
  echo "ncu rc=$?"
  python3 "$B/ncu_table.py" "$LOG/ncu.log" | tee "$LOG/ncu-table.txt"
fi
if [ -d "$B/sass" ] && command -v cuobjdump >/dev/null; then
  for c in "$B"/sass/*.cubin; do cuobjdump -sass "$c" > "$LOG/$(basename "$c" .cubin).sass" 2>&1; done
  echo "== sass dumped: $(ls "$B"/sass)"
fi
{
echo "== summary (us): run | graph resident p50 p99 | gated p50 | mapped end-to-end p50 p99.9 | paced p50 p99.9 | chunk-streamed p50 p99.9, paced p50 p99.9 | stage p50s (resident)"
for n in "${names[@]}"; do
  python3 - "$LOG/bench-$n.json" "$n" <<'EOF' 2>/dev/null || echo "$n: no JSON"
import json, sys
r = json.load(open(sys.argv[1]))
g = r["gpu_graph_resident"]; e = r["end_to_end"]; pc = r.get("end_to_end_paced") or {}
gg = (r.get("gpu_graph_resident_gated") or {}).get("p50_us", float("nan"))
st = " ".join(f'{s["p50_us"]:.1f}' for s in r["stages_resident"])
gap = r.get("launch_gap") or {}
nan = float("nan")
sm = r.get("end_to_end_streamed") or {}; sp = r.get("end_to_end_streamed_paced") or {}
streamed = f'{sm.get("p50_us", nan):6.1f} {sm.get("p999_us", nan):6.1f}, {sp.get("p50_us", nan):6.1f} {sp.get("p999_us", nan):6.1f}'
print(f'{sys.argv[2]:<24} {g["p50_us"]:6.2f} {g["p99_us"]:6.2f} | {gg:6.2f} | {e["p50_us"]:6.1f} {e["p999_us"]:6.1f} | {pc.get("p50_us", nan):6.1f} {pc.get("p999_us", nan):6.1f} | {streamed} | {st} | gap {gap.get("per_boundary_us", float("nan")):.2f}/{gap.get("per_boundary_pdl_us") or float("nan"):.2f} | k={r.get("kernels_per_frame")} pdl={r.get("pdl")}')
EOF
done
for n in "${names[@]}"; do
  echo "$n: $("$B/radar-dsp" tail "$LOG/bench-$n.json" 2>/dev/null | tr '\n' ';')"
  [ -s "$LOG/smi.csv" ] && python3 "$B/correlate.py" "$LOG/bench-$n.json" "$LOG/smi.csv"
done
} | tee "$LOG/summary.txt"
cp "$LOG/summary.txt" "$OUT/summary.txt"
