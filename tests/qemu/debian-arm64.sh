#!/usr/bin/env bash
# The arm64 guest's kernel and userspace, from Debian's arm64 packages, without
# building a kernel and without changing the host's package configuration:
# a private apt state (amd64 and arm64 lists, ~/.cache/radar-arm64/apt) from
# which `apt-get download` fetches
#
#   linux-image-<abi>-arm64, linux-headers-<abi>-arm64   the kernel and its kbuild tree
#   linux-headers-<abi>-common (all), linux-kbuild-6.1 (amd64)
#                                 what that tree includes: the common headers and
#                                 kbuild's host tools, built for this machine
#                                 (Debian's way of building modules across architectures)
#   busybox-static, libc6, libgcc-s1 (arm64)   the guest's userspace: a shell and the
#                                 glibc the image's executables link against
#
# at the version of the host's linux-headers-amd64 (the same kernel source as
# the x86 guests), or the newest the lists have when the mirror no longer has
# that one. Everything is unpacked into ~/.cache/radar-arm64/tree-<version>-r<recipe>
# (the headers tree's absolute include rewritten to the unpacked common headers,
# depmod run for the kernel's modules) and reused until the version changes.
# Prints the tree's directory on stdout; tests/qemu/run.sh --arch arm64 reads:
#
#   <tree>/kernel-release          the kernel release (uname -r)
#   <tree>/boot/vmlinuz-<release>  the kernel image
#   <tree>/usr/src/linux-headers-<release>   KDIR for the modules
#                                  (make ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-)
#   <tree>/lib/modules/<release>   the kernel's modules (modules.dep made)
#   <tree>/bin/busybox, <tree>/lib/aarch64-linux-gnu/, <tree>/lib/ld-linux-aarch64.so.1
#
#   bash tests/qemu/debian-arm64.sh [--refresh]   (--refresh: update the lists first)
#
# With --qemu-user instead: Debian's qemu-user from bookworm-backports (QEMU 10,
# static executables; the private lists carry that suite, the host's sources
# are not changed), for the aarch64 Rust tests under emulation
# (tests/rust-aarch64.sh): bookworm's own qemu-user (7.2) answers an ioctl
# it does not know with ENOSYS, where a kernel says ENOTTY (QEMU 8.1 and
# later pass ENOTTY on). Unpacked to ~/.cache/radar-arm64/qemu-user-<version>/;
# prints the directory holding qemu-aarch64.
#
#   bash tests/qemu/debian-arm64.sh --qemu-user [--refresh]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/qemu/lib.sh
. "$here/lib.sh"

refresh=0 want_qemu_user=0
for a in "$@"; do
	case $a in
	--refresh) refresh=1 ;;
	--qemu-user) want_qemu_user=1 ;;
	*) die "unknown argument: $a (usage: debian-arm64.sh [--qemu-user] [--refresh])" ;;
	esac
done
cache=${RADAR_ARM64_CACHE:-"$HOME/.cache/radar-arm64"}
# Bump when the steps below change in a way the package versions do not show.
recipe=1

ensure_pkgs apt dpkg kmod linux-headers-amd64 gcc-aarch64-linux-gnu
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

