#!/usr/bin/env bash
# Builds the debug kernel (tinyconfig + tests/qemu/debug.config) from Debian's
# linux-source-6.1, ready for out-of-tree modules (modules_prepare done,
# Module.symvers kept). Cached under ~/.cache/radar-kernel/debug-<hash>, the
# hash covering the fragment, the source version, the compiler and the recipe.
# Prints the build directory (bzImage at arch/x86/boot/bzImage) on stdout.
#
#   bash tests/qemu/build-debug-kernel.sh [--force]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/qemu/lib.sh
. "$here/lib.sh"

force=0
[ "${1:-}" = "--force" ] && force=1

ensure_pkgs build-essential bc bison flex libelf-dev libssl-dev cpio kmod
src=$(ensure_kernel_src)
fragment="$here/debug.config"

key=$({
	cat "$fragment"
	kernel_src_version
	gcc --version | head -n1
	echo "recipe $RADAR_KERNEL_RECIPE"
} | sha256sum | cut -c1-16)
out="$RADAR_KERNEL_CACHE/debug-$key"
stamp="$out/.radar-complete"

# One build at a time: a second caller waits here, then finds the stamp.
mkdir -p "$RADAR_KERNEL_CACHE"
exec 9>"$RADAR_KERNEL_CACHE/.debug-build.lock"
flock 9

if [ "$force" -eq 0 ] && [ -f "$stamp" ]; then
	log "using cached debug kernel $out"
	printf '%s\n' "$out"
	exit 0
fi

log "building debug kernel in $out (log: $out.log)"
rm -rf "$out"
mkdir -p "$out"
t0=$SECONDS
{
	kmake() { make -C "$src" O="$out" ARCH=x86_64 "$@"; }
	kmake tinyconfig
	"$src/scripts/kconfig/merge_config.sh" -m -O "$out" "$out/.config" "$fragment"
	kmake olddefconfig
} >"$out.log" 2>&1 || { tail -n 30 "$out.log" >&2; die "configuring the debug kernel failed"; }

check_config_fragment "$out/.config" "$fragment" ||
	die "debug.config: options above did not survive olddefconfig (dependency missing?)"

# bzImage to boot; modules + modules_prepare so out-of-tree modules build
# against the tree and Module.symvers (with CRCs) exists.
make -C "$src" O="$out" ARCH=x86_64 -j"$(nproc)" bzImage modules modules_prepare \
	>>"$out.log" 2>&1 || { tail -n 40 "$out.log" >&2; die "building the debug kernel failed"; }
[ -f "$out/Module.symvers" ] || die "no Module.symvers in $out"
[ -f "$out/arch/x86/boot/bzImage" ] || die "no bzImage in $out"
echo "$((SECONDS - t0))" >"$out/.radar-build-seconds"
touch "$stamp"
log "debug kernel built in $((SECONDS - t0)) s"
# Older trees go (each is ~1 GiB), but not the newest three: checkouts of
# other revisions (worktrees, a CI clone beside a working copy) share this
# cache and may be about to boot theirs.
ls -1dt "$RADAR_KERNEL_CACHE"/debug-*/ | tail -n +4 | while read -r old; do
	old=${old%/}
	[ "$old" = "$out" ] || rm -rf "$old" "$old.log"
done
printf '%s\n' "$out"
