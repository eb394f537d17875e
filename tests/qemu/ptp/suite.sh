#!/bin/sh
# The ptp suite of the QEMU harness (guest side; tests/qemu/guest-init.sh
# runs it with fpga_p2p and nvp2p_shim freshly loaded): the card's clock as
# a PTP hardware clock, driven by linuxptp's own tools (Debian's linuxptp,
# put into the initramfs by run.sh) and by p2p-suite where linuxptp has no
# tool. The emulated card's oscillator runs +100 ppm off (run.sh starts it
# with clock-ppm=100).
#
# 1. The clock is found from the card's sysfs node and named after it.
# 2. phc_ctl sets, reads, steps and trims it: a set reads back, a step of
#    2.5 s moves it by 2.5 s, and a trim of -100 ppm changes its rate
#    against CLOCK_REALTIME by 100 ppm +- 5 (measured, each over 5 s).
# 3. PPS edges into the card (its test port) come out as external time
#    stamp events with the card's time at the edge (p2p-suite ptp-pps).
# 4. radard streams from the card before phc2sys runs: its frames say
#    free-running. phc2sys, with the board's command line for the card
#    (radar-phc2sys-card.service: -S 0.001 -R 4; -O 37 for its -w, as the
#    guest has no ptp4l to take TAI - UTC from), then keeps the card on the
#    guest's CLOCK_REALTIME + 37 s: radard's frames say locked, within
#    phc2sys's measured offsets. Network time that comes late steps the
#    system clock (+1 h here): the frames go to holdover and, once phc2sys
#    has stepped the card after it, back to locked; the same for a step
#    back (-300 ms), where radard holds frames after their predecessors
#    (frames_held in its summary). radard logs the clock steps; frame times
#    only ever increase.
# 5. Frames' UTC times (the card's clock at the first sample, less the TAI
#    offset) agree with the guest's clock at that instant, and come one
#    frame period before the program has them (p2p-suite ptp-frames).
# 6. ts2phc, with the board's configuration (linuxptp/ts2phc.conf), keeps the
#    card on a PPS whose edges come at the whole seconds of CLOCK_REALTIME
#    (p2p-suite pps-pulser, standing in for a GNSS receiver and its NMEA):
#    it reaches its locked state (s2), with offsets as large as the edges
#    were late (a guest's wake-up under emulation on a loaded host; the
#    pulser leaves out a second it is 0.5 ms late for). A run with edges
#    left out or more than 1 ms late (the configuration's step threshold)
#    that did not lock is tried again, five runs at most.
#
# 7. The module unloads under a process that holds the card's clock open
#    (phc2sys would): the old clock answers ENODEV, and a reload registers a
#    new one that works while the old descriptor is still open.
#
# Prints its KTAP report on stdout (one test, "ptp", with a figures line
# holding the measured bounds); logs on stderr.
OUT=/tmp/ptp-suite
RADARD_DIR=${PTP_RADARD_DIR:-/etc/radard}
mkdir -p "$OUT"
fail='' details='' figures=''

log() { echo "ptp-suite: $*" >&2; }
failed() { log "FAIL: $*"; fail="${fail:+$fail; }$*"; }
passed() { log "ok: $*"; details="${details:+$details; }$*"; }
figure() { figures="$figures,\"$1\":$2"; }
uptime_s() {
	read -r up _ </proc/uptime
	echo "${up%%.*}"
}
wait_for() { # CONDITION SECONDS, by the guest's clock
	end=$(($(uptime_s) + $2))
	while :; do
		eval "$1" && return 0
		[ "$(uptime_s)" -ge "$end" ] && return 1
		usleep 200000
	done
}
# A value of a p2p-suite figures line: KEY FILE
fig() { sed -n "s/^# figures: .*\"$1\":\\(-\\{0,1\\}[0-9.]*\\).*/\\1/p" "$2" | head -n 1; }
# The clock times phc_ctl printed ("clock time is S.NNN ..."), one a line.
phc_times() { sed -n 's/.*clock time is \([0-9]*\.[0-9]*\) .*/\1/p' "$1"; }
# The offsets phc_ctl cmp printed, ns, one a line.
phc_offsets() { sed -n 's/.*offset from CLOCK_REALTIME is \(-\{0,1\}[0-9]*\)ns.*/\1/p' "$1"; }
finish() {
	passed=true
	[ -n "$fail" ] && passed=false
	# Short lines: the result channel is a serial port, and a long line
	# written as the slow debug kernel closes the port lost its tail once.
	# Every check's own line is in the log (@@log) anyway.
	detail=$(printf '%s' "${fail:-$details}" | tr '\n"\\' '   ')
	echo "KTAP version 1"
	echo "1..1"
	echo "# ptp: $(printf '%s' "$detail" | cut -c1-400)"
	echo "# figures: {\"suite\":\"ptp\",\"passed\":$passed$figures,\"detail\":\"$(printf '%s' "$detail" | cut -c1-200)\"}"
	if [ "$passed" = true ]; then echo "ok 1 ptp"; else echo "not ok 1 ptp"; fi
	[ "$passed" = true ]
	exit $?
}

