#!/usr/bin/env bash
# Builds the unit test's root file system: a Debian 12 userspace with
# systemd as PID 1 (mmdebstrap), Debian's kernel modules for the kernel the
# test boots, and the few files that let the test put the repository's
# files in place at every boot (the stage init below). An ext4 image,
# cached under ~/.cache/radar-unit/rootfs-<hash>.ext4, the hash covering
# the package list, this script and the kernel version. Prints the image's
# path on stdout. The test boots it read-only with a copy-on-write overlay
# (QEMU's snapshot=on): the cached image is never changed.
#
#   bash tests/unit/build-image.sh KERNEL-VERSION [--force]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/qemu/lib.sh
. "$top/tests/qemu/lib.sh"

kver=${1:-}
[ -n "$kver" ] || die "usage: build-image.sh KERNEL-VERSION [--force]"
force=0
[ "${2:-}" = --force ] && force=1
[ -d "/lib/modules/$kver/kernel" ] || die "no /lib/modules/$kver (the kernel's modules)"

cache=${RADAR_UNIT_CACHE:-"$HOME/.cache/radar-unit"}
suite=bookworm
mirror=http://deb.debian.org/debian
# What stands in for the Yocto image's userspace: systemd as PID 1 and udev
# (as on the unit), kmod for systemd-modules-load, e2fsprogs for
# systemd-makefs (radar-data-mkfs.service), iproute2 for the network,
# linuxptp for the time units (the image's is meta-oe's).
packages=(systemd systemd-sysv udev kmod iproute2 e2fsprogs linuxptp)

ensure_pkgs mmdebstrap e2fsprogs

key=$({
	echo "$suite $mirror ${packages[*]}"
	echo "kernel $kver"
	cat "$0"
} | sha256sum | cut -c1-16)
image="$cache/rootfs-$key.ext4"
mkdir -p "$cache"
exec 9>"$cache/.build.lock"
flock 9
if [ "$force" -eq 0 ] && [ -f "$image" ] && [ -f "$image.complete" ]; then
	log "using cached root file system $image"
	printf '%s\n' "$image"
	exit 0
fi

t0=$SECONDS
tree="$cache/tree-$key"
rm -rf "$tree" "$image" "$image.complete"
log "mmdebstrap $suite (${packages[*]}) into $tree (log: $cache/build.log)"
mmdebstrap --mode=root --variant=apt --include="$(IFS=,; echo "${packages[*]}")" \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	"$suite" "$tree" "$mirror" >"$cache/build.log" 2>&1 ||
	{ tail -n 30 "$cache/build.log" >&2; die "mmdebstrap failed"; }

# Debian's modules for the test's kernel (Debian's own initrd loads the
# disk and file system modules; udev and systemd-modules-load the rest).
mkdir -p "$tree/lib/modules/$kver"
(cd "/lib/modules/$kver" && tar -cf - --exclude=./build --exclude=./source .) |
	tar -xf - -C "$tree/lib/modules/$kver"

# The stage init: runs as PID 1 before systemd, puts the run's files (the
# per-run disk labelled radar-stage, made by tests/unit/run.sh) in place
# with its install.sh, then hands over to systemd. The root is a
# throw-away overlay, so every boot starts from this image.
mkdir -p "$tree/usr/local/sbin"
cat >"$tree/usr/local/sbin/radar-unit-stage" <<'EOF'
#!/bin/sh
# Stage init of the unit test (tests/unit/build-image.sh): the run's files in,
# then systemd.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /run/radar-stage
if mount -o ro LABEL=radar-stage /run/radar-stage && sh /run/radar-stage/install.sh /run/radar-stage; then
	echo "radar-unit-stage: the run's files are installed"
else
	echo "radar-unit-stage: FAILED to install the run's files" >&2
fi
umount /run/radar-stage 2>/dev/null
exec /sbin/init "$@"
EOF
chmod 0755 "$tree/usr/local/sbin/radar-unit-stage"
echo radar-unit >"$tree/etc/hostname"
: >"$tree/etc/machine-id"
# No apt caches in the image.
rm -rf "$tree"/var/cache/apt/*.bin "$tree"/var/lib/apt/lists/*

size_mb=$(($(du -sm "$tree" | cut -f1) + 512))
log "making the ext4 image ($size_mb MiB)"
mke2fs -q -t ext4 -L radar-unit-root -d "$tree" "$image" "${size_mb}M" ||
	die "mke2fs -d failed"
rm -rf "$tree"
touch "$image.complete"
log "root file system built in $((SECONDS - t0)) s: $image"
echo "$((SECONDS - t0))" >"$image.seconds"
for old in "$cache"/rootfs-*.ext4; do
	[ "$old" = "$image" ] || rm -f "$old" "$old".*
done
printf '%s\n' "$image"
