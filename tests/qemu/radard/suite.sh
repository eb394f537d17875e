#!/bin/sh
# The radard suite of the QEMU harness (guest side; tests/qemu/guest-init.sh
# runs it with fpga_p2p and nvp2p_shim freshly loaded): radard itself, built
# static, on the kernel module and the emulated FPGA card.
#
# 1. Each scene (scene-*.toml here): radard --source kmod --backend cpu
#    uploads the scene's frames through the transmit path to the card's
#    playback memory, the card plays them back through the capture path,
#    and every frame line must report every target of the scene
#    (targets.awk); the run ends at its frame limit with no sequence or
#    payload error. Its fpga sink sends every frame's detections record
#    over the transmit channel: the card counts the records it received
#    (they must be the records sent, the last one possibly still in flight
#    at the stop) and keeps the last one, which `radard decode-record` must
#    decode to exactly the line radard's jsonl sink wrote for that frame
#    (less what the record does not carry: latency and the UTC time with
#    its quality).
# 2. The front end (--content adc): the card's ADC source plays a recording
#    with moving targets (front-end.toml); every frame line must show them
#    where that frame of the recording has them.
# 3. Revocation mid-run (nvp2p_shim's revoke knob): radard ends with exit
#    status 1 and "ring memory was revoked".
# 4. SIGTERM mid-run, three times: exit 0, "stopped by signal".
# 5. SIGKILL mid-run; afterwards a new radard run on the same device works.
# The harness then unloads the modules (nothing may hold them) and counts
# kernel reports on the console (lockdep, KASAN, DMA-API, kmemleak).
#
# Prints its KTAP report on stdout (one test, "radard", with a figures
# line); logs on stderr.
D=${RADARD_SUITE_DIR:-/etc/radard}
OUT=/tmp/radard-suite
FRAMES=${RADARD_SUITE_FRAMES:-100}
REVOKE=/sys/kernel/debug/nvp2p_shim/revoke
# What the FPGA received on the transmit channel comes from the emulated
# card's test port (tests/qemu/README.md): `p2p-suite card-detections`
# counts the complete detections records and writes the newest one.
mkdir -p "$OUT"
fail='' details=''
frames_verified=0 revocations=0 kill_cycles=0

log() { echo "radard-suite: $*" >&2; }
failed() { log "FAIL: $*"; fail="${fail:+$fail; }$*"; }
passed() { log "ok: $*"; details="${details:+$details; }$*"; }
# wait_for CONDITION SECONDS: by the guest's clock, not by a count of
# tries (on a loaded TCG host one try, a fork or two, can take a second).
uptime_s() {
	read -r up _ </proc/uptime
	echo "${up%%.*}"
}
wait_for() {
	end=$(($(uptime_s) + $2))
	while :; do
		eval "$1" && return 0
		[ "$(uptime_s)" -ge "$end" ] && return 1
		usleep 100000
	done
}
# Where the threads of process $1 wait (wchan and kernel stack), one line.
stacks() {
	for t in /proc/"$1"/task/*; do
		[ -d "$t" ] || continue
		printf '%s %s %s: %s | ' "${t##*/}" "$(sed -n 's/^State:\t//p' "$t/status" 2>/dev/null)" \
			"$(cat "$t/wchan" 2>/dev/null)" "$(tr '\n' ' ' <"$t/stack" 2>/dev/null | cut -c1-200)"
	done
}
# Kills radard $1 and reaps it, but never waits on a process stuck in the
# kernel (SIGKILL cannot end it): that is reported with its kernel stacks
# and the suite goes on. Sets $rc (137 when reaped after the kill).
kill_and_reap() { # PID WHAT
	kill -KILL "$1" 2>/dev/null
	if wait_for "! kill -0 $1 2>/dev/null" 10; then
		wait "$1" 2>/dev/null
		rc=$?
	else
		failed "$2: radard still there 10 s after SIGKILL ($(stacks "$1"))"
		rc=none
	fi
}
# The configuration for scene $1: radard.toml with the scene file.
config_for() {
	awk -v f="$D/scene-$1.toml" '{ print } /^\[source\]/ { print "scene_file = \"" f "\"" }' \
		"$D/radard.toml" >"$OUT/$1.toml"
}
json_count() { # FILE KEY [INDENT]: a count in radard's --stats-json, top level or
	# INDENT spaces deep (4: a key of "dropped")
	sed -n "s/^${3:-  }\"$2\": \\([0-9]*\\),*\$/\\1/p" "$1"
}
# A finished run: exit 0, or 3 when deadlines were missed (TCG is slow) but
# no frame had a sequence or payload error.
run_ok() { # NAME RC LOG
	case $2 in
	0) return 0 ;;
	3) grep -q 'payload_errors=0 sequence_errors=0' "$3" && return 0 ;;
	esac
	failed "$1: radard exit status $2: $(grep -v '^frame ' "$3" | tail -n 3 | tr '\n' ' ')"
	return 1
}

