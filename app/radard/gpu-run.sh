#!/bin/bash
# radard on the GPU machine: CUDA backend, simulator, default geometry,
# 60 s at 8 ms frames (chunk period 500 us) and 60 s at 1 ms frames (62.5 us),
# then shorter runs of both with backend.gpu_wait = "block",
# with the appliance's real-time set-up (SCHED_FIFO, mlockall, one core), and
# the hot-loop allocation test with CUDA required. Copied into the device
# bundle by app/dsp/benches-gpu/prepare.sh; figures go to docs/performance.md.
# Prints each run's summary (latency p50/p99/p99.9/max from the capture
# timestamp and from the frame event, deadline misses, the ledger, loop CPU
# per frame) and its last status lines (with the NVML telemetry line), then a
# table of the runs; writes OUT/radard-<run>.json (radard's summary) and
# OUT/gpu-run.json (the table's figures). Exit status: 0 when both runs
# ended cleanly with 0 deadline misses and the hot-loop test passed (the
# gpu_wait = "block" runs are shown, not judged).
# Usage there: bash .device-bin/cuda/gpu-run.sh   (OUT: where logs go, default /tmp/out)
set -u
B=$(dirname "$0")
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
echo "== bundle commit $(cat "$B/COMMIT" 2>/dev/null); $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
. "$B/culibs.sh"
echo "== hot loop (allocations, CUDA required)"
RADAR_REQUIRE_CUDA=1 "$B/radard_hot_loop_alloc" 2>&1 | tee "$OUT/hot_loop.log" | tail -6
hot_rc=${PIPESTATUS[0]}
echo "hot_loop rc=$hot_rc"
# The same configuration with the loop sleeping on the GPU's interrupt.
{ cat "$B/gpu-run.toml"; printf '[backend]\ngpu_wait = "block"\n'; } > /tmp/gpu-run-block.toml
run() { # name, frames, radard args...
  local name=$1 frames=$2; shift 2
  local config="$B/gpu-run.toml"
  case $name in *-block) config=/tmp/gpu-run-block.toml ;; esac
  echo "== radard $name: $frames frames $*"
  "$B/radard" --backend cuda --frames "$frames" --print-every 0 --config "$config" \
    --stats-json "$OUT/radard-$name.json" "$@" > "$OUT/radard-$name.log" 2>&1
  echo "rc=$?"
  grep -E "^radard: (backend|chunk|rt|ring|telemetry|sink)|^summary|DEADLINE-MISS|NOT-PROCESSED" "$OUT/radard-$name.log" | head -40
  grep -E "^status" "$OUT/radard-$name.log" | tail -2
}
run 8ms 7500 --chunk-period-us 500
run 1ms 60000 --chunk-period-ns 62500
run 8ms-block 2500 --chunk-period-us 500
run 1ms-block 20000 --chunk-period-ns 62500
echo "== figures (docs/performance.md)"
python3 - "$OUT" "$hot_rc" <<'PY'
import json, os, sys
out, hot_rc = sys.argv[1], int(sys.argv[2])
runs, ok = {}, hot_rc == 0
print(f"{'run':<9} {'frames':>7} {'misses':>6} {'ledger':>7} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8}  {'event p99.9':>11} {'loop CPU us/frame':>17} {'sim late chunks':>15}  telemetry")
# The block-wait runs (gpu_wait = "block") are shown; the verdict is on the
# two runs of docs/performance.md (spinning wait, the default).
for name in ("8ms", "1ms", "8ms-block", "1ms-block"):
    try:
        with open(os.path.join(out, f"radard-{name}.json")) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{name:<9} no summary: {e}")
        ok = ok and name.endswith("-block")
        continue
    l, p, t = s["latency_ms"], s["processing_ms"], s.get("telemetry")
    runs[name] = {
        "frames": s["frames"], "frames_produced": s["frames_produced"],
        "deadline_misses": s["deadline_misses"], "dropped": s["dropped"],
        "ledger_closed": s["ledger_closed"], "end": s["end"],
        "frame_period_ms": s["frame_period_ms"], "backend": s["backend"],
        "chunk_streaming": s["chunk_streaming"],
        "latency_ms": l, "processing_ms": p,
        "loop_cpu_us_per_frame": s["loop_cpu_us_per_frame"],
        "telemetry": t, "sinks": s["sinks"],
        "threads": s.get("threads"), "steal_ms": s.get("steal_ms"),
        "simulator_pacing": s.get("simulator_pacing"),
    }
    if name in ("8ms", "1ms"):
        ok = ok and s["deadline_misses"] == 0 and s["ledger_closed"] and s["end"] == "frame limit reached"
    cpu = s["loop_cpu_us_per_frame"]
    src = t.get("source") if isinstance(t, dict) else None
    print(f"{name:<9} {s['frames']:>7} {s['deadline_misses']:>6} {'closed' if s['ledger_closed'] else 'OPEN':>7} "
          f"{l['p50']:>8.3f} {l['p99']:>8.3f} {l['p99_9']:>9.3f} {l['max']:>8.3f}  {p['p99_9']:>11.3f} "
          f"{(f'{cpu:.1f}' if cpu is not None else '-'):>17} {(s.get('simulator_pacing') or {}).get('chunks_late', '-')!s:>15}  {src or 'none'}")
with open(os.path.join(out, "gpu-run.json"), "w") as f:
    json.dump({"hot_loop_rc": hot_rc, "runs": runs, "pass": ok}, f, indent=2)
print("gpu-run:", "PASS" if ok else "FAIL", f"(figures in {out}/gpu-run.json)")
sys.exit(0 if ok else 1)
PY
