#!/bin/sh
# Guest side of the QEMU harness: /init (PID 1) of the initramfs that
# tests/qemu/run.sh builds, run by busybox sh. It runs the suites named by
# radar.suite=NAME[,NAME...]|all|shell on the kernel command line, each on freshly
# loaded modules, and reports on the result channel (the second serial port,
# /dev/ttyS1); the first serial port stays the kernel console. The protocol is
# in tests/qemu/README.md. On the host, `sh guest-init.sh --list` prints the
# suite table (run.sh uses it to know the suites and their time limits).

# The suites, in the order `all` runs them: name, time limit in the guest (s),
# command. The command runs with both modules freshly loaded (except
# lifecycle, which loads and unloads them itself) and prints a KTAP document
# on stdout (tests/qemu/README.md says what it must hold). uapi is the C
# kselftest of the uapi (kmod/tests/uapi_test.c). stream runs the acceptance sizes (its
# defaults: 100000 frames of 16 KiB, then 500 frames of 4 MiB); on the debug
# kernel (KASAN, lockdep) under TCG that takes ~260 s, lifecycle ~140 s, the
# others 10-90 s; the limits leave room for a loaded host. radard runs the
# appliance program itself (tests/qemu/radard/suite.sh); ptp the card's clock
# with linuxptp's tools (tests/qemu/ptp/suite.sh). shutdown is not a
# program: it always runs last (shutdown_suite), after @@done, and ends the
# guest with `reboot -f` while a capture streams; the emulated card then
# says whether the driver's .shutdown stopped it (tests/qemu/README.md).
SUITES='
stream      900 p2p-suite stream
ownership   300 p2p-suite ownership
revocation  900 p2p-suite revocation
crash       900 p2p-suite crash
badinput    600 p2p-suite badinput
uapi        300 fpga_p2p_uapi_test
duplex      300 p2p-suite duplex --frames 300
neighbours  300 p2p-suite neighbours
faults      300 p2p-suite faults --probe
radard      600 sh /etc/radard/suite.sh
ptp         300 sh /etc/ptp/suite.sh
lifecycle   900 /init --lifecycle 100
shutdown    120 reboot -f while streaming
'
# The arm64 guests' suites (run.sh --arch arm64: QEMU's aarch64 virt machine
# with an SMMUv3, Debian's arm64 kernel, the image's aarch64 executables), at
# the counts docs/requirements.md asks of arm64 (at least 10,000 frames
# streamed and verified, 100 revocations, 100 crashes, 10,000 hostile calls):
# smaller than the x86 guests', which run the same code at full counts, to
# keep the test command's time; what the suites assert is the same.
SUITES_ARM64='
stream      900 p2p-suite stream --small-frames 10000 --full-frames 100 --chunk-event-frames 1000
ownership   300 p2p-suite ownership
revocation  900 p2p-suite revocation --cycles 100
crash       900 p2p-suite crash --cycles 100
badinput    600 p2p-suite badinput --calls 10000
uapi        300 fpga_p2p_uapi_test
duplex      300 p2p-suite duplex --frames 300
neighbours  300 p2p-suite neighbours
faults      300 p2p-suite faults --probe
radard      600 sh /etc/radard/suite.sh
lifecycle   900 /init --lifecycle 20
shutdown    120 reboot -f while streaming
'
# The nv-p2p module (radar.p2p=shim|nvidia on the kernel command line):
# kmod/nvp2p_shim or NVIDIA's own nvidia-p2p. p2p-suite is told which
# (--p2p), since only the shim has debugfs counters and fault injection.
P2P=shim
# Module parameters, and what a lifecycle cycle runs to prove a short stream works.
SHIM_ARGS=''
FPGA_ARGS=''
SMOKE_CMD='p2p-suite smoke --frames 4'
# A process that opens the device and sleeps until killed.
HOLD_CMD='p2p-suite hold-open'
# A hold-open attempt every HOLD_EVERY cycles of lifecycle.
HOLD_EVERY=5

