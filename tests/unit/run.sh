#!/usr/bin/env bash
# The unit's userspace booted in QEMU (run-all step qemu:unit): Debian's
# kernel under TCG, the emulated FPGA card behind intel-iommu, a Debian 12
# userspace with systemd as PID 1 (tests/unit/build-image.sh, cached)
# standing in for the Yocto image's, the repository's files installed where
# the recipes install them (board/jetson-agx-orin-devkit/install-manifest),
# the module loaded at boot by systemd-modules-load with NVIDIA's
# nvidia-p2p, the board's udev rule, and radard.service started by systemd
# from the board's unit file, unchanged. The test's only changes: a radard
# drop-in (tests/unit/radard-unit.toml: CPU backend, small geometry) and
# the outputs' destination pointed at the host. Then the checks of
# tests/unit/unit_checks.py, from the host: see tests/unit/README.md.
#
#   bash tests/unit/run.sh [--keep] [--allow-pending]
#
# --allow-pending: exit 0 when every check that ran passed, even if some
# could not run because the unit's configuration lacks what they check
# (they are listed as "not run" either way; without it they fail the step).
# --keep: leave the guest's work directory (disks, console) in target/unit/.
# Results: target/unit/unit.results (one line per check), unit.log (the
# guest's console), unit.journal (the guest's journal at the end).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
board="$top/board/jetson-agx-orin-devkit"
# shellcheck source=tests/qemu/lib.sh
. "$top/tests/qemu/lib.sh"
# shellcheck source=tests/shared-dir.sh
. "$top/tests/shared-dir.sh"

keep=0 allow_pending=0
while [ $# -gt 0 ]; do
	case $1 in
	--keep) keep=1; shift ;;
	--allow-pending) allow_pending=1; shift ;;
	*) die "usage: run.sh [--keep] [--allow-pending]" ;;
	esac
done

t_start=$SECONDS
ensure_pkgs qemu-system-x86 fdisk e2fsprogs python3 kmod build-essential xz-utils \
	linux-image-amd64 linux-headers-amd64
outdir="$top/target/unit"
work="$outdir/work"
rm -rf "$work"
mkdir -p "$work" "$outdir"

