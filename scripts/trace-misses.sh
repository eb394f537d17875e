#!/usr/bin/env bash
# Where a deadline miss's time went, CPU backend: runs radard on the simulator
# (with the README's main job's arguments, as scripts/run-radard.sh passes
# them, or with the arguments given) under the kernel's tracer,
# with uprobes on the CPU chain's steps, stops tracing at the Nth deadline
# miss, and prints, 50 ms at a time over the last second before it, how many
# times each step ran on each thread and how long it took on average.
#
# The steps take the same work every frame (fixed-size FFT rows, fixed-size
# copies), so their durations tell a slower machine (every step slower, on
# every thread) from a loop that was kept off its CPU (sched_switch to other
# tasks in the window, listed after the table) or that had more to do.
# Needs root and tracefs; leaves the tracer as it found it (events off, its
# own uprobes removed).
#
#   bash scripts/trace-misses.sh                       # stop at the 3rd miss, 10 min at most
#   MISSES=1 LIMIT_S=120 bash scripts/trace-misses.sh --frames 15000
#
# Output: target/trace-misses/{radard.log,trace.txt,steps.txt}.
set -euo pipefail
cd "$(dirname "$0")/.."
misses=${MISSES:-3}
limit=${LIMIT_S:-600}
out=target/trace-misses
tr=/sys/kernel/tracing
group=radard_steps

