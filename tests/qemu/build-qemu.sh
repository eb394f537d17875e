#!/usr/bin/env bash
# Builds qemu-system-x86_64 (--arch x86_64, the default) or qemu-system-aarch64
# (--arch arm64) from Debian's QEMU source with the emulated radar FPGA card
# (tests/qemu/fpga-card/) added as the PCI device "radar-fpga-card". One build
# tree configured for both (the card and QEMU's common code are compiled
# once for both); each emulator is built when first asked for, so the x86
# runs never wait for the aarch64 one. The binaries are cached under
# ~/.cache/radar-qemu/bin-<hash>, the hash covering the card's sources, the
# driver's register header, the hook patch, the QEMU source version, the
# configuration, the compiler and this recipe; the build tree is kept
# (~/.cache/radar-qemu/build-<hash of the configuration>) so a change to the
# card rebuilds only that file. Prints the binary's path on stdout.
#
#   bash tests/qemu/build-qemu.sh [--force] [--arch x86_64|arm64]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/qemu/lib.sh
. "$here/lib.sh"

force=0 arch=x86_64
while [ $# -gt 0 ]; do
	case $1 in
	--force) force=1; shift ;;
	--arch) arch=${2:-}; shift 2 ;;
	*) die "unknown argument: $1 (usage: build-qemu.sh [--force] [--arch x86_64|arm64])" ;;
	esac
done
case $arch in
x86_64) want=qemu-system-x86_64 ;;
arm64 | aarch64) want=qemu-system-aarch64 ;;
*) die "--arch x86_64 or arm64, not '$arch'" ;;
esac
cache=${RADAR_QEMU_CACHE:-"$HOME/.cache/radar-qemu"}
card="$here/fpga-card"
# Bump when the steps below change in a way the inputs do not show.
recipe=3
# QEMU's configuration. slirp: the user-mode network ("-netdev user"), with
# which the unit test (tests/unit/) receives the guest's UDP outputs on the
# host's loopback. aarch64: the arm64 guests (run.sh --arch arm64: the `virt`
# machine with an SMMUv3, as the Orin has), with QEMU's "minimal" set of Arm
# boards (virt and sbsa-ref) instead of every 32- and 64-bit board.
# shellcheck disable=SC2054 # configure's option values have commas
configure_args=(--target-list=x86_64-softmmu,aarch64-softmmu --without-default-features
	--with-devices-aarch64=minimal --disable-docs --disable-werror --enable-tcg
	--enable-fdt=system --enable-slirp --disable-install-blobs)

# What goes into hw/misc/radar-fpga-card/ (the driver's own headers: one
# register map for the driver and the card).
inputs=("$card/fpga_card.c" "$card/fpga_card_test.h" "$card/compat/linux/bits.h"
	"$top/kmod/fpga_p2p_regs.h" "$top/kmod/include/uapi/fpga_p2p.h")

ensure_pkgs dpkg-dev ninja-build meson libglib2.0-dev libpixman-1-dev libfdt-dev \
	zlib1g-dev pkg-config python3-venv flex bison gcc make patch libslirp-dev

# Debian's source packages: a deb-src twin of the system's sources.
src_list=/etc/apt/sources.list.d/radar-deb-src.sources
# (Read whole, not piped into grep -q: under pipefail the early exit would
# fail the pipeline and run apt-get update on every call.)
showsrc=$(apt-cache showsrc qemu 2>/dev/null || true)
if ! grep -q '^Version:' <<<"$showsrc"; then
	[ -f /etc/apt/sources.list.d/debian.sources ] ||
		die "no /etc/apt/sources.list.d/debian.sources to derive deb-src from"
	sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
		as_root tee "$src_list" >/dev/null
	as_root apt-get update -q >&2
fi
ver=$(apt-cache showsrc qemu | sed -n 's/^Version: //p' | sort -V | tail -n 1)
[ -n "$ver" ] || die "apt-cache showsrc qemu gives no version"

key=$({
	cat "${inputs[@]}" "$card/qemu-hook.patch"
	echo "qemu $ver"
	echo "configure ${configure_args[*]}"
	gcc --version | head -n1
	echo "recipe $recipe"
} | sha256sum | cut -c1-16)
out="$cache/bin-$key"
bin="$out/$want"
done_mark="$out/.radar-complete-$want"

# Built already: no lock (another run may be building the other emulator).
# The directory's time is its last use: the cleanup below (here and in other
# checkouts sharing the cache) removes the least recently used.
if [ "$force" -eq 0 ] && [ -f "$done_mark" ]; then
	touch "$out"
	log "using cached QEMU $bin"
	printf '%s\n' "$bin"
	exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if [ "$force" -eq 0 ] && [ -f "$done_mark" ]; then
	log "using cached QEMU $bin (built meanwhile)"
	printf '%s\n' "$bin"
	exit 0
fi