# --- the kernel: Debian's, with its own initrd (virtio disk, ext4) ---------------
kver=''
for img in $(printf '%s\n' /boot/vmlinuz-*-amd64 | sort -V -r); do
	v=${img#/boot/vmlinuz-}
	if [ -f "/usr/src/linux-headers-$v/Makefile" ] && [ -f "/boot/initrd.img-$v" ]; then
		kver=$v
		break
	fi
done
[ -n "$kver" ] || die "no /boot/vmlinuz-*-amd64 with its initrd and linux-headers"
kdir="/usr/src/linux-headers-$kver"
# Readable by root only on Debian.
as_root cat "/boot/vmlinuz-$kver" >"$work/vmlinuz"
as_root cat "/boot/initrd.img-$kver" >"$work/initrd.img"

# --- cached: the root file system and QEMU with the card -------------------------
image=$(bash "$here/build-image.sh" "$kver" | tail -n 1)
[ -f "$image" ] || die "no root file system image from build-image.sh"
qemu_bin=$(bash "$top/tests/qemu/build-qemu.sh" | tail -n 1)
[ -x "$qemu_bin" ] || die "no QEMU binary from tests/qemu/build-qemu.sh"
log "$(printf 'cached artefacts ready after %d s' $((SECONDS - t_start)))"

# --- the modules: NVIDIA's nvidia-p2p, and fpga_p2p against it (as on L4T) -------
# Cached in target/unit/ by the sources' hash: a run without kernel changes
# builds nothing.
nv_src=$(shared_dir "$top")/nvidia-p2p
[ -f "$nv_src/nvidia-p2p.c" ] || die "no NVIDIA nvidia-p2p source in $nv_src"
mod_key=$({
	echo "$kver"
	(cd "$top/kmod" && git ls-files -co --exclude-standard | LC_ALL=C sort | xargs sha256sum)
	(cd "$nv_src" && find . -type f | LC_ALL=C sort | xargs sha256sum)
} | sha256sum | cut -c1-16)
mods="$outdir/modules-$mod_key"
if [ ! -f "$mods/.complete" ]; then
	rm -rf "$outdir"/modules-*
	mkdir -p "$mods"
	cp -a "$nv_src" "$mods/nvidia-p2p"
	log "building NVIDIA's nvidia-p2p against $kdir"
	make -C "$kdir" M="$mods/nvidia-p2p" -j"$(nproc)" modules >"$mods/nvidia-p2p.log" 2>&1 ||
		{ cat "$mods/nvidia-p2p.log" >&2; die "building NVIDIA's nvidia-p2p failed"; }
	cp -a "$top/kmod" "$mods/kmod"
	make -C "$mods/kmod" KDIR="$kdir" clean >/dev/null 2>&1 || true
	log "building fpga_p2p against $kdir and NVIDIA's nv-p2p.h"
	make -C "$mods/kmod" KDIR="$kdir" NVP2P_INC="$mods/nvidia-p2p/include" \
		KBUILD_EXTRA_SYMBOLS="$mods/nvidia-p2p/Module.symvers" -j"$(nproc)" >"$mods/kmod.log" 2>&1 ||
		{ cat "$mods/kmod.log" >&2; die "building fpga_p2p failed"; }
	touch "$mods/.complete"
fi
fpga_ko=$(find "$mods/kmod" -name fpga_p2p.ko -print -quit)
nv_ko=$(find "$mods/nvidia-p2p" -name nvidia-p2p.ko -print -quit)
[ -n "$fpga_ko" ] && [ -n "$nv_ko" ] || die "the module builds made no fpga_p2p.ko or nvidia-p2p.ko"

# --- radard and radarctl: glibc, as the image links them ----------------------------
# Debian 12's glibc in the guest is this machine's. Not the QEMU suites'
# static musl build: musl's sched_setscheduler() is a stub (ENOSYS), so
# that radard cannot take SCHED_FIFO, and the unit's rt.strict refuses to run.
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
log "building radard, radarctl and radar-dsp (release)"
(cd "$top" && nice cargo build --release --locked -p radard -p radarctl -p radar-dsp) >"$work/cargo.log" 2>&1 ||
	{ tail -n 40 "$work/cargo.log" >&2; die "building radard/radarctl/radar-dsp failed"; }
bindir="$top/target/release"

# --- the run's files: the manifest's, then the test's -----------------------------
stage="$work/stage"
root="$stage/root"
mkdir -p "$root"
: >"$stage/accounts"
: >"$stage/enable"
while read -r recipe kind src dest mode; do
	case $recipe in '' | '#'*) continue ;; esac
	dest=${dest//KERNEL_VERSION/$kver}
	case $kind in
	file) install -D -m "$mode" "$top/$src" "$root$dest" ;;
	dir) install -d -m "$mode" "$root$dest" ;;
	program) install -D -m "$mode" "$bindir/$src" "$root$dest" ;;
	module)
		[ "$src" = fpga_p2p ] || die "install-manifest: no build for module $src"
		install -D -m "$mode" "$fpga_ko" "$root$dest"
		;;
	autoload) mkdir -p "$(dirname "$root$dest")"; echo "$src" >"$root$dest"; chmod "$mode" "$root$dest" ;;
	link) mkdir -p "$(dirname "$root$dest")"; ln -sfn "$src" "$root$dest" ;;
	group | user) echo "$kind $src $dest" >>"$stage/accounts" ;;
	enable) echo "$src" >>"$stage/enable" ;;
	*) die "install-manifest: unknown kind '$kind' ($recipe $src)" ;;
	esac