MODDIR=/lib/modules/radar
DEV=/dev/fpga-p2p0
# The result channel: the second serial port, or what radar.results= names
# (the arm64 guests: a PCI serial card, /dev/ttyS0).
RES=/dev/ttyS1
KMEMLEAK=/sys/kernel/debug/kmemleak
TRACEFS=/sys/kernel/tracing
# The card's PCI vendor and device ID (kmod/fpga_p2p_regs.h).
CARD_IDS='0x10ee 0x9038'
# The dma_sync_single_* detector: on, or off and why (sync_probe_setup).
SYNC_PROBE=off
CARD=''

# --- helpers -----------------------------------------------------------------

# set_p2p shim|nvidia: which nv-p2p module the suites load (default shim).
set_p2p() {
	case ${1:-shim} in
	nvidia) P2P=nvidia P2P_MOD=nvidia_p2p ;;
	*) P2P=shim P2P_MOD=nvp2p_shim ;;
	esac
	SMOKE_CMD="p2p-suite smoke --frames 4 --p2p $P2P"
}

# The suite table of this guest's architecture (list_suites ARCH on the host).
suite_table() {
	case ${1:-$(uname -m)} in
	arm64 | aarch64) printf '%s\n' "$SUITES_ARM64" ;;
	*) printf '%s\n' "$SUITES" ;;
	esac
}

# Print the suite table as "name limit" lines.
list_suites() {
	suite_table "${1:-}" | while read -r name limit _; do
		[ -n "$name" ] && echo "$name $limit"
	done
}

