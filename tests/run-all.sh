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
declare -a names results times
failed=0

step() {
	local name=$1; shift
	if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qx -e "$name" -e "${name%%:*}"; then
		return
	fi
	local log="target/test-logs/${name//[^A-Za-z0-9_.-]/_}.log"
	echo "=== $name: $*"
	local t0=$SECONDS rc
	"$@" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	names+=("$name"); times+=($((SECONDS - t0)))
	if [ "$rc" -eq 0 ]; then results+=(PASS); else results+=("FAIL($rc)"); failed=1; fi
	echo "=== $name: ${results[-1]} in $((SECONDS - t0)) s (log: $log)"
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
step qemu:build bash tests/qemu/build-qemu.sh
step qemu:debian bash tests/qemu/run.sh --kernel debian --suite all
step qemu:debug bash tests/qemu/run.sh --kernel debug --suite all
# The same suites against NVIDIA's own nvidia-p2p module (../shared/nvidia-p2p).
step qemu:debian:nvidia bash tests/qemu/run.sh --kernel debian --suite all --p2p nvidia
step qemu:debug:nvidia bash tests/qemu/run.sh --kernel debug --suite all --p2p nvidia
# Every DMA bounced (swiotlb=force, IOMMU off): a wrong sync is a byte mismatch,
# so the suites that move and check bytes (and revocation: DMA after the
# memory went). Not crash, lifecycle, uapi, badinput: no data path of their
# own beyond what these run (about 3 minutes of the step).
step qemu:debian:swiotlb bash tests/qemu/run.sh --kernel debian --swiotlb \
	--suite stream,ownership,revocation,duplex,neighbours,faults,radard,shutdown
# The detector canary: the planted bugs of a deliberately broken module must
# be caught by the debug kernel's detectors, and fixed defects put back into
# the driver by the suites.
step qemu:canary bash tests/qemu/run.sh --kernel debug --canary
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
[ "$failed" -eq 0 ] && echo "all steps passed" || echo "SOME STEPS FAILED"
exit "$failed"
