#!/usr/bin/env bash
# shellcheck disable=SC2317 # the check_* functions are called as "check_$name"
# Static checks of the kernel modules in kmod/ (fpga_p2p, nvp2p_shim):
#   w1        build against Debian's 6.1 headers with W=1, no warning allowed
#   sparse    make C=2 (sparse on every file), no sparse warning allowed
#   checkpatch  checkpatch.pl --strict on every .c/.h, no error/warning/check
#   kerneldoc   scripts/kernel-doc -v on the module's sources: no warning, and
#             every function fpga_p2p_drv.h declares or defines (the ones
#             shared across the driver's files) has a kernel-doc comment
#   arm64     cross-build against Debian's arm64 6.1 kbuild tree (the arm64 QEMU
#             guests' kernel, tests/qemu/debian-arm64.sh), W=1, modpost against
#             its Module.symvers
#   jetson    cross-build for the Jetson's kernel line: the arm64 5.15 tree with
#             L4T r36's config in ../shared/kbuild/, through NVIDIA's own
#             nv-p2p.h and Module.symvers (no shim), W=1 and sparse, no
#             warning allowed; the module must say depends: nvidia-p2p
# The card is not in the module (it is an emulated PCI device in QEMU).
# Prints PASS/FAIL per check, exits non-zero if any failed. Logs in
# target/kmod-checks/.
#
#   bash tests/kmod-checks.sh [CHECK...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
# shellcheck source=tests/qemu/lib.sh
. "$here/qemu/lib.sh"
# shellcheck source=tests/shared-dir.sh
. "$here/shared-dir.sh"

kmod_src=${RADAR_KMOD_DIR:-"$top/kmod"}
logdir="$top/target/kmod-checks"
mkdir -p "$logdir"
only=("$@")

ensure_pkgs build-essential bc bison flex libelf-dev libssl-dev kmod sparse perl \
	linux-headers-amd64 gcc-aarch64-linux-gnu xz-utils
[ -f "$kmod_src/Makefile" ] || die "no $kmod_src/Makefile"