# --- 1. the clock and its name ---------------------------------------------------
PTP=''
for d in /sys/class/misc/fpga-p2p0/device/ptp/ptp*; do
	[ -d "$d" ] && PTP=/dev/${d##*/}
done
if [ -z "$PTP" ] || [ ! -c "$PTP" ]; then
	failed "no PTP clock under /sys/class/misc/fpga-p2p0/device/ptp"
	finish
fi
S=/sys/class/ptp/${PTP#/dev/}
name=$(cat "$S/clock_name")
[ "$name" = fpga-p2p0 ] && passed "$PTP is the card's clock (clock_name $name)" ||
	failed "$PTP's clock_name is '$name', want fpga-p2p0"
[ "$(cat "$S/n_external_timestamps")" = 1 ] && [ "$(cat "$S/n_programmable_pins")" = 1 ] ||
	failed "$PTP: $(cat "$S/n_external_timestamps") external time stamp channels, $(cat "$S/n_programmable_pins") pins (want 1, 1)"

# --- 2. phc_ctl: set, get, step, trim ---------------------------------------------
phc_ctl "$PTP" set 1000000 get adj 2.5 get >"$OUT/phc_ctl.log" 2>&1
set -- $(phc_times "$OUT/phc_ctl.log")
if [ $# -ne 2 ]; then
	failed "phc_ctl set/get/adj/get printed $# clock times: $(tr '\n' ' ' <"$OUT/phc_ctl.log")"
else
	# Set to 1000000 s, read back at once; stepped by 2.5 s, read again.
	if awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= 1000000 && a < 1000002 && b - a >= 2.5 && b - a < 3.5) }'; then
		passed "phc_ctl: set 1000000 s read back $1 s; a step of 2.5 s then read $2 s"
	else
		failed "phc_ctl: set 1000000 s read back $1 s; after a step of 2.5 s $2 s"
	fi
fi
# The rate: drift against CLOCK_REALTIME over about 5 s with the trim at 0,
# then at -100 ppm; the difference is the trim, whatever the guest clock's
# own error against the card's (+100 ppm) oscillator. The interval is the
# card's clock between the two readings, not the 5 s asked for: on the debug
# kernel under emulation the second cmp came about 0.3 s late on a slow
# day, which overstated a drift of 100 ppm by 6%.
drift() { # PPB: the card's rate against CLOCK_REALTIME (ns/s) with the trim at PPB
	# "--": a negative trim is no option. cmp's offset is CLOCK_REALTIME - card.
	phc_ctl "$PTP" -- freq "$1" cmp get wait 5 cmp get >"$OUT/freq$1.log" 2>&1
	set -- $(phc_offsets "$OUT/freq$1.log") $(phc_times "$OUT/freq$1.log")
	[ $# -eq 4 ] || return 0
	# The offsets are about 1.8e18 ns (the card was set to 1000000 s): their
	# difference in the shell's 64-bit integers, the division in awk.
	awk -v d=$(($1 - $2)) -v t1="$3" -v t2="$4" 'BEGIN { if (t2 > t1) printf "%d\n", d / (t2 - t1) }'
}
d0=$(drift 0)
d1=$(drift -100000)
phc_ctl "$PTP" freq >"$OUT/freq-read.log" 2>&1
if [ -z "$d0" ] || [ -z "$d1" ]; then
	failed "phc_ctl freq/cmp: no offsets ($(tr '\n' ' ' <"$OUT/freq0.log"))"
else
	figure card_drift_untrimmed_ppb "$d0"
	figure card_drift_trimmed_ppb "$d1"
	# +- 5 ppm: each offset is read to some microseconds (on the debug
	# kernel under emulation, tens).
	if [ $((d0 - d1)) -ge 95000 ] && [ $((d0 - d1)) -le 105000 ]; then
		passed "phc_ctl freq: the card drifts $d0 ppb against CLOCK_REALTIME untrimmed, $d1 ppb trimmed by -100 ppm"
	else
		failed "phc_ctl freq: a trim of -100 ppm changed the drift by $((d0 - d1)) ppb ($d0 -> $d1), want 100000 +- 5000"
	fi
fi
grep -q 'clock frequency offset is -100000' "$OUT/freq-read.log" ||
	failed "phc_ctl freq reads back: $(tr '\n' ' ' <"$OUT/freq-read.log")"
phc_ctl "$PTP" freq 0 >/dev/null 2>&1

# --- 3. PPS in: external time stamps ------------------------------------------------
if p2p-suite ptp-pps --pulses 5 >"$OUT/pps.ktap" 2>"$OUT/pps.err"; then
	passed "$(sed -n 's/^# ptp-pps: //p' "$OUT/pps.ktap")"
	figure pps_read_window_max_ns "$(fig pps_read_window_max_ns "$OUT/pps.ktap")"
else
	failed "ptp-pps: $(sed -n 's/^# ptp-pps: //p' "$OUT/pps.ktap" | head -n 2) $(tail -n 2 "$OUT/pps.err")"
fi

# --- 4. phc2sys keeps the card on the system clock; radard's frames say so ---------
# The kernel's TAI offset (on the unit phc2sys takes it from ptp4l), and the
# system clock marked synchronised (on the unit phc2sys does it each update).
p2p-suite sysclock --tai 37 --synced >"$OUT/sysclock.ktap" 2>&1 ||
	failed "sysclock: $(tail -n 3 "$OUT/sysclock.ktap" | tr '\n' ' ')"
# radard on the card's test pattern (the radard suite's geometry, 20 ms
# frames), its frames' time to a jsonl file, before phc2sys runs.
awk '/^\[output\]/ { print; print "stats_json = \"'"$OUT"'/radard.json\""; next } { print }' \
	"$RADARD_DIR/radard.toml" >"$OUT/radard.toml"
cat >>"$OUT/radard.toml" <<EOT

[[sink]]
kind = "jsonl"
path = "$OUT/frames.jsonl"
EOT
radard --config "$OUT/radard.toml" --content test-pattern --no-rt --print-every 0 \
	>"$OUT/radard.log" 2>&1 &
radard_pid=$!
# The quality of the jsonl's frames, one a line.
qualities() { sed -n 's/.*"time_quality":"\([a-z-]*\)".*/\1/p' "$OUT/frames.jsonl" 2>/dev/null; }
lines() { qualities | wc -l; }
# The lines from line $1 on have quality $2 (and there is one).
quality_from() { qualities | tail -n +"$1" | grep -qx "$2"; }
if wait_for '[ "$(lines)" -ge 25 ]' 60; then
	q=$(qualities | sort -u | tr '\n' ' ')
	[ "$q" = "free-running " ] && passed "radard's frames before phc2sys: free-running (card-clock)" ||
		failed "radard's frames before phc2sys say: $q"
else
	failed "radard wrote $(lines) frame lines in 60 s: $(tail -n 3 "$OUT/radard.log" | tr '\n' ' ')"
fi
# The board's phc2sys for the card, its -w (wait for ptp4l, TAI - UTC from
# it) replaced by -O 37.
args=$(sed -n 's|^ExecStart=/usr/sbin/phc2sys ||p' /etc/ptp/board/radar-phc2sys-card.service |
	sed "s|/dev/fpga-ptp|$PTP|; s|-w|-O 37|")
case $args in
*-S*-R*) ;;
*) failed "the board's radar-phc2sys-card.service has no phc2sys -S ... -R line: '$args'" ;;
esac
log "phc2sys $args (the board's command line)"
# shellcheck disable=SC2086 # a word list
phc2sys $args -m -q -l 6 >"$OUT/phc2sys.log" 2>&1 &
phc2sys_pid=$!
# Locked: the servo's state s2 on 8 updates in a row (2 s at 4 Hz).
s2_run() { awk '/ s2 / { n++; next } / s[01] / { n = 0 } END { exit !(n >= 8) }' "$OUT/phc2sys.log"; }
# step MS WHAT: the system clock steps (and is marked synchronised again, as
# phc2sys-system does at the same update); radard's frames must go to
# holdover and come back to locked once phc2sys has stepped the card.
step() {
	from=$(($(lines) + 1))
	p2p-suite sysclock --step-ms "$1" --synced >"$OUT/step$1.ktap" 2>&1 ||
		failed "step $1 ms: $(tail -n 2 "$OUT/step$1.ktap")"
	t0=$(uptime_s)
	if wait_for "quality_from $from holdover" 15; then
		th=$(($(uptime_s) - t0))
		from=$(($(lines) + 1))
		if wait_for "quality_from $from locked" 30; then
			tl=$(($(uptime_s) - t0))
			passed "$2 (system clock stepped $1 ms): radard's frames went to holdover within $th s and were locked again within $tl s"
			figure "step_${3}_locked_again_s" "$tl"
		else
			failed "$2: after the step radard's frames did not come back to locked within 30 s ($(qualities | tail -n 1))"
		fi
	else
		failed "$2 (system clock stepped $1 ms): radard's frames never said holdover ($(qualities | tail -n 1))"
	fi
}
t0=$(uptime_s)
from=$(($(lines) + 1))
if wait_for s2_run 60; then
	passed "phc2sys locked the card to CLOCK_REALTIME in $(($(uptime_s) - t0)) s"
	figure phc2sys_lock_s $(($(uptime_s) - t0))
	if wait_for "quality_from $from locked" 30; then
		passed "radard's frames say locked $(($(uptime_s) - t0)) s after phc2sys started"
	else
		failed "radard's frames did not say locked within 30 s of phc2sys locking ($(qualities | tail -n 1))"
	fi
	sleep 10
	# The offsets phc2sys measured over the last 10 s (40 updates).
	hold=$(awk '/ s2 / { v = $5 < 0 ? -$5 : $5; a[n++] = v } END {
		m = 0; for (i = (n > 40 ? n - 40 : 0); i < n; i++) if (a[i] > m) m = a[i]; print m }' "$OUT/phc2sys.log")
	figure phc2sys_hold_max_ns "${hold:-null}"
	passed "phc2sys held the card (+100 ppm off) within $hold ns of CLOCK_REALTIME over 10 s"
	# The bounds radard's locked frames carried so far (median, largest).
	sed -n 's/.*"time_quality":"locked","time_bound_ns":\([0-9]*\).*/\1/p' "$OUT/frames.jsonl" |
		sort -n >"$OUT/bounds"
	n=$(wc -l <"$OUT/bounds")
	if [ "$n" -gt 0 ]; then
		figure radard_locked_bound_p50_ns "$(sed -n "$(((n + 1) / 2))p" "$OUT/bounds")"
		figure radard_locked_bound_max_ns "$(tail -n 1 "$OUT/bounds")"
	fi
	# Network time that comes an hour late (a unit booted without it), then
	# a step back.
	step 3600000 "late network time" late
	step -300 "a step back" back
	grep -q 'radard: time: the frames. clock (/dev/ptp[0-9]*) stepped by' "$OUT/radard.log" &&
		passed "radard logged the card's clock steps: $(grep 'stepped by' "$OUT/radard.log" | sed 's/^radard: time: //' | tr '\n' ';')" ||
		failed "radard logged no step of the card's clock"