# The card's count of complete detections records; its newest record goes
# to $OUT/last.record.
fpga_records() {
	p2p-suite card-detections --out "$OUT/last.record" 2>/dev/null |
		sed -n 's/^# figures: .*"detection_records":\([0-9]*\).*/\1/p'
}

# The fpga sink's records against the jsonl sink's lines of the run.
check_fpga_records() { # SCENE RECORDS-BEFORE
	s=$1
	after=$(fpga_records)
	sent=$(sed -n 's/^summary: sink\[0\] fpga .* sent=\([0-9]*\) .*/\1/p' "$OUT/$s.log")
	if [ -z "$after" ] || [ -z "$sent" ]; then
		failed "scene $s: fpga sink: no count (card '$after', radard sent '$sent')"
		return 1
	fi
	got=$((after - $2))
	if [ "$sent" -lt 1 ] || [ "$got" -gt "$sent" ] || [ "$got" -lt $((sent - 1)) ]; then
		failed "scene $s: fpga sink sent $sent records, the FPGA received $got"
		return 1
	fi
	cp "$OUT/last.record" "$OUT/$s.record" 2>/dev/null
	if ! radard decode-record --input "$OUT/$s.record" >"$OUT/$s.decoded" 2>"$OUT/$s.decode-err"; then
		failed "scene $s: the FPGA's last record: $(cat "$OUT/$s.decode-err")"
		return 1
	fi
	seq=$(sed -n 's/^{"version":1,"sequence":\([0-9]*\),.*/\1/p' "$OUT/$s.decoded")
	want=$(grep -F "{\"version\":1,\"sequence\":$seq," "$OUT/$s.jsonl" |
		sed -e 's/"latency_ns":[0-9]*,/"latency_ns":null,/' \
			-e 's/"utc_ns":[0-9]*,"utc_source":"[a-z-]*","time_quality":"[a-z-]*","time_bound_ns":[0-9a-z]*,/"utc_ns":null,"utc_source":null,"time_quality":null,"time_bound_ns":null,/')
	if [ -z "$seq" ] || [ "$want" != "$(cat "$OUT/$s.decoded")" ]; then
		failed "scene $s: the FPGA's last record (sequence '$seq') does not decode to the jsonl line: $(head -c 300 "$OUT/$s.decoded")"
		return 1
	fi
	n=$(sed -n 's/.*"count":\([0-9]*\),.*/\1/p' "$OUT/$s.decoded")
	passed "scene $s: fpga sink: $sent records sent, $got received by the FPGA, the last (frame $seq, $n detections) decodes to radard's line"
}