[ "$(id -u)" -eq 0 ] || { echo "trace-misses: needs root (tracefs, uprobes)" >&2; exit 1; }
[ -d "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null ||
	{ echo "trace-misses: no tracefs at $tr" >&2; exit 1; }
[ -w "$tr/uprobe_events" ] || { echo "trace-misses: this kernel has no uprobes ($tr/uprobe_events)" >&2; exit 1; }

bash scripts/setup.sh --run-only
if ! command -v gawk >/dev/null; then
	echo "trace-misses: installing gawk"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gawk
fi
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p radard
mkdir -p "$out"
bin=$PWD/$out/radard
# A copy: a later build must not replace the file the probes point into.
cp target/release/radard "$bin"

# The steps, by symbol: short name, then the symbol's demangled name.
steps=(
	"chunk <radar_dsp::cpu::CpuBackend as radar_dsp::backend::Backend>::chunk_landed"
	"frame <radar_dsp::cpu::CpuBackend as radar_dsp::backend::Backend>::process"
	"rows radar_dsp::cpu::job::ChannelJob::transform_rows"
	"steps1to4 radar_dsp::cpu::job::ChannelJob::run"
	"copy radar_dsp::cpu::job::ChannelJob::load_rows"
)
syms=$(nm -C --defined-only "$bin")
# The file offset of an address, from the loadable segment that holds it
# (uprobes want offsets, not addresses).
file_offset() {
	readelf -lW "$bin" | gawk -v a=$((16#$1)) '$1 == "LOAD" {
		off = strtonum($2); va = strtonum($3); sz = strtonum($5)
		if (a >= va && a < va + sz) { printf "0x%x\n", a - va + off; found = 1 }
	} END { if (!found) exit 1 }'
}

# The settings changed below, put back on exit.
saved_clock=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$tr/trace_clock")
saved_kb=$(cat "$tr/buffer_size_kb")
saved_overwrite=$(cat "$tr/options/overwrite")
cleanup() {
	echo 0 >"$tr/tracing_on" || true
	if [ -d "$tr/events/$group" ]; then echo 0 >"$tr/events/$group/enable" || true; fi
	echo 0 >"$tr/events/sched/sched_switch/enable" || true
	for s in "${steps[@]}"; do
		n=${s%% *}
		echo "-:$group/${n}_in" >>"$tr/uprobe_events" 2>/dev/null || true
		echo "-:$group/${n}_out" >>"$tr/uprobe_events" 2>/dev/null || true
	done
	echo "$saved_clock" >"$tr/trace_clock" || true
	echo "$saved_kb" >"$tr/buffer_size_kb" || true
	echo "$saved_overwrite" >"$tr/options/overwrite" || true
	echo 1 >"$tr/tracing_on" || true
}
trap cleanup EXIT

echo 0 >"$tr/tracing_on"
echo >"$tr/trace"
echo mono >"$tr/trace_clock"
echo 16384 >"$tr/buffer_size_kb"
echo 1 >"$tr/options/overwrite"
for s in "${steps[@]}"; do
	n=${s%% *}
	sym=${s#* }
	addr=$(gawk -v s="$sym" '{ a = $1; $1 = ""; $2 = ""; sub(/^  /, ""); if ($0 == s) { print a; exit } }' <<<"$syms")
	[ -n "$addr" ] || { echo "trace-misses: symbol not in the binary (inlined or renamed?): $sym" >&2; exit 1; }
	off=$(file_offset "$addr")
	echo "p:$group/${n}_in $bin:$off" >>"$tr/uprobe_events"
	echo "r:$group/${n}_out $bin:$off" >>"$tr/uprobe_events"
done
echo 1 >"$tr/events/$group/enable"
echo 1 >"$tr/events/sched/sched_switch/enable"
echo 1 >"$tr/tracing_on"

args=("$@")
mkdir -p target/radard
[ ${#args[@]} -gt 0 ] || args=(--source sim --sink jsonl:target/radard/detections.jsonl
	--health-file target/radard/health --print-every 125)
echo "trace-misses: radard ${args[*]}; tracing stops at deadline miss $misses (or after $limit s)"
: >"$out/radard.log"
rm -f "$out/stopped"
timeout -s INT "$limit" "$bin" "${args[@]}" >"$out/radard.log" 2>&1 &
pid=$!
# timeout passes the SIGINT on to radard, which stops cleanly.
tail -n +1 -F --pid="$pid" "$out/radard.log" 2>/dev/null | {
	n=0
	while IFS= read -r line; do
		case $line in *DEADLINE-MISS*)
			n=$((n + 1))
			echo "$line"
			if [ "$n" -eq "$misses" ]; then
				echo 0 >"$tr/tracing_on"
				echo "$n" >"$out/stopped"
				kill -INT "$pid" 2>/dev/null || true
			fi
			;;
		esac
	done
}
rc=0
wait "$pid" || rc=$?
echo 0 >"$tr/tracing_on"
cat "$tr/trace" >"$out/trace.txt"
grep '^summary: \(policy\|latency\|thread\|steal\)' "$out/radard.log" || true
if [ ! -f "$out/stopped" ]; then
	echo "trace-misses: fewer than $misses deadline misses; the table covers the run's last second"
	# 124: the time limit (timeout's status); 3: misses at --frames N.
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 3 ]; then
		tail -n 5 "$out/radard.log" >&2
		echo "trace-misses: radard exited with status $rc" >&2
	fi
fi

# Pair each step's entry and return per thread; 50 ms bins over the last second.
gawk '
	match($0, /^ *(.+)-([0-9]+) +\[([0-9]+)\] [^ ]+ +([0-9.]+): ([a-z0-9]+)_(in|out):/, m) {
		t = m[4] + 0; th = m[1]; k = th SUBSEP m[5]
		if (m[6] == "in") { start[k] = t; next }
		if (!(k in start)) next
		n++; T[n] = start[k]; D[n] = t - start[k]; S[n] = m[5]; H[n] = th; delete start[k]
		if (t > last) last = t
		next
	}
	/sched_switch:/ && match($0, / +([0-9.]+): sched_switch: .*next_comm=(.+) next_pid=([0-9]+) next_prio=([0-9]+)/, m) {
		sw[++ns] = m[1] + 0; who[ns] = m[2] " (prio " m[4] ")"
	}
	END {
		if (n == 0) { print "trace-misses: no step was traced" > "/dev/stderr"; exit 1 }
		from = last - 1.0
		for (i = 1; i <= n; i++) if (T[i] >= from) {
			b = int((T[i] - from) / 0.05); key = S[i] " on " H[i]
			cnt[b, key]++; sum[b, key] += D[i]; keys[key] = 1
		}
		printf "ms before the end"
		nk = asorti(keys, ks)
		for (j = 1; j <= nk; j++) printf " | %s: n, mean us", ks[j]
		printf "\n"
		for (b = 0; b < 20; b++) {
			printf "%17d", (20 - b) * 50
			for (j = 1; j <= nk; j++) {
				c = cnt[b, ks[j]] + 0
				printf " | %4d %7.0f", c, c ? 1e6 * sum[b, ks[j]] / c : 0
			}
			printf "\n"
		}
		for (i = 1; i <= ns; i++) if (sw[i] >= last - 0.2) ran[who[i]]++
		printf "switched to in the last 200 ms (task, times):"
		for (w in ran) printf " %s %d;", w, ran[w]
		printf "\n"
	}' "$out/trace.txt" | tee "$out/steps.txt"