else
	failed "phc2sys did not lock in 60 s: $(tail -n 3 "$OUT/phc2sys.log" | tr '\n' ' ')"
fi
kill -TERM "$radard_pid" 2>/dev/null
wait_for "! kill -0 $radard_pid 2>/dev/null" 30 || failed "radard still running 30 s after SIGTERM"
wait "$radard_pid" 2>/dev/null
rc=$?
[ "$rc" = 0 ] || failed "radard exit status $rc: $(tail -n 3 "$OUT/radard.log" | tr '\n' ' ')"
# The frames held after their predecessors when the card stepped back.
held=$(sed -n 's/^ *"frames_held": \([0-9]*\),*$/\1/p' "$OUT/radard.json")
figure radard_frames_held "${held:-null}"
[ "${held:-0}" -gt 0 ] && passed "radard held $held frames after their predecessors while the card's clock was behind them" ||
	failed "radard's summary says ${held:-no} frames held after the card stepped back"
# Every frame's time after the one before.
# (As strings, shorter first: 19 digits are beyond a double's precision;
# before phc2sys the card's clock may be far from today's.)
awk -F'"utc_ns":' 'function after(a, b) { return length(a) != length(b) ? length(a) > length(b) : a > b }
	NF > 1 { split($2, a, ","); t = a[1] ""; if (n++ && !after(t, last)) { bad++; print "not after: " last " then " t >"/dev/stderr" } last = t }
	END { print n + 0, bad + 0 }' "$OUT/frames.jsonl" >"$OUT/order"