scene_run() { # SCENE FRAMES
	s=$1
	config_for "$s"
	before=$(fpga_records)
	rm -f "$OUT/$s.jsonl"
	# Bounded: radard rides out source timeouts (they are not fatal), so a
	# device that stopped delivering would otherwise keep it waiting.
	radard --config "$OUT/$s.toml" --frames "$2" --no-rt --stats-json "$OUT/$s.json" \
		--sink fpga --sink "jsonl:$OUT/$s.jsonl" >"$OUT/$s.log" 2>&1 &
	spid=$!
	if ! wait_for "! kill -0 $spid 2>/dev/null" 180; then
		failed "scene $s: radard still running after 180 s ($(stacks "$spid"); last lines: $(tail -n 2 "$OUT/$s.log" | tr '\n' ' '))"
		kill_and_reap "$spid" "scene $s"
		return 1
	fi
	wait "$spid"
	rc=$?
	grep -v '^frame ' "$OUT/$s.log" | sed "s/^/[$s] /" >&2
	run_ok "scene $s" "$rc" "$OUT/$s.log" || return 1
	if ! grep -q "summary: frame limit reached ($2 frames)" "$OUT/$s.log"; then
		failed "scene $s: did not run $2 frames"
		return 1
	fi
	if check=$(awk -f "$D/targets.awk" -v scene="$D/scene-$s.toml" "$OUT/$s.log" 2>&1); then
		n=$(echo "$check" | sed -n 's/^frames=\([0-9]*\).*/\1/p')
		frames_verified=$((frames_verified + n))
		misses=$(json_count "$OUT/$s.json" deadline_misses)
		drops=$(json_count "$OUT/$s.json" at_source "    ")
		passed "scene $s: $check (deadline misses ${misses:-?}, dropped at source ${drops:-?})"
	else
		failed "scene $s: $(echo "$check" | head -n 3 | tr '\n' ' ')"
		return 1
	fi
	check_fpga_records "$s" "${before:-0}"
}

# The front end: --content adc, nothing uploaded; the card's ADC source
# plays the front-end recording run.sh gave it (front-end.toml, moving
# targets), and every frame line must show the targets where the
# recording's truth puts them in that frame (moving-targets.awk).
adc_run() { # FRAMES
	if [ ! -f "$D/front-end.truth" ] || [ ! -f "$D/front-end.frames" ]; then
		failed "adc: no front-end recording truth in $D (run.sh writes it with the recording)"
		return 1
	fi
	radard --config "$D/radard.toml" --content adc --frames "$1" --no-rt \
		--stats-json "$OUT/adc.json" --sink "jsonl:$OUT/adc.jsonl" >"$OUT/adc.log" 2>&1 &
	spid=$!
	if ! wait_for "! kill -0 $spid 2>/dev/null" 180; then
		failed "adc: radard still running after 180 s ($(stacks "$spid"); last lines: $(tail -n 2 "$OUT/adc.log" | tr '\n' ' '))"
		kill_and_reap "$spid" adc
		return 1
	fi
	wait "$spid"
	rc=$?
	grep -v '^frame ' "$OUT/adc.log" | sed "s/^/[adc] /" >&2
	run_ok adc "$rc" "$OUT/adc.log" || return 1
	if ! grep -q "summary: frame limit reached ($1 frames)" "$OUT/adc.log"; then
		failed "adc: did not run $1 frames"
		return 1
	fi
	if check=$(awk -f "$D/moving-targets.awk" -v truth="$D/front-end.truth" \
		-v frames="$(cat "$D/front-end.frames")" "$OUT/adc.log" 2>&1); then
		n=$(echo "$check" | sed -n 's/^frames=\([0-9]*\).*/\1/p')
		frames_verified=$((frames_verified + n))
		passed "adc (front-end recording, moving targets): $check"
	else
		failed "adc: $(echo "$check" | head -n 3 | tr '\n' ' ')"
		return 1
	fi
}

# radard in the background until its $2-th frame line; sets $pid.
start_bg() { # NAME FIRST-FRAMES [RADARD-ARGS...]
	name=$1 first=$2
	shift 2
	radard --config "$OUT/a.toml" --no-rt "$@" >"$OUT/$name.log" 2>&1 &
	pid=$!
	# The FIRST-th frame line, whatever its sequence number: frames the
	# source dropped have none.
	wait_for "[ \$(grep -c '^frame seq=' $OUT/$name.log) -ge $first ]" 120 && return 0
	failed "$name: fewer than $first frames within 120 s: $(tail -n 3 "$OUT/$name.log" | tr '\n' ' ')"
	kill_and_reap "$pid" "$name"
	return 1
}