# The private apt state: the host's sources plus bookworm-backports (for
# qemu-user only: nothing is taken from there unless asked for by version),
# both architectures, no translations or AppStream metadata (only Packages
# lists are needed).
apt_dir="$cache/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/sources.list.d"
touch "$apt_dir/status"
rm -f "$apt_dir"/sources.list.d/*
# (Binary sources only: no deb-src lists.)
for f in /etc/apt/sources.list.d/*.sources; do
	grep -qE '^Types:(.* )?deb( |$)' "$f" 2>/dev/null && cp "$f" "$apt_dir/sources.list.d/"
done
if [ -f /etc/apt/sources.list ]; then cp /etc/apt/sources.list "$apt_dir/sources.list"; else : >"$apt_dir/sources.list"; fi
cat >"$apt_dir/sources.list.d/radar-backports.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
cat >"$apt_dir/apt.conf" <<EOF
APT::Architecture "amd64";
APT::Architectures { "amd64"; "arm64"; };
Dir::Etc::sourcelist "$apt_dir/sources.list";
Dir::Etc::sourceparts "$apt_dir/sources.list.d";
Dir::State::Lists "$apt_dir/lists";
Dir::State::status "$apt_dir/status";
Dir::Cache "$apt_dir/cache";
Acquire::Languages "none";
Acquire::IndexTargets::deb::DEP-11::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled "false";
Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled "false";
Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled "false";
EOF
papt() { APT_CONFIG="$apt_dir/apt.conf" "$@"; }

update_lists() {
	log "updating the private apt lists (amd64, arm64, with bookworm-backports) in $apt_dir"
	papt apt-get update -q >"$cache/apt-update.log" 2>&1 ||
		{ tail -n 20 "$cache/apt-update.log" >&2; die "apt-get update (private lists) failed"; }
	touch "$apt_dir/.updated-with-backports"
}

if [ "$want_qemu_user" = 1 ]; then
	found=$(find "$cache" -maxdepth 2 -path "$cache/qemu-user-*/qemu-aarch64" 2>/dev/null |
		sort -V | tail -n 1)
	if [ "$refresh" -eq 0 ] && [ -n "$found" ]; then
		printf '%s\n' "$(dirname "$found")"
		exit 0
	fi
	if [ "$refresh" -eq 1 ] || [ ! -f "$apt_dir/.updated-with-backports" ]; then
		update_lists
	fi
	# (awk reads to the end: one that left early could SIGPIPE apt-cache,
	# which under pipefail ends this script with 141 and no message.)
	qver=$(papt apt-cache madison qemu-user | awk -F' [|] ' '/bookworm-backports/ && !q { print $2; q = 1 }')
	[ -n "$qver" ] || die "no qemu-user in bookworm-backports"
	qdir="$cache/qemu-user-${qver//[^A-Za-z0-9.+~-]/_}"
	rm -rf "$cache/dl-qemu" "$qdir.tmp"
	mkdir -p "$cache/dl-qemu" "$qdir.tmp"
	log "downloading Debian's qemu-user $qver (bookworm-backports)"
	(cd "$cache/dl-qemu" && papt apt-get download -q -o APT::Sandbox::User=root "qemu-user=$qver") \
		>"$cache/download-qemu.log" 2>&1 ||
		{ tail -n 20 "$cache/download-qemu.log" >&2; die "apt-get download qemu-user=$qver failed"; }
	dpkg-deb --fsys-tarfile "$cache"/dl-qemu/qemu-user_*.deb |
		tar -x -C "$qdir.tmp" --strip-components=3 ./usr/bin/qemu-aarch64
	rm -rf "$cache/dl-qemu"
	"$qdir.tmp/qemu-aarch64" --version >/dev/null || die "the unpacked qemu-aarch64 does not run"
	rm -rf "$qdir"
	mv "$qdir.tmp" "$qdir"
	for old in "$cache"/qemu-user-*; do
		[ "$old" = "$qdir" ] || rm -rf "$old"
	done
	log "qemu-aarch64 $qver in $qdir"
	printf '%s\n' "$qdir"
	exit 0
fi

# The host's Debian kernel version (the x86 guests' kernel), e.g. 6.1.192-2.
want=$(dpkg-query -W -f='${Version}' linux-headers-amd64)
[ -n "$want" ] || die "no linux-headers-amd64 installed"
# A tree for that version (or the one taken instead, below), already
# unpacked: nothing to fetch.
tree="$cache/tree-$(cat "$cache/resolved-$want" 2>/dev/null || echo "$want")-r$recipe"
if [ "$refresh" -eq 0 ] && [ -f "$tree/.radar-complete" ]; then
	log "using $tree"
	printf '%s\n' "$tree"
	exit 0