read -r n_lines bad <"$OUT/order"
[ "$bad" = 0 ] && [ "$n_lines" -gt 100 ] &&
	passed "radard's $n_lines frame times strictly increase over the step" ||
	failed "radard's frame times: $bad of $n_lines not after the previous frame's"
figure radard_frames "$n_lines"

# --- 5. frames' UTC against the guest's clock --------------------------------------
if p2p-suite ptp-frames --frames 200 >"$OUT/frames.ktap" 2>"$OUT/frames.err"; then
	passed "$(sed -n 's/^# ptp-frames: //p' "$OUT/frames.ktap")"
	for k in utc_vs_guest_p50_ns utc_vs_guest_abs_p99_ns utc_vs_guest_max_ns first_chunk_after_utc_min_ns \
		first_chunk_after_utc_p50_ns frame_after_utc_p50_ns; do
		figure "$k" "$(fig "$k" "$OUT/frames.ktap")"
	done
	frames_verified=$(fig frames_verified "$OUT/frames.ktap")
else
	failed "ptp-frames: $(sed -n 's/^# ptp-frames: //p' "$OUT/frames.ktap" | head -n 3) $(tail -n 2 "$OUT/frames.err")"
fi
kill "$phc2sys_pid" 2>/dev/null
wait "$phc2sys_pid" 2>/dev/null