# Each line from a subshell: closing a serial port waits for its output to
# drain, but that wait ends at any pending signal and the rest is discarded;
# PID 1 gets SIGCHLD for every orphan that exits (a line lost its tail that
# way on the arm64 guests). A fresh process with no children gets none.
emit() { (echo "$*" >"$RES"); }
# A line in the kernel log (and so on the console), to split it per suite.
kmsg() { echo "radar-harness: $*" >/dev/kmsg; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
# Keep one line, free of characters the result protocol uses.
oneline() { tr '\n' ' ' | sed 's/["\\]/ /g' | cut -c1-300; }
# ktap_report NAME true|false FIGURES-JSON DETAIL: the KTAP document of a
# suite the guest script runs itself, shaped like p2p-suite's
# (tests/capture-suite/src/ktap.rs): one test named after the suite.
ktap_report() {
	echo "KTAP version 1"
	echo "1..1"
	echo "# $1: $4"
	echo "# figures: $3"
	if [ "$2" = true ]; then echo "ok 1 $1"; else echo "not ok 1 $1"; fi
}

is_loaded() { grep -q "^$1 " /proc/modules; }

# Load dependencies of the Debian kernel (deps.order, from run.sh), then ours.
load_modules() {
	if [ -f "$MODDIR/deps.order" ]; then
		while read -r ko; do
			m=$(basename "$ko" .ko)
			is_loaded "$m" || insmod "$MODDIR/$ko" || return 1
		done <"$MODDIR/deps.order"
	fi
	if [ "$P2P" = nvidia ]; then
		insmod "$MODDIR/nvidia-p2p.ko" || return 1
	else
		# shellcheck disable=SC2086 # the arguments are word lists
		insmod "$MODDIR/nvp2p_shim.ko" $SHIM_ARGS || return 1
	fi
	# shellcheck disable=SC2086
	insmod "$MODDIR/fpga_p2p.ko" $FPGA_ARGS || { rmmod "$P2P_MOD"; return 1; }
	wait_for "[ -c $DEV ]" 10 || { echo "$DEV did not appear"; return 1; }
}

# Processes that have a device of ours open, as "pid(comm)".
device_users() {
	for fd in /proc/[0-9]*/fd/*; do
		case $(readlink "$fd" 2>/dev/null) in
		/dev/fpga-p2p*)
			pid=${fd#/proc/}
			pid=${pid%%/*}
			echo "$pid($(cat "/proc/$pid/comm" 2>/dev/null))"
			;;
		esac
	done | sort -u | tr '\n' ' '
}

# unload_one MODULE: rmmod, retried for up to 5 s (a release that finishes
# asynchronously right after the last close is not a leak); says why not.
unload_one() {
	is_loaded "$1" || return 0
	n=0
	until rmmod "$1" 2>/tmp/rmmod.err; do
		n=$((n + 1))
		if [ "$n" -ge 50 ]; then
			cat /tmp/rmmod.err
			# shellcheck disable=SC2012 # module names are plain words
			holders=$(ls "/sys/module/$1/holders" 2>/dev/null | tr '\n' ' ')
			users=$(device_users)
			echo "$1: refcnt $(cat "/sys/module/$1/refcnt" 2>/dev/null)," \
				"holders: ${holders:-none}, device open by: ${users:-nobody}"
			return 1
		fi
		usleep 100000
	done
	[ "$n" -gt 0 ] && echo "rmmod $1 succeeded after $n retries (0.1 s each)"
	return 0
}

unload_modules() {
	unload_one fpga_p2p || return 1
	unload_one "$P2P_MOD"
}

# wait_for CONDITION SECONDS: poll a shell condition every 0.1 s.
wait_for() {
	n=$(($2 * 10))
	while [ "$n" -gt 0 ]; do
		eval "$1" && return 0
		usleep 100000
		n=$((n - 1))
	done
	return 1
}

# kmemleak (debug kernel only): scan twice (an object must be unreferenced for
# two scans and 5 s old to be reported), then copy the report into the kernel
# log so the host counts it with everything else.
kmemleak_check() {
	[ -w "$KMEMLEAK" ] || return 0
	sleep 5
	echo scan >"$KMEMLEAK"
	echo scan >"$KMEMLEAK"
	while IFS= read -r line; do
		echo "kmemleak report: $line" >/dev/kmsg
	done <"$KMEMLEAK"
}

# --- DMA-API misuse: dma_sync_single_* on the ring ---------------------------
# The ring is one scatter-gather mapping; a dma_sync_single_*() on a piece of
# it is not defined by the DMA API, but nothing on x86 notices (the device is
# coherent behind intel-iommu; swiotlb syncs any sub-range of a bounced
# entry; DMA-API debug accepts a single sync inside one SG entry). So the
# calls themselves are watched: kprobe events on both functions record the
# device's name (struct device starts with its kobject, whose first member
# is the name: +0(+0(%di)) on x86-64), and after each suite a call for the
# card becomes a report line in the kernel log. The driver maps nothing else
# for the card (descriptors are coherent memory), so any call is misuse.

sync_probe_setup() {
	for d in /sys/bus/pci/devices/*; do
		[ "$(cat "$d/vendor" "$d/device" 2>/dev/null | tr '\n' ' ')" = "$CARD_IDS " ] &&
			CARD=${d##*/}
	done
	if [ -z "$CARD" ]; then
		SYNC_PROBE='off:no-card'
		return
	fi
	mount -t tracefs tracefs "$TRACEFS" 2>/dev/null
	if [ ! -w "$TRACEFS/kprobe_events" ]; then
		SYNC_PROBE='off:no-kprobe-events'
		kmsg "dma_sync_single detector off: this kernel has no kprobe events" \
			"(CONFIG_KPROBE_EVENTS); a dma_sync_single_* on the ring goes unseen"
		return
	fi
	# The first argument's register: x86-64 %di, arm64 %x0.
	reg=%di
	[ "$(uname -m)" = aarch64 ] && reg=%x0
	for f in for_cpu for_device; do
		if ! echo "p:radar/sync_single_$f dma_sync_single_$f dev=+0(+0($reg)):string" \
			>>"$TRACEFS/kprobe_events" 2>/dev/null; then
			SYNC_PROBE="off:kprobe-on-dma_sync_single_$f-refused"
			kmsg "dma_sync_single detector off: the kernel refused a kprobe on dma_sync_single_$f"
			return
		fi
	done
	echo 256 >"$TRACEFS/buffer_size_kb"
	: >"$TRACEFS/trace"
	echo 1 >"$TRACEFS/events/radar/enable"
	echo 1 >"$TRACEFS/tracing_on"
	SYNC_PROBE=on
}

