#!/usr/bin/env bash
# The workspace's Rust tests built for aarch64-unknown-linux-gnu (the unit's
# architecture) with the image's flags, run on this x86 machine under Debian's
# qemu-user: `cargo test --target aarch64-unknown-linux-gnu`, whose runner
# (.cargo/config.toml) is `qemu-aarch64 -L /usr/aarch64-linux-gnu` (Debian's
# cross glibc as the target's root). The qemu-aarch64 is bookworm-backports'
# (QEMU 10, tests/qemu/debian-arm64.sh --qemu-user, cached; first on PATH
# here): bookworm's 7.2 answers an ioctl it does not know with ENOSYS, where
# the kernel says ENOTTY (tegra-p2p's kmod_errors test checks that answer).
# The tests that need a GPU say "skipped: no CUDA" as on x86; the uapi layout
# test compiles its C probe with the aarch64 cross compiler
# (CC_aarch64_unknown_linux_gnu, .cargo/config.toml).
#
# Tests that start the workspace's programs (radard, radarctl, radar-dsp)
# execute aarch64 executables themselves: the kernel runs those through
# qemu-aarch64 too, by a binfmt_misc registration that this script makes when
# there is none (as Debian's qemu-user-binfmt package does; it needs root).
#
# Built as yocto-layer/scripts/cross-build.sh builds the image's executables
# (RADAR_RUSTFLAGS of the recipes, the release profile with debug info, the
# same target directory, target/yocto-cross, so the dependencies the image's
# build compiled are reused where their features agree).
#
# What does not run here, and why (each is a `--skip` below; all of them run
# in the x86 test step, rust:test):
#   - radarctl's link and stock_client tests: they open a serial port (a pty),
#     and the serialport crate sets its speed with the TCGETS2/TCSETS2 ioctls,
#     which qemu-user (up to 10.0) does not emulate ("Not a typewriter").
#   - tegra-p2p's host_ring_has_a_guard_page_and_is_not_forked: qemu-user
#     takes madvise() as a hint and drops MADV_DONTFORK, so the ring's VMA
#     has no "dc" flag. The arm64 QEMU guests check the same on Debian's
#     arm64 kernel (the neighbours suite: fork beside a ring, no revocation).
#   - tests whose pass is a deadline kept at 8 ms frames: service's
#     failing_sinks_never_stall_the_loop (no deadline miss with failing sinks)
#     and an_output_that_cannot_be_created_runs_degraded (exit status 0, which
#     radard gives only without deadline misses); emulated aarch64 runs the
#     chain ~20 times slower than the unit would. The Orin's timing is for
#     docs/performance.md, measured on the unit.
#   - time_stamps' frame_time_plus_latency_is_the_wall_clock_when_the_line_is_written:
#     its socket option SO_TIMESTAMPNS (the kernel's arrival stamp of each
#     line) is refused by qemu-user's setsockopt, and its 2 ms bound is a
#     deadline kept at native speed.
#   - chain_false_alarm's noise_frames_at_the_default_pfa: 300 frames of
#     4 MiB through the CPU chain (10 s on x86, over 10 min emulated); the
#     same chain's false alarms at Pfa 1e-3 (24 frames) run here.
# And smaller: the soak runs RADARD_SOAK_FRAMES=20000 frames (the x86 step
# runs 1,000,000): the same faults, ledger and memory checks.
#
#   bash tests/rust-aarch64.sh [TESTNAME...]   (arguments go to the test binaries)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# shellcheck source=tests/qemu/lib.sh
. "$top/tests/qemu/lib.sh"
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"

target=aarch64-unknown-linux-gnu
ensure_pkgs gcc-aarch64-linux-gnu libc6-dev-arm64-cross
qemu_dir=$(bash "$top/tests/qemu/debian-arm64.sh" --qemu-user | tail -n 1)
qemu_user="$qemu_dir/qemu-aarch64"
[ -x "$qemu_user" ] || die "no qemu-aarch64 from tests/qemu/debian-arm64.sh --qemu-user"
export PATH="$qemu_dir:$PATH"
rustup target list --installed | grep -qx "$target" || rustup target add "$target"

# aarch64 executables started by the tests run under qemu-aarch64 as well.
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/register" ]; then
	as_root mount -t binfmt_misc binfmt_misc "$binfmt" ||
		die "cannot mount binfmt_misc: the tests that start aarch64 programs cannot run"
fi
# Ours, registered last, comes first (the kernel tries the newest entry
# first); one left over that names another interpreter is replaced.
entry="$binfmt/radar-qemu-aarch64"
if [ -e "$entry" ] && ! grep -qx "interpreter $qemu_user" "$entry"; then
	echo -1 | as_root tee "$entry" >/dev/null
fi
if [ ! -e "$entry" ]; then
	# QEMU's own registration (scripts/qemu-binfmt-conf.sh) for aarch64 ELF
	# executables; F: the interpreter is opened now.
	magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
	mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
	log "registering $qemu_user for aarch64 executables (binfmt_misc)"
	echo ":radar-qemu-aarch64:M::$magic:$mask:$qemu_user:F" |
		as_root tee "$binfmt/register" >/dev/null ||
		die "cannot register qemu-aarch64 with binfmt_misc"
fi
# Their dynamic loader and libraries: Debian's cross glibc.
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu

value() { # FILE NAME: the value of a plain `NAME = "value"` line
	sed -n "s/^$2 = \"\\(.*\\)\"\$/\\1/p" "$1" | tail -1
}
inc=yocto-layer/recipes-radar/radar-workspace/radar-cargo-flags.inc
RUSTFLAGS=$(value "$inc" RADAR_RUSTFLAGS)
export RUSTFLAGS CARGO_TARGET_DIR="$top/target/yocto-cross" CARGO_PROFILE_RELEASE_DEBUG=true
skips=(
	# serial ports (radarctl's tests/link.rs, tests/stock_client.rs): no
	# TCGETS2 in qemu-user
	--skip read_commands_answer --skip set_pfa_changes_detections_and_is_logged
	--skip text_console_answers_typed_bytes --skip snapshot_png_marks_the_targets
	--skip flood_leaves_the_loop_alone --skip link_errors_are_clear
	--skip stock_host_client_pings_the_unit
	# MADV_DONTFORK, which qemu-user ignores
	--skip host_ring_has_a_guard_page_and_is_not_forked
	# deadlines at 8 ms frames under emulation
	--skip failing_sinks_never_stall_the_loop
	--skip an_output_that_cannot_be_created_runs_degraded
	# SO_TIMESTAMPNS, and a 2 ms bound on when each line is written
	--skip frame_time_plus_latency_is_the_wall_clock_when_the_line_is_written
	# 300 full frames through the CPU chain
	--skip noise_frames_at_the_default_pfa
)
export RADARD_SOAK_FRAMES=${RADARD_SOAK_FRAMES:-20000}
log "RUSTFLAGS='$RUSTFLAGS' cargo test --workspace --release --target $target (runner: qemu-aarch64); RADARD_SOAK_FRAMES=$RADARD_SOAK_FRAMES; ${skips[*]}"
cargo test --workspace --release --locked --no-fail-fast --target "$target" \
	-- --show-output "${skips[@]}" "$@"
