#!/bin/bash
# GPU-triggered processing on the GPU machine, every check and figure in
# one call (docs/performance.md, docs/requirements.md): the driver's stream
# memory operations, the CUDA unit tests, cuda_matches_cpu (GPU-triggered
# frames and the chain against the CPU reference), the hot-loop test with
# CUDA required, radard for 60 s at 8 ms frames GPU-triggered, radard with a
# stalled source, a SIGTERM mid-run and a revoked ring, trigger_latency (the
# last chunk's completion record to detections in host memory, GPU- against
# CPU-triggered, paced at 8 ms), loop_floor's GPU-triggered cases next to
# the source alone and chunk streaming, radar-dsp bench (GPU time on a
# resident frame), and ncu's bytes per frame when ncu is there. A table of
# verdicts and figures is printed last; logs and JSON go to OUT/trigger-run.tgz
# (and OUT/summary.txt). STEPS="tests radard faults latency floor bench ncu"
# picks steps (default all); TRIG_FRAMES (default 7500: 60 s), LAT_FRAMES
# (2000), FLOOR_S (4), BENCH_FRAMES (3000) shorten a quick look. Built by prepare.sh; usage there:
#   bash .device-bin/<bundle>/trigger-run.sh
set -u
B=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
LOG=$(mktemp -d /tmp/trigger-run.XXXXXX)
mkdir -p "$OUT" /tmp/radard
STEPS=${STEPS:-"tests radard faults latency floor bench ncu"}
want() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
pack() { tar czf "$OUT/trigger-run.tgz" -C "$LOG" . 2>/dev/null; cp "$LOG/summary.txt" "$OUT/" 2>/dev/null; }
trap pack EXIT
V="$LOG/verdicts.txt"; : > "$V"
verdict() { echo "$1" | tee -a "$V"; }
export RADAR_COMMIT=$(cat "$B/COMMIT" 2>/dev/null)
echo "== bundle $RADAR_COMMIT; $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$LOG/device.txt"
. "$B/culibs.sh"
export RADAR_REQUIRE_CUDA=1
# What the driver exports of the calls GPU-triggered mode resolves by name.
python3 - <<'PY' | tee "$LOG/symbols.txt"
import ctypes
lib = ctypes.CDLL("libcuda.so.1")
for s in ["cuStreamWaitValue32_v2", "cuStreamWaitValue32", "cuStreamWriteValue32_v2",
          "cuStreamWriteValue32", "cuLaunchHostFunc", "cuDeviceGetAttribute"]:
    try:
        getattr(lib, s); print(f"libcuda exports {s}")
    except AttributeError:
        print(f"libcuda LACKS {s}")
PY
if want tests; then
  echo "== unit tests (cuda, select)"
  timeout 300 "$B/radar_dsp_unit" cuda select > "$LOG/unit.log" 2>&1; rc=$?
  grep -E "test result" "$LOG/unit.log"; verdict "unit tests rc=$rc"
  echo "== cuda_matches_cpu"
  timeout 420 "$B/cuda_matches_cpu" --test-threads=1 --nocapture > "$LOG/matches.log" 2>&1; rc=$?
  grep -E "^test |test result|matched|armed:|GPU-triggered:|panicked" "$LOG/matches.log" | cut -c1-300 | head -30
  verdict "cuda_matches_cpu rc=$rc"
  echo "== hot loop (allocations; CUDA required)"
  timeout 300 "$B/radard_hot_loop_alloc" > "$LOG/hot_loop.log" 2>&1; rc=$?
  grep -E "allocations|skipped|FAILED|ok:|GPU-triggered" "$LOG/hot_loop.log" | cut -c1-300
  verdict "hot loop rc=$rc"