# After a suite: a call for the card is a report (the harness counts
# "DMA-API misuse:" lines); the trace is emptied for the next suite.
sync_probe_check() {
	[ "$SYNC_PROBE" = on ] || return 0
	for f in for_cpu for_device; do
		n=$(grep -c "sync_single_$f:.*dev=\"$CARD\"" "$TRACEFS/trace")
		[ "$n" -gt 0 ] || continue
		first=$(grep -m 1 "sync_single_$f:.*dev=\"$CARD\"" "$TRACEFS/trace" |
			sed 's/^ *//' | oneline)
		kmsg "DMA-API misuse: dma_sync_single_$f on the SG-mapped ring of $CARD" \
			"($n calls in the trace buffer; first: $first)"
	done
	: >"$TRACEFS/trace"
}

# The IOMMU in front of the card, for @@end: "<group>:<domain type>:<IOMMU>"
# (on arm64 the harness requires a DMA domain of the SMMUv3, e.g.
# "1:DMA:smmu3.0x0000000009050000"), or "none". On arm64 the device joins its
# group when the driver first binds (the SMMU's configuration is deferred to
# probe), so this is read after a suite, not at boot.
card_iommu() {
	d=/sys/bus/pci/devices/$CARD
	if [ -z "$CARD" ] || [ ! -e "$d/iommu_group" ]; then
		echo none
		return
	fi
	g=$(readlink "$d/iommu_group")
	i=$(readlink "$d/iommu" 2>/dev/null)
	echo "${g##*/}:$(cat "$d/iommu_group/type" 2>/dev/null || echo unknown):${i##*/}"
}

# --- lifecycle suite (runs as "/init --lifecycle N" under timeout) -------------

lifecycle() {
	cycles=$1
	done_cycles=0 refused=0
	fail=''
	i=1
	while [ "$i" -le "$cycles" ]; do
		if ! out=$(load_modules 2>&1); then
			fail="cycle $i: load failed: $out"
			break
		fi
		if ! out=$($SMOKE_CMD 2>&1); then
			fail="cycle $i: short stream failed: $(echo "$out" | tail -n 3)"
			unload_modules >/dev/null 2>&1
			break
		fi
		# fpga_p2p uses the nv-p2p module's symbols: it must refuse to go first.
		if rmmod "$P2P_MOD" 2>/dev/null || ! is_loaded "$P2P_MOD"; then
			fail="cycle $i: $P2P_MOD unloaded while fpga_p2p still used it"
			break
		fi
		if [ $((i % HOLD_EVERY)) -eq 0 ]; then
			# A process holds the device open: rmmod must be refused (the
			# kernel says EWOULDBLOCK for a module in use) and must succeed
			# after the process is gone.
			$HOLD_CMD >/dev/null 2>&1 &
			holder=$!
			wait_for "ls -l /proc/$holder/fd 2>/dev/null | grep -q fpga-p2p" 5 ||
				{ fail="cycle $i: holder did not open $DEV"; kill "$holder"; break; }
			if out=$(rmmod fpga_p2p 2>&1); then
				fail="cycle $i: rmmod fpga_p2p succeeded while $DEV was open"
				kill "$holder"
				break
			fi
			case $out in
			*"temporarily unavailable"* | *"busy"*) ;;
			*) fail="cycle $i: rmmod refused for an unexpected reason: $out"; kill "$holder"; break ;;
			esac
			is_loaded fpga_p2p || { fail="cycle $i: module gone though rmmod failed"; break; }
			refused=$((refused + 1))
			kill "$holder"
			wait "$holder" 2>/dev/null
		fi
		if ! out=$(unload_modules 2>&1); then
			fail="cycle $i: unload failed: $out"
			break
		fi
		if ! wait_for "[ ! -e $DEV ]" 5; then
			fail="cycle $i: $DEV still there after unload"
			break
		fi
		done_cycles=$i
		i=$((i + 1))
	done
	[ "$done_cycles" -lt "$cycles" ] && [ -z "$fail" ] && fail="only $done_cycles of $cycles cycles"
	passed=true
	[ -n "$fail" ] && passed=false
	detail=${fail:-"$done_cycles load/unload cycles, rmmod refused $refused times while $DEV was open"}
	detail=$(printf '%s' "$detail" | oneline)
	ktap_report lifecycle "$passed" \
		"{\"suite\":\"lifecycle\",\"passed\":$passed,\"load_cycles\":$done_cycles,\"detail\":\"$detail\"}" \
		"$detail"
	[ "$passed" = true ]
}