# --- 6. ts2phc from a PPS at the system clock's seconds ----------------------------
# The board's ts2phc configuration (its step thresholds, the card's pin),
# the PPS's time from the system clock ("generic") instead of NMEA.
sed -e "s|^\[/dev/fpga-ptp\]|[$PTP]|" -e '/^ts2phc.nmea_serialport/d' -e '/^leapfile/d' \
	/etc/ptp/board/ts2phc.conf >"$OUT/ts2phc.conf"
# Up to five runs of 16 s: on a loaded host (a CI machine building a
# kernel beside the guest) the guest can be away at the second. The pulser
# then leaves that second's edge out (a receiver gives a pulse on time or
# none), but one descheduled between its check and the edge still gives an
# edge milliseconds late, past the configuration's 1 ms step threshold, and
# ts2phc steps the card again instead of settling; too many left out and
# 16 s hold too few edges to lock (a CI run saw 7, 12 and 8 of 16 left out
# in three runs of the debug kernel's guest). Only a run with such edges is tried
# again; the bounds are the same in every run, and the figures are the
# last run's.
ts2phc_try=0
while :; do
	ts2phc_try=$((ts2phc_try + 1))
	p2p-suite pps-pulser --seconds 16 >"$OUT/pulser.ktap" 2>&1 &
	pulser_pid=$!
	ts2phc -f "$OUT/ts2phc.conf" -s generic -m -q -l 7 >"$OUT/ts2phc.log" 2>&1 &
	ts2phc_pid=$!
	wait "$pulser_pid"
	kill "$ts2phc_pid" 2>/dev/null
	wait "$ts2phc_pid" 2>/dev/null
	late=$(fig edge_late_median_ns "$OUT/pulser.ktap")
	late_max=$(fig edge_late_max_ns "$OUT/pulser.ktap")
	skipped=$(fig edges_skipped "$OUT/pulser.ktap")
	# Its offsets once locked (s2), ns: |median| and the largest.
	awk '/master offset/ && / s2 / { v = $(NF - 3); print (v < 0 ? -v : v) }' "$OUT/ts2phc.log" | sort -n >"$OUT/ts2phc.s2"
	n=$(wc -l <"$OUT/ts2phc.s2")
	[ "$n" -ge 4 ] && break
	[ "$ts2phc_try" -lt 5 ] && { [ "${late_max:-0}" -gt 1000000 ] || [ "${skipped:-0}" -gt 0 ]; } || break
	log "ts2phc run $ts2phc_try did not lock (${n} updates in s2; the edges up to ${late_max} ns late, ${skipped} left out): again"