src="$cache/src"
# One build tree per configuration: checkouts that configure QEMU otherwise
# (an older revision in another worktree) keep their own tree instead of
# reconfiguring a shared one from scratch on every switch.
build="$cache/build-$(echo "${configure_args[*]}" | sha256sum | cut -c1-8)"
t0=$SECONDS
if [ "$(cat "$src/.radar-version" 2>/dev/null)" != "$ver" ]; then
	log "fetching and unpacking Debian's qemu $ver (log: $cache/build.log)"
	rm -rf "$src" "$cache"/build "$cache"/build-* "$cache/dl"
	mkdir -p "$cache/dl"
	# dpkg-source -x applies Debian's patches (without them the +dfsg tree
	# does not configure).
	(cd "$cache/dl" && apt-get source --download-only "qemu=$ver") >"$cache/build.log" 2>&1 ||
		{ tail -n 20 "$cache/build.log" >&2; die "apt-get source qemu=$ver failed"; }
	dpkg-source -x "$cache"/dl/qemu_*.dsc "$src" >>"$cache/build.log" 2>&1 ||
		{ tail -n 20 "$cache/build.log" >&2; die "dpkg-source -x failed"; }
	rm -rf "$cache/dl"
	echo "$ver" >"$src/.radar-version"
fi
# The hook: hw/misc/meson.build and Kconfig learn the device (once).
if ! patch -d "$src" -p1 -R --dry-run -s -f <"$card/qemu-hook.patch" >/dev/null 2>&1; then
	patch -d "$src" -p1 -s -f <"$card/qemu-hook.patch" || die "qemu-hook.patch does not apply"
fi
dev="$src/hw/misc/radar-fpga-card"
mkdir -p "$dev/compat/linux"
for f in "${inputs[@]}"; do
	case $f in
	*/compat/linux/bits.h) dst="$dev/compat/linux/bits.h" ;;
	*) dst="$dev/$(basename "$f")" ;;
	esac
	# Copy only what changed, so ninja rebuilds only what depends on it.
	cmp -s "$f" "$dst" || cp "$f" "$dst"
done
# A build tree configured otherwise is configured afresh.
if [ ! -f "$build/build.ninja" ] ||
	[ "$(cat "$build/.radar-configure" 2>/dev/null)" != "${configure_args[*]}" ]; then
	log "configuring QEMU"
	rm -rf "$build"
	mkdir -p "$build"
	(cd "$build" && "$src/configure" "${configure_args[@]}") >>"$cache/build.log" 2>&1 ||
		{ tail -n 30 "$cache/build.log" >&2; die "configuring QEMU failed"; }
	echo "${configure_args[*]}" >"$build/.radar-configure"
fi
log "building $want (a first build of the tree takes ~5 min on 2 cores, the other emulator ~3 more)"
nice ninja -C "$build" -j"$(nproc)" "$want" >>"$cache/build.log" 2>&1 ||
	{ grep -B2 -A12 'error' "$cache/build.log" | tail -n 40 >&2; die "building QEMU failed"; }
# (-machine none: qemu-system-aarch64 has no default machine.) grep reads
# each list to its end (no -q): under pipefail, a grep that stopped at the
# first match could leave QEMU's write to a closed pipe failing the check.
"$build/$want" -machine none -device help 2>/dev/null | grep '"radar-fpga-card"' >/dev/null ||
	die "$want has no radar-fpga-card device"
"$build/$want" -machine none -netdev help 2>/dev/null | grep -x user >/dev/null ||
	die "$want has no user-mode network (slirp)"
if [ "$want" = qemu-system-aarch64 ]; then
	# The arm64 guests' machine: virt with an SMMUv3 in front of its PCIe,
	# whose recorded events run.sh traces.
	"$build/$want" -machine virt,help 2>/dev/null | grep 'iommu=' >/dev/null ||
		die "$want's virt machine has no iommu= property"
	"$build/$want" -machine none -trace help 2>/dev/null | grep -x smmuv3_record_event >/dev/null ||
		die "$want has no trace event smmuv3_record_event"
fi
# Beside the other emulator of the same inputs, if built; in place by rename.
mkdir -p "$out"
cp "$build/$want" "$bin.tmp"
mv -f "$bin.tmp" "$bin"
echo "$((SECONDS - t0))" >"$out/.radar-build-seconds-$want"
touch "$done_mark"
log "$want with the card built in $((SECONDS - t0)) s"
# Older builds go, but not the most recently used few: checkouts of other
# revisions (worktrees, a CI clone beside a working copy) share this cache
# and may be about to run theirs.
ls -1dt "$cache"/bin-* | tail -n +4 | while read -r old; do
	[ "$old" = "$out" ] || rm -rf "$old"
done
# Likewise build trees of other configurations (the newest two stay). The
# older layout's "build" is usually absent: ls then fails, which under
# pipefail must not fail the build.
{ ls -1dt "$cache"/build-* "$cache"/build 2>/dev/null || true; } | tail -n +3 | while read -r old; do
	[ "$old" = "$build" ] || rm -rf "$old"
done
printf '%s\n' "$bin"