# --- running one suite ---------------------------------------------------------

run_suite() {
	name=$1 limit=$2
	shift 2
	emit "@@begin $name"
	kmsg "begin $name"
	t0=$(uptime_s)
	load=ok unload=ok rc=0
	if [ "$name" != lifecycle ]; then
		if ! load_modules >/tmp/load.err 2>&1; then
			load=fail
			unload_modules >/dev/null 2>&1
		fi
	fi
	if [ "$load" = ok ]; then
		# p2p-suite is told which nv-p2p module it runs on.
		[ "$1" = p2p-suite ] && set -- "$@" --p2p "$P2P"
		timeout -s KILL "$limit" "$@" >/tmp/suite.out 2>/tmp/suite.err
		rc=$?
		# The program's KTAP report, line by line; its stderr is log.
		while IFS= read -r line; do emit "@@ktap $line"; done </tmp/suite.out
		while IFS= read -r line; do emit "@@log $name $line"; done </tmp/suite.err
		# Every suite ends unloaded (lifecycle normally unloaded already).
		if unload_modules >/tmp/unload.err 2>&1; then
			while IFS= read -r line; do emit "@@log $name unload: $line"; done </tmp/unload.err
		else
			unload=fail
			# Leave a clean guest for the next suite: end whatever still holds
			# the modules (kill -1 spares PID 1), then retry.
			kill -KILL -1 2>/dev/null
			sleep 1
			if unload_modules >>/tmp/unload.err 2>&1; then
				echo "unloaded after killing every other process" >>/tmp/unload.err
			fi
		fi
	else
		while IFS= read -r line; do emit "@@log $name load: $line"; done </tmp/load.err
	fi
	[ "$unload" = fail ] && while IFS= read -r line; do
		emit "@@log $name unload: $line"
	done </tmp/unload.err
	sync_probe_check
	t1=$(uptime_s)
	kmsg "end $name"
	emit "@@end $name rc=$rc load=$load unload=$unload duration_s=$(echo "$t1 $t0" | awk '{ printf "%.1f", $1 - $2 }') card_iommu=$(card_iommu)"
}

# --- shutdown suite -------------------------------------------------------------

# A capture streams, then `reboot -f`: the kernel's device shutdown calls the
# driver's .shutdown, which must stop the engine and bus mastering before the
# machine resets. The guest cannot see the result (it is gone by then): the
# card writes its state at the reset to the host (shutdown-log), and the
# harness judges the suite by it. Never returns.
shutdown_suite() {
	emit "@@begin shutdown"
	kmsg "begin shutdown"
	t0=$(uptime_s)
	fail=''
	frames=/sys/class/misc/fpga-p2p0/counters/frames
	if ! load_modules >/tmp/load.err 2>&1; then
		while IFS= read -r line; do emit "@@log shutdown load: $line"; done </tmp/load.err
		emit "@@end shutdown rc=1 load=fail unload=reboot duration_s=0"
		sync
		reboot -f
	fi
	# Frames for hours at the test pattern's rate: it streams until the reset.
	p2p-suite smoke --frames 1000000000 --p2p "$P2P" >/tmp/shutdown.out 2>&1 &
	f0=$(cat "$frames")
	if ! wait_for "[ \$(cat $frames) -ge $((f0 + 100)) ]" 30; then
		fail="the capture did not stream (frames $(cat "$frames")): $(tail -n 3 /tmp/shutdown.out | oneline)"
	fi
	f1=$(cat "$frames")
	passed=true
	[ -n "$fail" ] && passed=false
	detail=${fail:-"a capture streaming ($((f1 - f0)) frames so far, still running) when reboot -f ran"}
	detail=$(printf '%s' "$detail" | oneline)
	ktap_report shutdown "$passed" \
		"{\"suite\":\"shutdown\",\"passed\":$passed,\"frames_verified\":0,\"detail\":\"$detail\"}" \
		"$detail" | while IFS= read -r line; do emit "@@ktap $line"; done
	emit "@@end shutdown rc=$([ "$passed" = true ] && echo 0 || echo 1) load=ok unload=reboot duration_s=$(echo "$(uptime_s) $t0" | awk '{ printf "%.1f", $1 - $2 }') card_iommu=$(card_iommu)"
	# No "end" mark: what the kernel logs while shutting down is this suite's.
	sync
	reboot -f
}