fi
radard_run() { # name, timeout, extra toml, radard args...
  local name=$1 limit=$2 extra=$3; shift 3
  { cat "$B/gpu-run.toml"; printf '%b' "$extra"; } > "$LOG/$name.toml"
  echo "== radard $name: $*"
  timeout "$limit" "$B/radard" --backend cuda --print-every 0 --config "$LOG/$name.toml" \
    --stats-json "$LOG/radard-$name.json" "$@" > "$LOG/radard-$name.log" 2>&1
  local rc=$?
  echo "rc=$rc"
  grep -E "^radard: (backend|GPU-triggered|chunk|ring)|^summary|error|Error" "$LOG/radard-$name.log" | head -30 | cut -c1-300
  return $rc
}
if want radard; then
  # The CPU target's run: one wake-up per 4 frames, 8 slots.
  radard_run trig-8ms 100 '[source]\nslots = 8\n[loop]\nframes_per_wake = 4\n' --trigger gpu --frames "${TRIG_FRAMES:-7500}" --chunk-period-us 500
  verdict "radard trig-8ms rc=$?"
  # The unit's configuration: one wake-up a frame, 4 slots.
  radard_run trig-k1 40 "" --trigger gpu --frames 2500 --chunk-period-us 500
  verdict "radard trig-k1 rc=$?"
  radard_run cpu-8ms 40 "" --trigger cpu --frames 2500 --chunk-period-us 500
  verdict "radard cpu-8ms rc=$?"
fi
if want faults; then
  radard_run stall 40 '[simulator]\nstall_at = 400\nstall_ms = 2500\n' --trigger gpu --frames 1000 --chunk-period-us 500
  verdict "radard stall rc=$?"
  radard_run revoke 40 '[simulator]\nrevoke_at = 600\n' --trigger gpu --chunk-period-us 500
  verdict "radard revoke rc=$? (1 expected: the ring was revoked)"
  echo "== radard sigterm: SIGTERM mid-run"
  cp "$B/gpu-run.toml" "$LOG/sigterm.toml"
  "$B/radard" --backend cuda --trigger gpu --print-every 0 --config "$LOG/sigterm.toml" --chunk-period-us 500 \
    --stats-json "$LOG/radard-sigterm.json" > "$LOG/radard-sigterm.log" 2>&1 &
  pid=$!
  sleep 5.0037
  kill -TERM $pid
  t0=$(date +%s.%N)
  ( sleep 20; kill -KILL $pid 2>/dev/null ) & guard=$!
  wait $pid; rc=$?
  kill $guard 2>/dev/null
  t1=$(date +%s.%N)
  grep -E "^summary" "$LOG/radard-sigterm.log" | head -12 | cut -c1-300
  verdict "radard sigterm rc=$rc, exited $(python3 -c "print(f'{$t1-$t0:.2f}')") s after SIGTERM"
fi
if want latency; then
  echo "== trigger_latency (8 ms frames)"
  timeout 200 "$B/trigger_latency" --frames "${LAT_FRAMES:-2000}" --period-us 8000 --json "$LOG/trigger_latency.json" > "$LOG/trigger_latency.log" 2>&1
  verdict "trigger_latency rc=$?"
  tail -8 "$LOG/trigger_latency.log"
  # The chunk waits all as stream waits, all as polling kernels, against
  # the default (stream waits, a polling kernel before the last chunk).
  for tw in ${LAT_VARIANTS-stream poll}; do
    timeout 120 "$B/trigger_latency" --frames "${LAT_FRAMES:-2000}" --period-us 8000 --cases gpu --cuda-options "twait=$tw" \
      --json "$LOG/trigger_latency-$tw.json" > "$LOG/trigger_latency-$tw.log" 2>&1
    verdict "trigger_latency twait=$tw rc=$?"
  done
fi
if want floor; then
  echo "== loop_floor"
  timeout 200 "$B/loop_floor" --seconds "${FLOOR_S:-4}" --cases 'source only, 1 events/frame, 8 ms;chunk-streamed, spin, 8 ms;GPU-triggered' \
    --json "$LOG/loop_floor.json" > "$LOG/loop_floor.log" 2>&1
  verdict "loop_floor rc=$?"
  tail -8 "$LOG/loop_floor.log" | cut -c1-240
fi
if want bench; then
  echo "== radar-dsp bench (cuda, paced at 8 ms)"
  timeout 240 "$B/radar-dsp" bench --backend cuda --frames "${BENCH_FRAMES:-3000}" --period-us 8000 --stage-reps 200 \
    --json "$LOG/bench.json" > "$LOG/bench.log" 2>&1
  verdict "radar-dsp bench rc=$?"
  grep -E "GPU graph|end to end|kernels|stage|copy" "$LOG/bench.log" | head -30 | cut -c1-200
