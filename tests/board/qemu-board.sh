#!/usr/bin/env bash
# The board's runtime pieces in a QEMU guest (TCG), real kernel, real tools:
#
#   --test gpio   debug kernel (gpio-sim, GPIO character device): radard,
#                 configured with [fpga_reset] by chip label and line name,
#                 pulses a gpio-sim line; a watcher in the guest records the
#                 line's value (gpio-sim's sim_gpioN/value) and its width;
#                 debugfs shows radard holding it; a missing line or chip is
#                 refused with the key named.
#   --test udev   Debian's kernel (the debug kernel has no networking, which
#                 udevd's netlink socket needs): this machine's systemd-udevd
#                 applies board/.../udev/60-fpga-p2p.rules to the fpga_p2p
#                 module's /dev/fpga-p2p0 (emulated card): group radar, 0660.
#
#   bash tests/board/qemu-board.sh --test gpio|udev
# Results: target/board-qemu/<test>.results (checks), <test>.log (console).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
board="$top/board/jetson-agx-orin-devkit"
# shellcheck source=../qemu/lib.sh
. "$top/tests/qemu/lib.sh"

test_name=
while [ $# -gt 0 ]; do
	case $1 in
	--test) test_name=${2:-}; shift 2 ;;
	*) die "usage: qemu-board.sh --test gpio|udev" ;;
	esac
done
case $test_name in
gpio) want_checks="gpio-sim-chip radard-pulse-run radard-says-pulsed line-pulsed-low-then-high pulse-width line-held-by-radard missing-line-refused missing-line-named missing-line-no-pulse missing-chip-refused missing-chip-named" ;;
udev) want_checks="node-without-udev udevd-running node-with-rule" ;;
*) die "usage: qemu-board.sh --test gpio|udev" ;;
esac

ensure_pkgs qemu-system-x86 busybox-static cpio kmod python3 build-essential udev
outdir="$top/target/board-qemu"
work="$outdir/$test_name.d"
console="$outdir/$test_name.log"
results="$outdir/$test_name.results"
rm -rf "$work" "$console" "$results"
mkdir -p "$work"
root="$work/root"
mkdir -p "$root"/{bin,sbin,etc,lib/modules/radar,lib64,usr/bin,proc,sys,dev,run,tmp}
cp /bin/busybox "$root/bin/busybox"
for a in sh mount mkdir sleep cat echo sed grep awk stat insmod rmmod reboot sync \
	head tr wc rm touch seq ls; do
	ln -s busybox "$root/bin/$a"
done
install -m 0755 "$here/guest-board.sh" "$root/init"
printf 'root:x:0:0:root:/:/bin/sh\nradar:x:990:990:radar:/:/bin/false\n' >"$root/etc/passwd"
printf 'root:x:0:\nradar:x:990:\n' >"$root/etc/group"
printf 'passwd: files\ngroup: files\n' >"$root/etc/nsswitch.conf"

# copy_with_libs FILE DEST: a dynamic program and the libraries it loads.
copy_with_libs() {
	mkdir -p "$root$(dirname "$2")"
	cp -L "$1" "$root$2"
	ldd "$1" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }' | while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
}

