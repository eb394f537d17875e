#!/bin/sh
# Init of the board test's QEMU guest (busybox). radar.board= on the kernel
# command line picks the test: "gpio" (debug kernel: radard pulses the
# FPGA reset line on a gpio-sim chip, and names a missing chip or line) or
# "udev" (Debian kernel: systemd-udevd applies the board's rule to the
# fpga_p2p module's node). Results go to ttyS1 as
#   @@check <name> ok|fail <detail>   and finally   @@done
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /run /tmp
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
R=/dev/ttyS1

check() { # check NAME OK DETAIL: OK is 0 (pass) or not
	if [ "$2" = 0 ]; then echo "@@check $1 ok $3" >$R; else echo "@@check $1 fail $3" >$R; fi
}
# wait_for COMMAND SECONDS
wait_for() {
	i=0
	while [ "$i" -lt $(($2 * 10)) ]; do
		eval "$1" && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
finish() {
	echo "@@done" >$R
	sync
	reboot -f
}

test_name=$(sed -n 's/.*radar\.board=\([a-z]*\).*/\1/p' /proc/cmdline)
echo "@@plan $test_name kernel=$(uname -r)" >$R

gpio_test() {
	mount -t configfs none /sys/kernel/config
	mount -t debugfs none /sys/kernel/debug
	G=/sys/kernel/config/gpio-sim/fpga
	mkdir "$G" "$G/bank0" "$G/bank0/line5"
	echo 8 >"$G/bank0/num_lines"
	echo radar-fpga-sim >"$G/bank0/label"
	echo FPGA_RESET_N >"$G/bank0/line5/name"
	echo 1 >"$G/live"
	dev=$(cat "$G/dev_name")
	chip=$(cat "$G/bank0/chip_name")
	V=/sys/devices/platform/$dev/$chip/sim_gpio5
	# FPGA_RESET_N is pulled up on the board: idle = out of reset.
	echo pull-up >"$V/pull"
	check gpio-sim-chip "$([ -r "$V/value" ]; echo $?)" "$chip ($dev) label radar-fpga-sim, line 5 FPGA_RESET_N, idle value $(cat "$V/value")"

	write_config() { # write_config CHIP LINE
		cat >/tmp/radard.toml <<-EOF
			[source]
			event_timeout_ms = 30000
			chunk_period_us = 2000
			[output]
			print_every = 0
			[fpga_reset]
			enabled = true
			chip = "$1"
			line = "$2"
			active_low = true
			pulse_us = 300000
			settle_ms = 10
		EOF
	}
	# The watcher: every change of the line's value, with the uptime.
	watch_start() {
		rm -f /tmp/stop /tmp/trace
		(
			read -r prev <"$V/value"
			read -r up _ </proc/uptime
			echo "$up $prev" >/tmp/trace
			while [ ! -f /tmp/stop ]; do
				read -r cur <"$V/value"
				if [ "$cur" != "$prev" ]; then
					read -r up _ </proc/uptime
					echo "$up $cur" >>/tmp/trace
					prev=$cur
				fi
				# ~10 ms between looks: a 300 ms pulse is seen, and the
				# vCPU is left to radard.
				sleep 0.01
			done
		) &
		watcher=$!
	}
	watch_stop() {
		touch /tmp/stop
		wait "$watcher"
	}
	values() { awk '{ printf "%s", $2 }' /tmp/trace; }

	# 1. The named line is pulsed: 1 -> 0 (reset, 300 ms) -> 1, then held.
	write_config radar-fpga-sim FPGA_RESET_N
	watch_start
	sleep 0.3
	radard --config /tmp/radard.toml --content test-pattern --frames 40 --no-rt >/tmp/radard.log 2>&1 &
	rpid=$!
	wait_for "grep -q 'radard: streaming' /tmp/radard.log" 120
	held=$(grep FPGA_RESET_N /sys/kernel/debug/gpio)
	wait "$rpid"
	rc=$?
	sleep 0.3
	watch_stop
	sed 's/^/radard: /' /tmp/radard.log >$R
	sed 's/^/trace: /' /tmp/trace >$R
	check radard-pulse-run "$([ "$rc" = 0 ] || [ "$rc" = 3 ]; echo $?)" "radard exit status $rc"
	check radard-says-pulsed "$(grep -q 'FPGA reset pulsed: line "FPGA_RESET_N"' /tmp/radard.log; echo $?)" "$(grep -m1 'FPGA reset' /tmp/radard.log)"
	check line-pulsed-low-then-high "$([ "$(values)" = 101 ]; echo $?)" "values seen: $(values) (want 101)"
	width=$(awk 'NR == 2 { t0 = $1 } NR == 3 { printf "%d", ($1 - t0) * 1000 }' /tmp/trace)
	check pulse-width "$([ "${width:-0}" -ge 200 ] && [ "${width:-0}" -le 5000 ]; echo $?)" "${width:-?} ms low (pulse_us = 300000)"
	check line-held-by-radard "$(echo "$held" | grep -q 'radard-fpga-reset' && echo "$held" | grep -q ' out '; echo $?)" "$(echo "$held" | tr -s ' ')"

	# 2. A line that does not exist: a clear error naming the key, no pulse.
	write_config radar-fpga-sim NO_SUCH_LINE
	watch_start
	radard --config /tmp/radard.toml --content test-pattern --frames 5 --no-rt >/tmp/radard.log 2>&1
	rc=$?
	watch_stop
	msg=$(grep -m1 'fpga_reset' /tmp/radard.log)
	check missing-line-refused "$([ "$rc" = 1 ]; echo $?)" "exit status $rc"
	check missing-line-named "$(echo "$msg" | grep -q 'fpga_reset.line' && echo "$msg" | grep -q 'NO_SUCH_LINE'; echo $?)" "$msg"
	check missing-line-no-pulse "$([ "$(values)" = 1 ]; echo $?)" "values seen: $(values)"

	# 3. A chip that does not exist: the key, and the chips there are.
	write_config no-such-chip FPGA_RESET_N
	radard --config /tmp/radard.toml --content test-pattern --frames 5 --no-rt >/tmp/radard.log 2>&1
	rc=$?
	msg=$(grep -m1 'fpga_reset' /tmp/radard.log)
	check missing-chip-refused "$([ "$rc" = 1 ]; echo $?)" "exit status $rc"
	check missing-chip-named "$(echo "$msg" | grep -q 'fpga_reset.chip' && echo "$msg" | grep -q 'radar-fpga-sim'; echo $?)" "$msg"
}

udev_test() {
	MODDIR=/lib/modules/radar
	while read -r ko; do
		insmod "$MODDIR/$ko" 2>/dev/null
	done <"$MODDIR/deps.order"
	insmod "$MODDIR/nvp2p_shim.ko" || { check load-shim 1 "insmod nvp2p_shim failed"; return; }
	# Without udev: devtmpfs' default, root 0600.
	insmod "$MODDIR/fpga_p2p.ko"
	wait_for '[ -c /dev/fpga-p2p0 ]' 20
	before=$(stat -c '%G %a' /dev/fpga-p2p0 2>&1)
	check node-without-udev "$([ "$before" = 'root 600' ]; echo $?)" "/dev/fpga-p2p0: $before"
	rmmod fpga_p2p
	wait_for '[ ! -e /dev/fpga-p2p0 ]' 20
	mkdir -p /run/udev
	/lib/systemd/systemd-udevd --daemon >/tmp/udevd.log 2>&1
	wait_for '[ -S /run/udev/control ]' 30
	check udevd-running "$([ -S /run/udev/control ]; echo $?)" "$(head -c 300 /tmp/udevd.log)"
	insmod "$MODDIR/fpga_p2p.ko"
	wait_for '[ -c /dev/fpga-p2p0 ]' 20
	udevadm settle --timeout=60
	after=$(stat -c '%G %a' /dev/fpga-p2p0 2>&1)
	check node-with-rule "$([ "$after" = 'radar 660' ]; echo $?)" "/dev/fpga-p2p0: $after (rule 60-fpga-p2p.rules)"
	# The card's clock (its PTP hardware clock, named after the card's node).
	ptp=$(stat -L -c '%G %a' /dev/fpga-ptp 2>&1)
	check ptp-node-with-rule "$([ -L /dev/fpga-ptp ] && [ "$ptp" = 'radar 640' ]; echo $?)" \
		"/dev/fpga-ptp -> $(readlink /dev/fpga-ptp): $ptp (rule 60-fpga-p2p.rules)"
	udevadm info /dev/fpga-p2p0 2>&1 | sed 's/^/udevadm info: /' >$R
	udevadm test /sys/class/misc/fpga-p2p0 2>&1 | grep -iE 'fpga-p2p.rules|GROUP|MODE' | sed 's/^/udevadm test: /' >$R
	rmmod fpga_p2p
	rmmod nvp2p_shim
}

case $test_name in
gpio) gpio_test ;;
udev) udev_test ;;
*) check plan 1 "unknown radar.board=$test_name" ;;
esac
finish