done <"$board/install-manifest"
# NVIDIA's module where meta-tegra's nvidia-kernel-oot puts it; the
# modules-load.d entry names only fpga_p2p: modprobe loads nvidia-p2p for
# its symbols (depmod, at the stage step in the guest).
install -D -m 0644 "$nv_ko" "$root/usr/lib/modules/$kver/updates/nvidia-p2p.ko"

# The test's own files (not the unit's): its radard drop-in and scene, the
# host's root shell on a virtio console, the header UART's name, the
# network, and a stand-in for RAUC behind radar-mark-good.
test_root="$stage/test-root"
# The host's UDP port for the unit's network outputs (the guest sends to
# 10.0.2.2:PORT, QEMU's user-mode network delivers to 127.0.0.1:PORT).
port=$(python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$here/unit_config.py" write --board-config "$board/radard.toml" \
	--dropin "$here/radard-unit.toml" --scene "$top/tests/qemu/radard/scene-a.toml" \
	--radard "$bindir/radard" --port "$port" --root "$test_root" --out-json "$work/config.json"
install -D -m 0644 "$here/guest/radar-unit-shell.service" "$test_root/etc/systemd/system/radar-unit-shell.service"
install -D -m 0644 "$here/guest/99-radar-unit-uart.rules" "$test_root/etc/udev/rules.d/99-radar-unit-uart.rules"
install -D -m 0644 "$here/guest/10-radar-unit.network" "$test_root/etc/systemd/network/10-radar-unit.network"
install -D -m 0755 "$here/guest/rauc-stand-in" "$test_root/usr/local/bin/rauc-stand-in"
install -D -m 0644 "$here/guest/radar-mark-good-unit-test.conf" \
	"$test_root/etc/systemd/system/radar-mark-good.service.d/50-unit-test.conf"
# Developer override: more files for the guest (e.g. a unit drop-in to try).
[ -z "${RADAR_UNIT_EXTRA_ROOT:-}" ] || cp -a "$RADAR_UNIT_EXTRA_ROOT/." "$test_root/"
install -m 0755 "$here/guest/install.sh" "$stage/install.sh"
# The front end: with content adc, the card streams a recording of moving
# targets (front-end.toml in the test's geometry) written by radar-dsp,
# with its per-frame truth for the ASTERIX check.
card=radar-fpga-card
if [ "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["content"])' "$work/config.json")" = adc ]; then
	awk '/^\[/ { keep = ($0 ~ /^\[(geometry|physical|cfar|chain)\]/) } keep' \
		"$here/radard-unit.toml" >"$work/front-end-chain.toml"
	"$bindir/radar-dsp" scene --config "$work/front-end-chain.toml" --scene "$here/front-end.toml" \
		--frames 100 --seed 7 --output "$work/front-end.raw" --truth "$work/front-end.truth.jsonl" \
		2>"$work/front-end.log" || { cat "$work/front-end.log" >&2; die "writing the front-end recording failed"; }
	card+=",adc-recording=${work//,/,,}/front-end.raw"
fi
# The second decoder of the ASTERIX check (as tests/asterix-roundtrip.sh).
asterix_python=''
if python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["effective"]
sys.exit(0 if any(s.get("kind") == "asterix" for s in c.get("sink", [])) else 1)' "$work/config.json"; then
	asterix_python=$(bash "$top/tests/asterix-decoder-venv.sh")
fi
# Wireshark's dissector for the ASTERIX check, when the unit sends ASTERIX.
if python3 -c 'import json, sys; c = json.load(open(sys.argv[1]))["effective"]
sys.exit(0 if any(s.get("kind") == "asterix" for s in c.get("sink", [])) else 1)' "$work/config.json"; then
	ensure_pkgs tshark
fi
echo "$kver" >"$stage/kernel-version"
stage_mb=$(($(du -sm "$stage" | cut -f1) + 16))
mke2fs -q -t ext4 -L radar-stage -d "$stage" "$work/stage.ext4" "${stage_mb}M" ||
	die "mke2fs -d of the run's files failed"

# The data partition: GPT, one partition labelled UDA (the flash layout's
# user data partition), no file system: radar-data-mkfs.service makes it at
# the first boot. Small, so that the test can fill it.
truncate -s 24M "$work/data.img"
echo 'label: gpt
size=16M, name=UDA' | sfdisk -q "$work/data.img" >/dev/null || die "sfdisk of the data disk failed"

# --- boot ---------------------------------------------------------------------------
cmdline="console=ttyS0,115200 root=LABEL=radar-unit-root rw init=/usr/local/sbin/radar-unit-stage no_timer_check"
cmdline+=" intel_iommu=on iommu=nopt panic=-1 noresume"
# Four CPUs as the Orin's first four: radard.service's CPUAffinity=1-3 and
# the unit's rt.cpu = 2 hold unchanged.
cmdline+=" rcupdate.rcu_cpu_stall_timeout=60 watchdog_thresh=30"
qemu=("$qemu_bin" -accel tcg -machine q35 -smp 4 -m 2048 -nodefaults -no-user-config
	-L /usr/share/qemu -L /usr/share/seabios -display none -no-reboot
	-kernel "$work/vmlinuz" -initrd "$work/initrd.img" -append "$cmdline"
	-device intel-iommu,intremap=on -device "$card"
	-drive "file=$image,format=raw,if=virtio,snapshot=on"
	-drive "file=$work/stage.ext4,format=raw,if=virtio,readonly=on"
	-drive "file=$work/data.img,format=raw,if=virtio"
	-netdev user,id=net0 -device virtio-net-pci,netdev=net0,romfile=
	-serial "file:$outdir/unit.log"
	-chardev pty,id=uart -serial chardev:uart
	-device virtio-serial-pci
	-chardev "socket,id=shell,path=$work/shell.sock,server=on,wait=off" -device virtconsole,chardev=shell)
log "booting the unit's userspace (log: $outdir/unit.log)"
rm -f "$outdir/unit.log"
t_boot=$SECONDS
timeout -k 10 900 "${qemu[@]}" </dev/null >"$work/qemu.out" 2>&1 &
qemu_pid=$!
trap 'kill "$qemu_pid" 2>/dev/null || true' EXIT

check_args=()
[ -z "$asterix_python" ] || check_args+=(--asterix-python "$asterix_python")
[ ! -f "$work/front-end.truth.jsonl" ] || check_args+=(--truth "$work/front-end.truth.jsonl")
[ "$allow_pending" = 1 ] && check_args+=(--allow-pending)
set +e
python3 "$here/unit_checks.py" --shell "$work/shell.sock" --qemu-output "$work/qemu.out" \
	--qemu-pid "$qemu_pid" --port "$port" --config "$work/config.json" \
	--radarctl "$bindir/radarctl" --board "$board" --kernel-version "$kver" \
	--results "$outdir/unit.results" --console "$outdir/unit.log" --journal "$outdir/unit.journal" "${check_args[@]}"
status=$?
set -e
# The checks end with a poweroff; QEMU goes with it (or is stopped).
for _ in $(seq 60); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 1; done
kill "$qemu_pid" 2>/dev/null || true
wait "$qemu_pid" 2>/dev/null || true
trap - EXIT
log "guest ran $((SECONDS - t_boot)) s; step $((SECONDS - t_start)) s"
if grep -qE 'BUG:|WARNING:|Oops|Kernel panic|general protection' "$outdir/unit.log"; then
	log "kernel reports on the console ($outdir/unit.log):"
	grep -E 'BUG:|WARNING:|Oops|Kernel panic|general protection' "$outdir/unit.log" | head >&2
	status=1
fi
[ "$keep" = 1 ] || rm -rf "$work"
exit "$status"