fi
if want ncu; then
  if command -v ncu >/dev/null; then
    echo "== ncu (radar-dsp profile: a resident frame's graph, 3 frames)"
    timeout 300 ncu --profile-from-start off --clock-control none --cache-control all --csv --page raw --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum \
      "$B/radar-dsp" profile --frames 3 > "$LOG/ncu.csv" 2> "$LOG/ncu.err"
    verdict "ncu rc=$?"
    python3 "$B/ncu_bytes.py" "$LOG/ncu.csv" 3 "$LOG/ncu.json" | tee "$LOG/ncu-table.txt"
  else
    verdict "ncu: not on this machine"
  fi
fi
{
echo "== summary ($(head -1 "$LOG/device.txt"); bundle $RADAR_COMMIT)"
cat "$V"
python3 - "$LOG" <<'PY'
import json, os, sys
d = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(d, n)))
    except (OSError, ValueError):
        return None
print(f"{'radard run':<10} {'frames':>6} {'misses':>6} {'ledger':>6} {'timeouts':>8} {'lat p50':>8} {'p99.9':>7} {'loop CPU us':>11} {'triggered':>9} {'flushed':>7}  end")
for n in ["trig-8ms", "trig-k1", "cpu-8ms", "stall", "revoke", "sigterm"]:
    s = load(f"radard-{n}.json")
    if not s:
        print(f"{n:<10} no summary"); continue
    l = s.get("latency_ms") or {}
    cpu = s.get("loop_cpu_us_per_frame")
    print(f"{n:<10} {s['frames']:>6} {s['deadline_misses']:>6} {'closed' if s['ledger_closed'] else 'OPEN':>6} {s['source_timeouts']:>8} "
          f"{l.get('p50', float('nan')):>8.3f} {l.get('p99_9', float('nan')):>7.3f} {(f'{cpu:.1f}' if cpu is not None else '-'):>11} "
          f"{str(s.get('gpu_triggered')):>9} {str(s.get('gpu_triggered_flushed')):>7}  {s['end'][:60]} {s.get('gpu_triggered_error') or ''}")
for t in [load("trigger_latency.json")] + [load(f"trigger_latency-{v}.json") for v in ("stream", "last", "poll")]:
    if not t:
        continue
    for c in t["cases"]:
        l = c["record_to_detections"]
        print(f"latency {c['name']:<30} p50 {l['p50_us']:.1f} p99 {l['p99_us']:.1f} p99.9 {l['p999_us']:.1f} max {l['max_us']:.1f} us ({c['frames']} frames, {c['deadline_misses']} late)")
        w = c.get("gpu_work")
        if w:
            print(f"  of which the GPU's work                 p50 {w['p50_us']:.1f} p99 {w['p99_us']:.1f} p99.9 {w['p999_us']:.1f} max {w['max_us']:.1f} us")
f = load("loop_floor.json")
if f:
    for c in f["cases"]:
        p = c["cpu_us_per_frame"]
        print(f"loop_floor {c['case']['name']:<40} total {p['total']:.1f} wait {p['wait']:.1f} process {p['process']:.1f} release {p['release']:.1f} us/frame, misses {c['deadline_misses']}")
b = load("bench.json")
if b:
    g = b.get("gpu_graph_resident") or {}; gg = b.get("gpu_graph_resident_gated") or {}
    print(f"bench: GPU graph resident p50 {g.get('p50_us', float('nan')):.2f} us, gated p50 {gg.get('p50_us', float('nan')):.2f} us, kernels/frame {b.get('kernels_per_frame')}")
n = load("ncu.json")
if n:
    print(f"ncu: {n['sm_l2_mib_per_frame']:.2f} MiB SM<->L2 per frame, DRAM read (flushed) {n['dram_read_mib_per_frame_flushed']:.2f} MiB, kernels {n['kernels_per_frame']}, Orin roofline {n['orin_roofline_us']:.0f} us")
PY
} | tee "$LOG/summary.txt"
