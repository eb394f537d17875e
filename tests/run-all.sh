#!/usr/bin/env bash
# Every test of the project, in one command (the README's test command; CI
# runs exactly this). Installs what it needs, runs each step even when an
# earlier one failed, prints a summary table, exits non-zero on any failure.
#
#   bash tests/run-all.sh            # everything
#   bash tests/run-all.sh rust kmod  # only the named steps
set -uo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)

bash scripts/setup.sh || { echo "run-all: setup failed" >&2; exit 1; }
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

mkdir -p target/test-logs
declare -a names results times logs
failed=0

wanted() {
	[ ${#only[@]} -eq 0 ] || printf '%s\n' "${only[@]}" | grep -qx -e "$1" -e "${1%%:*}"
}

# step NAME CMD...: runs one step, its output to stdout and its log. Inside a
# lane (below) the output goes to the log only and the result to the lane's
# file, read back when the lanes are done.
lane_file=''
step() {
	local name=$1; shift
	wanted "$name" || return 0
	local log="target/test-logs/${name//[^A-Za-z0-9_.-]/_}.log"
	local t0=$SECONDS rc result
	if [ -n "$lane_file" ]; then
		echo "=== $name: started: $*"
		"$@" >"$log" 2>&1 </dev/null
		rc=$?
	else
		echo "=== $name: $*"
		"$@" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
	fi
	if [ "$rc" -eq 0 ]; then result=PASS; else result="FAIL($rc)"; fi
	echo "=== $name: $result in $((SECONDS - t0)) s (log: $log)"
	if [ -n "$lane_file" ]; then
		printf '%s %s %s %s\n' "$name" "$result" "$((SECONDS - t0))" "$log" >>"$lane_file"
	else
		names+=("$name"); results+=("$result"); times+=($((SECONDS - t0))); logs+=("$log")
		[ "$rc" -eq 0 ] || failed=1
	fi
}

# lanes FN...: runs each function (a list of steps) in the background, side
# by side. For steps that keep about one core busy (a QEMU guest under TCG):
# two lanes on two cores take about half the time. Each step's log is
# printed whole once all lanes are done.
lanes() {
	local fn i=0 pids=() files=() t0=$SECONDS
	for fn in "$@"; do
		files+=("target/test-logs/lane-$i.results")
		: >"${files[-1]}"
		(lane_file=${files[-1]}; "$fn") &
		pids+=($!)
		i=$((i + 1))
	done
	wait "${pids[@]}"
	local f name result secs log
	cat "${files[@]}" | grep -q . && echo "=== lanes ($*) done in $((SECONDS - t0)) s"
	for f in "${files[@]}"; do
		while read -r name result secs log; do
			echo "--- $name ($result in $secs s): $log"
			cat "$log"
			names+=("$name"); results+=("$result"); times+=("$secs"); logs+=("$log")
			[ "$result" = PASS ] || failed=1
		done <"$f"
		rm -f "$f"
	done
}

only=("$@")

# Every cargo step runs the Rust of rust-toolchain.toml: the Yocto image's.
step rust:fmt cargo fmt --all --check
step rust:clippy cargo clippy --workspace --all-targets --locked -- -D warnings
# The chain's library as radard links it: without the benchmarks' 'instrument'
# feature (the workspace build above turns it on for the radar-dsp tool).
step rust:clippy:lib cargo clippy -p radar-dsp --lib --no-default-features --locked -- -D warnings
# No import cycles between the modules of any crate.
step rust:cycles bash tests/module-cycles.sh
# --show-output: the figures the tests print (detection rates, errors) and
# their "skipped: no CUDA" lines appear in the log, not only on failure.
step rust:test cargo test --workspace --release --locked --no-fail-fast -- --show-output
# The image's Rust binaries for aarch64, built as the layer's recipes build
# them (the same flags, one build per recipe, offline after a fetch).
step rust:aarch64 bash yocto-layer/scripts/cross-build.sh
# The serial diagnostics protocol crate builds no_std (a microcontroller target).
step rust:nostd bash tests/diag-proto-nostd.sh
step kmod bash tests/kmod-checks.sh
# QEMU with the emulated FPGA card (cached in ~/.cache/radar-qemu like the
# debug kernel; a first build takes minutes), then every suite against it.
# (qemu-system-aarch64, from the same build tree, in the arm64 lane below.)
step qemu:build bash tests/qemu/build-qemu.sh
# The QEMU suites in two lanes side by side (each guest keeps about one core
# busy), balanced by their usual times.
qemu_lane_1() {
	step qemu:debug bash tests/qemu/run.sh --kernel debug --suite all
	# The same suites against NVIDIA's own nvidia-p2p module (../shared/nvidia-p2p).
	step qemu:debian:nvidia bash tests/qemu/run.sh --kernel debian --suite all --p2p nvidia
	# Every DMA bounced (swiotlb=force, IOMMU off): a wrong sync is a byte
	# mismatch, so the suites that move and check bytes (and revocation: DMA
	# after the memory went). Not crash, lifecycle, uapi, badinput: no data
	# path of their own beyond what these run (about 3 minutes of the step).
	step qemu:debian:swiotlb bash tests/qemu/run.sh --kernel debian --swiotlb \
		--suite stream,ownership,revocation,duplex,neighbours,faults,radard,shutdown
}
qemu_lane_2() {
	step qemu:debian bash tests/qemu/run.sh --kernel debian --suite all
	step qemu:debug:nvidia bash tests/qemu/run.sh --kernel debug --suite all --p2p nvidia
	# The detector canary: the planted bugs of a deliberately broken module
	# must be caught by the debug kernel's detectors, and fixed defects put
	# back into the driver by the suites.
	step qemu:canary bash tests/qemu/run.sh --kernel debug --canary
}
# The arm64 lane, beside the two x86 ones: qemu-system-aarch64 (built here,
# so the x86 lanes start without waiting for it), the suites on arm64 (QEMU's
# virt machine with the card behind an SMMUv3, Debian's arm64 kernel, the
# image's aarch64 executables; with the shim and with NVIDIA's nvidia-p2p on
# its home architecture), then the workspace's tests built for aarch64 with
# the image's flags (reusing rust:aarch64's dependencies) and run under
# qemu-user (tests/rust-aarch64.sh names the few that cannot run emulated,
# and why). The builds and the qemu-user tests run at low priority (nice
# 10): CPU work for the time the x86 guests leave idle (a guest waits on the
# card's cadence much of the time: an arm64 run took 66 s of CPU in 124 s);
# the arm64 guests at normal priority.
arm64_lane() {
	step qemu:build:arm64 nice -n 10 bash tests/qemu/build-qemu.sh --arch arm64
	step qemu:arm64 bash tests/qemu/run.sh --arch arm64 --suite all
	step qemu:arm64:nvidia bash tests/qemu/run.sh --arch arm64 --suite all --p2p nvidia
	step rust:test:aarch64 nice -n 10 bash tests/rust-aarch64.sh
}
lanes qemu_lane_1 qemu_lane_2 arm64_lane
step radard bash tests/radard-smoke.sh
# radard's ASTERIX CAT-010 output decoded by Wireshark's dissector (tshark) and a
# PyPI decoder, record by record against its JSONL for the same 1100 frames.
step asterix bash tests/asterix-roundtrip.sh
# Yocto layer: crates list drift, oelint-adv, kas, bitbake parse/-e/-g
# offline.
step yocto bash tests/yocto-checks.sh
# Board files (dtc, systemd-analyze verify/security, kernel args, radard.toml) and OTA
# with the real rauc, the nvbootctrl/UEFI double and a real radard.
step board bash tests/board-checks.sh
step ota bash tests/ota/run.sh
# In QEMU: the udev rule on the fpga_p2p node (Debian kernel) and radard
# pulsing the FPGA reset line on gpio-sim (debug kernel).
step board:udev bash tests/board/qemu-board.sh --test udev
step board:gpio bash tests/board/qemu-board.sh --test gpio
# The unit's userspace booted in QEMU: Debian 12 with systemd as PID 1 (image
# cached in ~/.cache/radar-unit), the repository's files at the install
# manifest's paths, radard.service from the board's unit file; checks from
# the host (tests/unit/README.md).
step qemu:unit bash tests/unit/run.sh

echo
echo "Summary ($top)"
printf '  %-20s %-9s %6s\n' step result seconds
for i in "${!names[@]}"; do
	printf '  %-20s %-9s %6s\n' "${names[$i]}" "${results[$i]}" "${times[$i]}"
done
# Why each failed step failed, from its log, at the end where a reader of
# the run's last lines sees it: the failing checks, suites and tests, and
# the panics with the two lines after (the assertion's message), a QEMU
# suite's detail line and reason, and the guest kernel console's tail.
for i in "${!names[@]}"; do
	[ "${results[$i]}" = PASS ] && continue
	echo "--- ${names[$i]} ${results[$i]} (whole log: ${logs[$i]}):"
	grep -E -A2 'panicked at' "${logs[$i]}" | head -n 24 | cut -c1-400
	grep -E -A1 '^  FAIL ' "${logs[$i]}" | head -n 12 | cut -c1-600
	grep -E '(^|[^A-Za-z])(FAIL|not ok|failed:)' "${logs[$i]}" |
		grep -Ev '(^| )0 failed|FAIL: 0' | tail -n 24 | cut -c1-400
	# A QEMU step: each failed suite's reason (kernel reports among them),
	# and the guest kernel's last words (a hang's stack, a panic).
	grep -E '^ +failure: ' "${logs[$i]}" | grep -v 'not run (guest' | sort -u | head -n 8 | cut -c1-600
	sed -n '/^--- last 40 lines of the kernel console/,/^---$/p' "${logs[$i]}" | tail -n 30 | cut -c1-300
done
[ "$failed" -eq 0 ] && echo "all steps passed" || echo "SOME STEPS FAILED"
exit "$failed"
