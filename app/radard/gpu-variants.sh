#!/bin/bash
# Where a GPU-machine run's deadline misses and loop CPU time come from:
# radard (CUDA, simulator, default geometry) at 1 ms and 8 ms frames in
# variants that each take one suspect away (the sinks and telemetry, chunk
# streaming, the spinning GPU wait) or make the simulator spin to each chunk
# instead of sleeping (simulator.spin_us), with each thread's CPU time, its wait
# for a CPU and its preemptions (radard's "summary: thread" lines) and the
# hypervisor's steal time, plus vmstat over the whole call. Copied into the
# device bundle by app/dsp/benches-gpu/prepare.sh; figures go to
# docs/performance.md.
# Usage there: OUT=$OUT bash .device-bin/<bundle>/gpu-variants.sh [SECONDS_1MS] [SECONDS_8MS]
set -u
B=$(dirname "$0")
OUT=${OUT:-/tmp/out}
S1=${1:-20}
S8=${2:-10}
mkdir -p "$OUT" /tmp/radard
echo "== bundle commit $(cat "$B/COMMIT" 2>/dev/null); $(date -u +%FT%TZ); $(nproc) CPUs"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
. "$B/culibs.sh"
echo "== the busiest processes before"
ps -eo pid,comm,pcpu,psr --sort=-pcpu | head -8
vmstat -n 1 > "$OUT/vmstat.log" 2>&1 &
vm=$!

# name, period (1ms|8ms), config lines appended to the base configuration
# (gpu-run.toml: loop on core 2, the jsonl and fpga sinks; "bare": the loop
# on core 2 only, no sinks)
variant() {
  local name=$1 period=$2 extra=$3 frames args
  case $name in
  *bare*) printf '[rt]\ncpu = 2\n%b\n' "$extra" > "/tmp/v-$name.toml" ;;
  *) { grep -v '^#' "$B/gpu-run.toml"; printf '%b\n' "$extra"; } > "/tmp/v-$name.toml" ;;
  esac
  case $period in
  1ms) frames=$((S1 * 1000)) args="--chunk-period-ns 62500" ;;
  *) frames=$((S8 * 125)) args="--chunk-period-us 500" ;;
  esac
  "$B/radard" --backend cuda --frames "$frames" --print-every 0 --config "/tmp/v-$name.toml" \
    --stats-json "$OUT/v-$name.json" $args > "$OUT/v-$name.log" 2>&1
  echo "== $name ($period, $frames frames, rc=$?): $(printf '%b' "$extra" | tr '\n' ' ')"
  grep -E "^summary: (policy|latency|loop_cpu|thread|steal)" "$OUT/v-$name.log"
  grep -c "DEADLINE-MISS" "$OUT/v-$name.log" | sed 's/^/miss lines: /'
  grep -m3 "DEADLINE-MISS" "$OUT/v-$name.log"
}
spin='[simulator]\nspin_us = 200'
variant 1ms-base 1ms ''
variant 1ms-bare 1ms '[telemetry]\nenabled = false'
variant 1ms-simspin 1ms "$spin"
variant 1ms-whole-block 1ms '[backend]\nstream_chunks = false\ngpu_wait = "block"'
variant 8ms-base 8ms ''
variant 8ms-block 8ms '[backend]\ngpu_wait = "block"'
variant 8ms-whole 8ms '[backend]\nstream_chunks = false'
variant 8ms-whole-block 8ms '[backend]\nstream_chunks = false\ngpu_wait = "block"'
kill $vm 2>/dev/null
echo "== vmstat (st = steal %): max st, max r"
awk 'NR>2 {if ($17>st) st=$17; if ($1>r) r=$1} END {print "max st", st, "max r", r}' "$OUT/vmstat.log"
python3 - "$OUT" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print(f"{'variant':<17} {'frames':>7} {'misses':>6} {'p50':>7} {'p99':>7} {'p99.9':>7} {'max':>7} {'ev p99.9':>8} {'loop us/f':>9} {'loop wait ms':>12} {'loop preempt':>12} {'sim wait ms':>11} {'sim late':>8} {'steal ms':>8}")
rows = {}
for path in sorted(glob.glob(os.path.join(out, "v-*.json"))):
    name = os.path.basename(path)[2:-5]
    s = json.load(open(path))
    th = {t["name"]: t for t in s.get("threads", [])}
    loop, sim = th.get("radard", {}), th.get("fpga-sim", {})
    l, p = s["latency_ms"], s["processing_ms"]
    cpu = s.get("loop_cpu_us_per_frame")
    rows[name] = {"frames": s["frames"], "deadline_misses": s["deadline_misses"], "latency_ms": l,
                  "processing_ms": p, "loop_cpu_us_per_frame": cpu, "threads": s.get("threads"),
                  "steal_ms": s.get("steal_ms"), "ledger_closed": s["ledger_closed"],
                  "simulator_pacing": s.get("simulator_pacing")}
    print(f"{name:<17} {s['frames']:>7} {s['deadline_misses']:>6} {l['p50']:>7.3f} {l['p99']:>7.3f} {l['p99_9']:>7.3f} {l['max']:>7.3f} "
          f"{p['p99_9']:>8.3f} {cpu if cpu is None else round(cpu, 1)!s:>9} {loop.get('runq_wait_ms', 0):>12.1f} "
          f"{loop.get('involuntary', 0):>12} {sim.get('runq_wait_ms', 0):>11.1f} {(s.get('simulator_pacing') or {}).get('chunks_late', '-')!s:>8} {s.get('steal_ms') or 0:>8.1f}")
json.dump(rows, open(os.path.join(out, "gpu-variants.json"), "w"), indent=2)
PY