case $test_name in
gpio)
	kdir=${RADAR_DEBUG_KERNEL_DIR:-$(bash "$top/tests/qemu/build-debug-kernel.sh" | tail -n 1)}
	kimage="$kdir/arch/x86/boot/bzImage"
	# shellcheck disable=SC1091
	[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
	log "building radard (release)"
	(cd "$top" && nice cargo build --release --locked -p radard) >"$work/cargo.log" 2>&1 ||
		{ cat "$work/cargo.log" >&2; die "building radard failed"; }
	copy_with_libs "$top/target/release/radard" /usr/bin/radard
	;;
udev)
	ensure_pkgs linux-image-amd64 linux-headers-amd64
	kver=''
	for img in $(printf '%s\n' /boot/vmlinuz-*-amd64 | sort -V -r); do
		v=${img#/boot/vmlinuz-}
		if [ -f "/usr/src/linux-headers-$v/Makefile" ]; then kver=$v; break; fi
	done
	[ -n "$kver" ] || die "no /boot/vmlinuz-*-amd64 with matching linux-headers"
	kdir="/usr/src/linux-headers-$kver"
	kimage="$work/vmlinuz"
	as_root cat "/boot/vmlinuz-$kver" >"$kimage"
	cp -a "$top/kmod" "$work/kmod"
	make -C "$work/kmod" KDIR="$kdir" clean >/dev/null 2>&1 || true
	make -C "$work/kmod" KDIR="$kdir" -j"$(nproc)" >"$work/kmod.log" 2>&1 ||
		{ cat "$work/kmod.log" >&2; die "building the modules failed"; }
	for m in nvp2p_shim fpga_p2p; do
		ko=$(find "$work/kmod" -name "$m.ko" -print -quit)
		[ -n "$ko" ] || die "no $m.ko"
		cp "$ko" "$root/lib/modules/radar/"
	done
	: >"$root/lib/modules/radar/deps.order"
	for dep in $(modinfo -F depends "$root"/lib/modules/radar/*.ko | tr ',' ' '); do
		case $dep in nvp2p_shim | fpga_p2p) continue ;; esac
		modprobe -S "$kver" --show-depends "$dep" | awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++' | while read -r ko; do
		base=$(basename "$ko")
		case $base in
		*.ko.xz) xz -dc "$ko" >"$root/lib/modules/radar/${base%.xz}"; base=${base%.xz} ;;
		*.ko) cp "$ko" "$root/lib/modules/radar/" ;;
		esac
		echo "$base" >>"$root/lib/modules/radar/deps.order"
	done
	copy_with_libs /bin/udevadm /bin/udevadm
	mkdir -p "$root/lib/systemd"
	ln -s /bin/udevadm "$root/lib/systemd/systemd-udevd"
	mkdir -p "$root/etc/udev/rules.d"
	cp "$board/udev/60-fpga-p2p.rules" "$root/etc/udev/rules.d/"
	;;
esac

python3 "$top/tests/qemu/harness.py" cpio "$root" "$work/initramfs.cpio"
log "booting the $test_name guest ($(du -h "$work/initramfs.cpio" | cut -f1) initramfs)"
t0=$SECONDS
# QEMU with the emulated FPGA card (tests/qemu/build-qemu.sh, cached): the
# driver creates /dev/fpga-p2p0 for it as for the card on the unit.
qemu_bin=$(bash "$top/tests/qemu/build-qemu.sh" | tail -n 1)
[ -x "$qemu_bin" ] || die "no QEMU binary from tests/qemu/build-qemu.sh"
timeout -k 10 600 "$qemu_bin" -accel tcg -machine q35 -smp 2 -m 2048 -nodefaults -no-user-config \
	-L /usr/share/qemu -L /usr/share/seabios -device radar-fpga-card \
	-display none -no-reboot -kernel "$kimage" -initrd "$work/initramfs.cpio" \
	-append "console=ttyS0,115200 panic=-1 no_timer_check radar.board=$test_name" \
	-serial "file:$console" -serial "file:$results" </dev/null || true
log "QEMU ran $((SECONDS - t0)) s"

tr -d '\r' <"$results" | sed 's/^/  /'
fail=0
grep -q '^@@done' <(tr -d '\r' <"$results") || { log "the guest did not finish (see $console)"; fail=1; }
for c in $want_checks; do
	line=$(tr -d '\r' <"$results" | grep "^@@check $c " || true)
	case $line in
	"@@check $c ok"*) ;;
	"") log "check $c: missing"; fail=1 ;;
	*) log "check $c: failed"; fail=1 ;;
	esac
done
if grep -qE 'BUG:|WARNING:|Oops|Kernel panic|general protection' "$console"; then
	log "kernel reports in $console:"
	grep -E 'BUG:|WARNING:|Oops|Kernel panic|general protection' "$console" | head >&2
	fail=1
fi
n=$(wc -w <<<"$want_checks")
if [ "$fail" -eq 0 ]; then
	echo "board-qemu $test_name: $n checks passed"
else
	echo "board-qemu $test_name: FAILED"
fi
exit "$fail"