done
figure ts2phc_runs "$ts2phc_try"
if [ "$n" -ge 4 ]; then
	med=$(sed -n "$(((n + 1) / 2))p" "$OUT/ts2phc.s2")
	figure ts2phc_locked_median_ns "$med"
	figure ts2phc_locked_max_ns "$(tail -n 1 "$OUT/ts2phc.s2")"
	figure pps_edge_late_median_ns "${late:-null}"
	figure pps_edge_late_max_ns "${late_max:-null}"
	figure pps_edges_skipped "${skipped:-null}"
	# Its offsets are the edges' lateness (the edge is taken as the whole
	# second): the median within the median lateness and 1 ms.
	if [ "$med" -le $((${late:-0} + 1000000)) ]; then
		passed "ts2phc locked the card to PPS edges at CLOCK_REALTIME's seconds (run $ts2phc_try): $n updates in s2, |offset| median $med ns (the edges were $late ns late, median; $late_max ns at most)"
	else
		failed "ts2phc's |offset| median $med ns, more than the edges' median lateness $late ns + 1 ms"
		grep -E 'extts|offset|step|jump' "$OUT/ts2phc.log" | tail -n 20 >&2
	fi
else
	failed "ts2phc did not lock in 16 s ($ts2phc_try runs; the edges up to ${late_max:-?} ns late, ${skipped:-?} left out): $(grep -c 'master offset' "$OUT/ts2phc.log") offsets; $(tail -n 3 "$OUT/ts2phc.log" | tr '\n' ' ')"
fi

# --- 7. unload and reload under an open clock ------------------------------------
sleep 1000 <"$PTP" &
holder=$!
if ! rmmod fpga_p2p 2>"$OUT/rmmod.err"; then
	failed "rmmod fpga_p2p with $PTP held open: $(cat "$OUT/rmmod.err")"
elif phc_ctl "$PTP" get >"$OUT/gone.log" 2>&1 && grep -q 'clock time is' "$OUT/gone.log"; then
	failed "after rmmod the old clock $PTP still reads: $(tail -n 1 "$OUT/gone.log")"
elif ! insmod /lib/modules/radar/fpga_p2p.ko 2>"$OUT/insmod.err"; then
	failed "insmod fpga_p2p after the unload: $(cat "$OUT/insmod.err")"
else
	wait_for '[ -c /dev/fpga-p2p0 ]' 10
	new=''
	for d in /sys/class/misc/fpga-p2p0/device/ptp/ptp*; do
		[ -d "$d" ] && new=/dev/${d##*/}
	done
	if [ -n "$new" ] && phc_ctl "$new" get >"$OUT/new.log" 2>&1 && grep -q 'clock time is' "$OUT/new.log"; then
		passed "unloaded with $PTP held open (it then failed: $(tail -n 1 "$OUT/gone.log" | sed 's/^phc_ctl[^:]*: //')); reloaded, the new clock $new reads"
	else
		failed "after the reload the card's clock '$new' does not read: $(tail -n 1 "$OUT/new.log" 2>/dev/null)"
	fi
fi
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null

figure frames_verified "${frames_verified:-0}"
finish