kver=''
for h in $(printf '%s\n' /usr/src/linux-headers-*-amd64 | sort -V -r); do
	[ -f "$h/Makefile" ] && { kver=${h#/usr/src/linux-headers-}; break; }
done
[ -n "$kver" ] || die "no Debian linux-headers-*-amd64"
debian_kdir="/usr/src/linux-headers-$kver"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Lines that are warnings for our purposes: compiler, sparse, modpost (every
# tree built against here has the kernel's Module.symvers).
warnings_in() {
	grep -E '(warning|error):|WARNING:|ERROR:' "$1" || true
}

# build NAME KDIR MAKE-ARGS...: a clean build of a private copy of kmod/;
# fails on a failed build or any warning line.
build() {
	local name=$1 kdir=$2
	[ -f "$kdir/Module.symvers" ] || { echo "  no $kdir/Module.symvers"; return 1; }
	local dir="$tmp/$name" logf="$logdir/$name.log"
	shift 2
	rm -rf "$dir"
	cp -a "$kmod_src" "$dir"
	# Objects of an in-place build in the checkout must not be reused.
	make -C "$dir" KDIR="$kdir" "$@" clean >/dev/null 2>&1 || true
	if ! make -C "$dir" KDIR="$kdir" "$@" >"$logf" 2>&1; then
		tail -n 20 "$logf"
		echo "  build failed (log: $logf)"
		return 1
	fi
	local w
	w=$(warnings_in "$logf")
	if [ -n "$w" ]; then
		printf '%s\n' "$w" | head -n 30
		echo "  $(printf '%s\n' "$w" | wc -l) warning line(s) (log: $logf)"
		return 1
	fi
	local kos
	kos=$(find "$dir" -name '*.ko' -printf '%f ')
	echo "  built: ${kos:-nothing}"
	[ -n "$kos" ]
}

check_w1() {
	build w1 "$debian_kdir" W=1
}

check_sparse() {
	# C=2 runs sparse on every source whether or not it needs rebuilding.
	build sparse "$debian_kdir" C=2
}

check_checkpatch() {
	local src files f out bad=0
	src=$(ensure_kernel_src)
	# Paths relative to kmod/ without "./": checkpatch recognises uapi headers
	# by their path (include/uapi/, where BIT() does not exist). Generated
	# *.mod.c files of an in-place build are not ours.
	mapfile -t files < <(cd "$kmod_src" && find . -name '*.[ch]' ! -name '*.mod.c' |
		sed 's|^\./||' | sort)
	[ ${#files[@]} -gt 0 ] || { echo "  no .c/.h files under $kmod_src"; return 1; }
	: >"$logdir/checkpatch.log"
	for f in "${files[@]}"; do
		# Userspace test programs (kmod/tests/) use the C library's types.
		local ignore=()
		case $f in tests/*) ignore=(--ignore PREFER_KERNEL_TYPES) ;; esac
		# Non-zero exit on any ERROR, WARNING or CHECK.
		if out=$(cd "$kmod_src" && perl "$src/scripts/checkpatch.pl" --strict --no-tree \
			--terse --show-types --no-summary "${ignore[@]}" -f "$f" 2>&1); then
			printf '== %s: clean\n' "$f" >>"$logdir/checkpatch.log"
		else
			printf '== %s\n%s\n' "$f" "$out" >>"$logdir/checkpatch.log"
			printf '%s\n' "$out" | sed 's/^/  /' | head -n 20
			bad=1
		fi
	done
	echo "  ${#files[@]} file(s) checked (log: $logdir/checkpatch.log)"
	return "$bad"
}

check_kerneldoc() {
	local src out warn documented shared name missing=()
	src=$(ensure_kernel_src)
	# -v adds the checks of return values and of text before sections.
	out=$(cd "$kmod_src" && perl "$src/scripts/kernel-doc" -v -none \
		./*.c ./*.h include/uapi/*.h nvp2p_shim/*.c 2>&1) ||
		{ printf '%s\n' "$out" | tail -n 5; return 1; }
	printf '%s\n' "$out" >"$logdir/kerneldoc.log"
	warn=$(printf '%s\n' "$out" | grep -v -E ': info: |^[0-9]+ warnings?$' || true)
	if [ -n "$warn" ]; then
		printf '%s\n' "$warn" | sed 's/^/  /' | head -n 20
		return 1
	fi
	documented=$(printf '%s\n' "$out" | sed -n 's/.*: info: Scanning doc for function \([A-Za-z0-9_]*\)$/\1/p')
	# Prototypes and inline definitions: "type name(" at the start of a line.
	shared=$(grep -oE '^[a-z][a-z0-9_ ]*[ *]fp_[a-z0-9_]+\(' "$kmod_src/fpga_p2p_drv.h" |
		grep -oE 'fp_[a-z0-9_]+\($' | tr -d '(' | sort -u)
	[ -n "$shared" ] || { echo "  no function declarations found in fpga_p2p_drv.h"; return 1; }
	for name in $shared; do
		printf '%s\n' "$documented" | grep -qx "$name" || missing+=("$name")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "  no kernel-doc comment: ${missing[*]}"
		return 1
	fi
	echo "  $(printf '%s\n' "$shared" | wc -l) shared functions documented, no warning (log: $logdir/kerneldoc.log)"
}

# Debian's arm64 6.1 kbuild tree (linux-headers-<abi>-arm64 with its common
# headers and kbuild's host tools), as the arm64 QEMU guests build against
# it: no kernel tree to prepare, and modpost checks every kernel symbol the
# module uses against the kernel's Module.symvers.
arm64_tree() {
	local tree
	tree=$(bash "$top/tests/qemu/debian-arm64.sh" | tail -n 1) || return 1
	printf '%s\n' "$tree/usr/src/linux-headers-$(cat "$tree/kernel-release")"
}

check_arm64() {
	local kdir
	kdir=$(arm64_tree) || { echo "  preparing the arm64 tree failed"; return 1; }
	build arm64 "$kdir" ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu- W=1
}

# The Jetson kbuild tree: kbuild/ in the test inputs (tests/shared-dir.sh).
check_jetson() {
	local kb
	kb=$(shared_dir "$top")/kbuild
	local dir="$tmp/jetson" logf="$logdir/jetson.log" ko deps
	[ -x "$kb/build-module.sh" ] || [ -f "$kb/build-module.sh" ] ||
		{ echo "  no $kb/build-module.sh"; return 1; }
	rm -rf "$dir"
	cp -a "$kmod_src" "$dir"
	make -C "$dir" clean >/dev/null 2>&1 || true
	# FAIL_ON_WARN: any gcc, sparse, kbuild or modpost warning fails it.
	if ! FAIL_ON_WARN=1 bash "$kb/build-module.sh" "$dir" C=1 >"$logf" 2>&1; then
		grep -E '(warning|error):|^(WARNING|ERROR):|^=== ' "$logf" | head -n 30
		echo "  build failed or warned (log: $logf)"
		return 1
	fi
	grep '^=== ' "$logf" | sed 's/^/  /'
	ko="$dir/fpga_p2p.ko"
	[ -f "$ko" ] || { echo "  no fpga_p2p.ko"; return 1; }
	if [ -n "$(find "$dir" -name 'nvp2p_shim.ko' -print -quit)" ]; then
		echo "  the shim was built although NVIDIA's header was given"
		return 1
	fi
	deps=$(modinfo -F depends "$ko")
	echo "  $(modinfo -F vermagic "$ko"); depends: $deps"
	case ,$deps, in
	*,nvidia-p2p,*) ;;
	*) echo "  fpga_p2p.ko does not depend on nvidia-p2p"; return 1 ;;
	esac
}

failed=0
for check in w1 sparse checkpatch kerneldoc arm64 jetson; do
	if [ ${#only[@]} -gt 0 ] && ! printf '%s\n' "${only[@]}" | grep -qx "$check"; then
		continue
	fi
	echo "--- $check"
	t0=$SECONDS
	if "check_$check"; then
		echo "PASS $check ($((SECONDS - t0)) s)"
	else
		echo "FAIL $check ($((SECONDS - t0)) s)"
		failed=1
	fi
done
[ "$failed" -eq 0 ] && echo "kmod checks: all passed" || echo "kmod checks: FAILED"
exit "$failed"