for scene in "$D"/scene-*.toml; do
	s=${scene##*/scene-}
	scene_run "${s%.toml}" "$FRAMES"
done
adc_run 60

# Revocation while streaming.
if [ ! -d /sys/module/nvp2p_shim ] && [ -d /sys/module/nvidia_p2p ]; then
	# NVIDIA's module cannot revoke another process's memory on demand; the
	# revocation suite revokes through munmap and mprotect of its own ring.
	passed "revocation: not run on NVIDIA's nvidia-p2p (no revoke knob)"
elif [ ! -w "$REVOKE" ]; then
	failed "revocation: no $REVOKE (the shim's knob) to revoke radard's ring with"
elif start_bg revoke 10; then
	# In the background: a revocation that blocks in the kernel is a
	# finding to report, not a hang of the suite.
	# Its own output, not the suite's: a writer stuck in the kernel must
	# not hold the suite's stdout (the report) open.
	(echo "$pid" >"$REVOKE") </dev/null >/dev/null 2>&1 &
	rpid=$!
	wait_for "! kill -0 $rpid 2>/dev/null" 30 ||
		failed "revocation: the write to the shim's revoke knob did not return in 30 s ($(stacks "$rpid"))"
	if wait_for "! kill -0 $pid 2>/dev/null" 30; then
		wait "$pid"
		rc=$?
		msg=$(grep 'radard: ' "$OUT/revoke.log" | tail -n 1)
		if [ "$rc" -eq 1 ] && grep -q 'ring memory was revoked; capture stopped' "$OUT/revoke.log"; then
			revocations=1
			passed "revocation: exit 1, '$msg'"
		else
			failed "revocation: exit status $rc, last message '$msg'"
		fi
	else
		failed "revocation: radard still running 30 s after the revocation ($(stacks "$pid"))"
		kill -KILL "$pid"
		wait_for "! kill -0 $pid 2>/dev/null" 10 && wait "$pid" 2>/dev/null
	fi
fi

# SIGTERM while streaming, three times: the loop spends most of its time in
# the module's WAIT, which the signal interrupts (EINTR); a clean stop all
# the same: exit 0 and the summary's "stopped by signal".
term_stops=0
for i in 1 2 3; do
	start_bg "term$i" 5 || break
	kill -TERM "$pid"
	if wait_for "! kill -0 $pid 2>/dev/null" 30; then
		wait "$pid"
		rc=$?
	else
		failed "SIGTERM: radard still running 30 s after it ($(stacks "$pid"))"
		kill -KILL "$pid"
		break
	fi
	if [ "$rc" -eq 0 ] && grep -q 'exit status 0 (stopped by signal)' "$OUT/term$i.log"; then
		term_stops=$((term_stops + 1))
	else
		failed "SIGTERM: exit status $rc: $(grep -v '^frame ' "$OUT/term$i.log" | tail -n 2 | tr '\n' ' ')"
		break
	fi
done
[ "$term_stops" -eq 3 ] && passed "SIGTERM mid-run: 3 of 3 clean stops (exit 0, stopped by signal)"

# SIGKILL while streaming (detections records in flight on the transmit
# channel too), then the device again.
if start_bg kill 10 --sink fpga; then
	kill -KILL "$pid"
	# A killed radard that does not go is a finding (with its threads'
	# kernel stacks), not a hang of the suite.
	if wait_for "! kill -0 $pid 2>/dev/null" 30; then
		wait "$pid"
		rc=$?
	else
		failed "kill: radard still there 30 s after SIGKILL ($(stacks "$pid"))"
		rc=none
	fi
	if [ "$rc" = none ]; then
		:
	elif [ "$rc" -ne 137 ]; then
		failed "kill: exit status $rc, expected 137"
	elif scene_run a 20; then
		kill_cycles=1
		passed "SIGKILL mid-run (fpga sink on), then 20 frames on the same device"
	else
		failed "kill: the device did not work after a killed radard"
	fi
fi

ok=true
[ -n "$fail" ] && ok=false
detail=${fail:-$details}
detail=$(printf '%s' "$detail" | tr '\n"\\' '   ' | cut -c1-600)
# The KTAP report, shaped like p2p-suite's (one test named after the suite).
echo "KTAP version 1"
echo "1..1"
echo "# radard: $detail"
echo "# figures: {\"suite\":\"radard\",\"passed\":$ok,\"frames_verified\":$frames_verified,\"revocations\":$revocations,\"kill_cycles\":$kill_cycles,\"detail\":\"$detail\"}"
if [ "$ok" = true ]; then echo "ok 1 radard"; else echo "not ok 1 radard"; fi
[ "$ok" = true ]
