# shellcheck shell=bash
# shellcheck disable=SC2034,SC2154 # run.sh's variables, read and set here
# The arm64 parts of tests/qemu/run.sh (sourced by it for --arch arm64, not
# run): the guest's programs, its userspace and QEMU's machine. The guest is
# QEMU's aarch64 `virt` machine with an SMMUv3 in front of its PCIe (as the
# Orin's PCIe is behind its SMMU), Debian's arm64 kernel (debian-arm64.sh), and
# the image's own aarch64 executables: radard as yocto-layer/scripts/cross-build.sh
# builds it for the image (the recipes' Rust, flags and target), p2p-suite with
# the same flags, both linked against glibc like everything in the image, so
# the initramfs carries Debian's arm64 glibc and libgcc_s (libc6, libgcc-s1)
# and busybox-static:arm64 as its shell.
#
# Uses run.sh's variables: top, here, work, suites, arm64_tree.

# arm64_programs: builds what the guest runs and sets RADAR_SUITE_BIN,
# RADAR_RADARD_BIN, RADAR_DSP_BIN (unless set: the developer overrides of
# run.sh) and uapi_make_args.
arm64_programs() {
	local out="$top/target/yocto-cross/aarch64-unknown-linux-gnu/release" b
	# shellcheck disable=SC1091
	[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
	command -v cargo >/dev/null || die "no cargo (run scripts/setup.sh)"
	if [ -z "${RADAR_SUITE_BIN:-}" ] || [ -z "${RADAR_RADARD_BIN:-}" ]; then
		# The image's radard: its recipe's build (a no-op after the test
		# command's rust:aarch64 step); p2p-suite (no recipe: a test
		# program) with the same flags into the same target directory.
		log "building the image's aarch64 radard and p2p-suite (yocto-layer/scripts/cross-build.sh)"
		bash "$top/yocto-layer/scripts/cross-build.sh" \
			"$top/yocto-layer/recipes-radar/radard/radard_0.1.0.bb" --also p2p-suite \
			>"$work/cross-build.log" 2>&1 ||
			{ tail -n 30 "$work/cross-build.log" >&2; die "cross-build.sh failed"; }
		[ -n "${RADAR_SUITE_BIN:-}" ] || export RADAR_SUITE_BIN="$out/p2p-suite"
		[ -n "${RADAR_RADARD_BIN:-}" ] || export RADAR_RADARD_BIN="$out/radard"
	fi
	if printf '%s\n' "${suites[@]}" | grep -qx radard && [ -z "${RADAR_DSP_BIN:-}" ]; then
		# radar-dsp runs on this machine (it writes the front-end recording):
		# the x86 guests' build of it.
		rustup target list --installed | grep -qx x86_64-unknown-linux-musl ||
			rustup target add x86_64-unknown-linux-musl
		(cd "$top" && cargo build --release --locked -p radar-dsp \
			--target x86_64-unknown-linux-musl) >"$work/cargo-dsp.log" 2>&1 ||
			{ cat "$work/cargo-dsp.log" >&2; die "building radar-dsp failed"; }
		export RADAR_DSP_BIN="$top/target/x86_64-unknown-linux-musl/release/radar-dsp"
	fi
	for b in "$RADAR_SUITE_BIN" "$RADAR_RADARD_BIN"; do
		file -L "$b" | grep -q 'ARM aarch64' || die "$b is not an aarch64 executable"
	done
	# The uapi kselftest, static, with the cross compiler.
	uapi_make_args=(CC=aarch64-linux-gnu-gcc)
}

# arm64_userspace ROOT BINARY...: busybox and the glibc the binaries need
# (Debian's arm64 packages) into the initramfs staging directory ROOT; every
# library a binary names (DT_NEEDED) must be there.
arm64_userspace() {
	local root=$1 b need missing=()
	shift
	cp "$arm64_tree/bin/busybox" "$root/bin/busybox"
	mkdir -p "$root/lib/aarch64-linux-gnu"
	cp -a "$arm64_tree"/lib/aarch64-linux-gnu/*.so* "$root/lib/aarch64-linux-gnu/"
	cp -a "$arm64_tree/lib/ld-linux-aarch64.so.1" "$root/lib/"
	for b in "$@"; do
		readelf -l "$b" | grep -q 'interpreter' || continue # static
		readelf -l "$b" | grep -q 'interpreter: /lib/ld-linux-aarch64.so.1' ||
			die "$b wants another dynamic loader than /lib/ld-linux-aarch64.so.1"
		for need in $(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			[ -e "$root/lib/aarch64-linux-gnu/$need" ] || missing+=("${b##*/}: $need")
		done
	done
	[ ${#missing[@]} -eq 0 ] || die "libraries missing from the arm64 initramfs: ${missing[*]}"
}

# arm64_qemu QEMU_BIN KERNEL INITRD SMMU_TRACE: the machine (sets the array
# qemu). SMMU_TRACE receives QEMU's own trace of every event the SMMU
# records (a translation or permission fault, a bad stream ID, ...) and of
# every transaction it aborts: what the SMMU saw, whatever the guest's driver
# makes of it (harness.py counts the lines: smmu_events).
# virt with GICv3 (its ITS takes the card's MSI-X) and an SMMUv3 in front of
# the PCIe root complex: every DMA of the card is translated by the SMMU's
# page tables. -cpu max: QEMU 7.2 has no Cortex-A78AE model and `max` has
# every instruction the image's binaries may use (built for cortex-a78ae);
# pauth-impdef: pointer authentication (used by the kernel on every call)
# with QEMU's cheap algorithm instead of QARMA, which is slow under TCG. The
# result channel is a PCI 16550 (virt has one UART, the console), ttyS0 in
# the guest.
arm64_qemu() {
	# shellcheck disable=SC2054 # QEMU's option values have commas
	qemu=("$1" -accel tcg -machine virt,gic-version=3,iommu=smmuv3 -cpu max,pauth-impdef=on
		-smp 2 -m 2048 -nodefaults -no-user-config -display none -no-reboot
		-kernel "$2" -initrd "$3"
		-trace smmuv3_record_event -trace smmuv3_translate_abort -D "$4")
}