fi

if [ "$refresh" -eq 1 ] || [ ! -f "$apt_dir/.updated-with-backports" ]; then
	update_lists
fi
# linux-headers-arm64 at the host's version, else the newest the lists have.
ver=$want
if ! papt apt-cache show "linux-headers-arm64:arm64=$ver" >/dev/null 2>&1; then
	ver=$(papt apt-cache policy linux-headers-arm64:arm64 | sed -n 's/^ *Candidate: //p')
	if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then die "no linux-headers-arm64 in the arm64 lists"; fi
	log "linux-headers-arm64 $want is not on the mirror any more; taking $ver"
	tree="$cache/tree-$ver-r$recipe"
fi
# The ABI name (6.1.0-NN) from the metapackage's dependency.
abi=$(papt apt-cache show "linux-headers-arm64:arm64=$ver" |
	sed -n 's/^Depends: .*linux-headers-\([0-9.]*-[0-9]*\)-arm64.*/\1/p' | awk 'NR == 1')
[ -n "$abi" ] || die "cannot read the kernel ABI from linux-headers-arm64 $ver"
release="$abi-arm64"
# linux-kbuild-6.1 for 6.1.0-NN.
kbuild_pkg="linux-kbuild-${abi%.*-*}"

dl="$cache/dl"
rm -rf "$dl" "$tree.tmp"
mkdir -p "$dl" "$tree.tmp"
log "downloading Debian's arm64 kernel $release ($ver) and userspace"
# apt's sandbox user cannot write into root's cache: download as root (quietly).
(cd "$dl" && papt apt-get download -q -o APT::Sandbox::User=root \
	"linux-image-$release:arm64=$ver" "linux-headers-$release:arm64=$ver" \
	"linux-headers-$abi-common=$ver" "$kbuild_pkg:amd64=$ver" \
	busybox-static:arm64 libc6:arm64 libgcc-s1:arm64) >"$cache/download.log" 2>&1 ||
	{ tail -n 20 "$cache/download.log" >&2; die "apt-get download failed"; }
for deb in "$dl"/*.deb; do
	dpkg-deb -x "$deb" "$tree.tmp"
done
# The headers tree includes the common headers by absolute path: point it at
# the unpacked copy (the symlinks to kbuild's scripts and tools are relative).
hdr="$tree.tmp/usr/src/linux-headers-$release"
[ -f "$hdr/Makefile" ] || die "no $hdr/Makefile in linux-headers-$release"
sed -i "s#^include /usr/src/#include $tree/usr/src/#" "$hdr/Makefile"
grep -q "^include $tree/usr/src/linux-headers-$abi-common/Makefile\$" "$hdr/Makefile" ||
	die "unexpected $hdr/Makefile: $(head -n 3 "$hdr/Makefile")"
[ -x "$tree.tmp/usr/lib/$kbuild_pkg/scripts/basic/fixdep" ] ||
	die "$kbuild_pkg has no scripts/basic/fixdep"
[ -f "$tree.tmp/boot/vmlinuz-$release" ] || die "linux-image-$release has no /boot/vmlinuz-$release"
[ -x "$tree.tmp/bin/busybox" ] || die "busybox-static:arm64 has no /bin/busybox"
/sbin/depmod -b "$tree.tmp" "$release" || die "depmod for $release failed"
echo "$release" >"$tree.tmp/kernel-release"
rm -rf "$dl" "$tree"
mv "$tree.tmp" "$tree"
touch "$tree/.radar-complete"
echo "$ver" >"$cache/resolved-$want"
log "arm64 kernel $release and userspace in $tree"
# Trees of older versions go.
for old in "$cache"/tree-*; do
	[ "$old" = "$tree" ] || rm -rf "$old"
done
printf '%s\n' "$tree"