# --- PID 1 ---------------------------------------------------------------------

main() {
	/bin/busybox mkdir -p /proc /sys /dev /tmp /usr/bin /usr/sbin /sbin
	/bin/busybox --install -s
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	mount -t debugfs debugfs /sys/kernel/debug
	# No automatic kmemleak scans: each takes tens of seconds of a vCPU
	# under TCG and would slow whichever suite it lands in; the check at the
	# end scans explicitly.
	[ -w "$KMEMLEAK" ] && echo scan=off >"$KMEMLEAK"
	mount -t tmpfs tmpfs /tmp
	exec </dev/console >/dev/console 2>&1
	export PATH=/bin:/sbin:/usr/bin:/usr/sbin

	suite=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^radar\.suite=//p')
	res=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^radar\.results=//p')
	[ -n "$res" ] && RES=$res
	set_p2p "$(tr ' ' '\n' </proc/cmdline | sed -n 's/^radar\.p2p=//p')"
	if [ "$suite" = shell ]; then
		echo "radar-harness: interactive shell; modules in $MODDIR, 'reboot -f' to leave"
		setsid cttyhack sh -l
		reboot -f
	fi
	if [ ! -c "$RES" ]; then
		echo "radar-harness: no result channel $RES" >&2
		reboot -f
	fi
	stty -F "$RES" raw -echo 2>/dev/null

	if [ "$suite" = all ]; then
		names=$(list_suites | cut -d' ' -f1 | tr '\n' ' ')
	else
		names=$(echo "$suite" | tr ',' ' ')
	fi
	sync_probe_setup
	emit "@@plan kernel=$(uname -r) arch=$(uname -m) uptime_s=$(uptime_s) dma_sync_probe=$SYNC_PROBE suites=$(echo "$names" | tr ' ' ',' | sed 's/,$//')"
	shutdown=''
	for want in $names; do
		# The shutdown suite ends the guest: it runs last, whatever the order.
		if [ "$want" = shutdown ]; then
			shutdown=1
			continue
		fi
		row=$(suite_table | awk -v n="$want" '$1 == n')
		if [ -z "$row" ]; then
			emit "@@begin $want"
			emit "@@end $want rc=127 load=skip unload=skip duration_s=0 no such suite"
			continue
		fi
		# shellcheck disable=SC2086 # the row is a word list
		run_suite $row
	done
	# One kmemleak check at the end, with the modules unloaded (a scan takes
	# tens of seconds under KASAN and TCG: too slow for one per suite). Leak
	# reports name the allocating module in their backtraces.
	if [ -w "$KMEMLEAK" ]; then
		emit "@@kmemleak begin"
		kmsg "begin kmemleak"
		kmemleak_check
		kmsg "end kmemleak"
		emit "@@kmemleak end uptime_s=$(uptime_s)"
	fi
	emit "@@done uptime_s=$(uptime_s)"
	[ -n "$shutdown" ] && shutdown_suite
	sync
	reboot -f
}

set_p2p "$(tr ' ' '\n' </proc/cmdline 2>/dev/null | sed -n 's/^radar\.p2p=//p')"
case ${1:-} in
--list) list_suites "${2:-}" ;;
--lifecycle) lifecycle "${2:-50}" ;;
*) main ;;
esac
