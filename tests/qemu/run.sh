#!/usr/bin/env bash
# Boots a real kernel under QEMU (TCG) with fpga_p2p + nvp2p_shim and the
# capture test programs in an initramfs, runs suites, reports counts (and
# the run as KTAP, target/qemu/<kernel>-<suite>.ktap). The
# card is an emulated PCI device (tests/qemu/fpga-card/, QEMU built by
# build-qemu.sh) behind QEMU's intel-iommu with DMA remapping on.
#
#   bash tests/qemu/run.sh --kernel debian|debug --suite NAME[,NAME...]|all [--p2p shim|nvidia] [--swiotlb] [--keep] [--timeout S]
#   bash tests/qemu/run.sh --kernel debian --suite shell    # interactive guest
#   bash tests/qemu/run.sh --kernel debug --canary           # the detectors fire?
#   bash tests/qemu/run.sh --arch arm64 --suite all [--p2p shim|nvidia]   # arm64 guest
#   bash tests/qemu/run.sh --list [--arch arm64]             # the suites
#
# Writes target/qemu/<kernel>-<suite>.json (and <kernel>-all.json for all), the
# kernel console in target/qemu/<kernel>-<suite>.log and the result channel in
# target/qemu/<kernel>-<suite>.results, the card's state at the machine's
# shutdown in target/qemu/<kernel>-<suite>.card. Last line: "N passed, N failed". Exit
# status non-zero when a suite failed, the kernel reported a problem, or the
# guest crashed or hung. See tests/qemu/README.md.
#
# --p2p picks the nv-p2p implementation: shim (kmod/nvp2p_shim, the default,
# with its debugfs counters and fault injection) or nvidia (NVIDIA's own
# nvidia-p2p module from ../shared/nvidia-p2p, built from a scratch copy);
# results of nvidia runs go to target/qemu/nvidia/.
#
# --arch arm64 boots Debian's arm64 kernel (debian-arm64.sh: Debian's packages,
# no kernel build) on QEMU's aarch64 `virt` machine with an SMMUv3 in front of
# its PCIe, so the card's DMA goes through an Arm SMMU as on the Orin; the
# modules (and NVIDIA's nvidia-p2p) are cross-built for that kernel, the
# programs are the image's aarch64 executables (yocto-layer/scripts/cross-build.sh)
# on Debian's arm64 glibc and busybox. Only --kernel debian (the default
# there); its suite table is guest-init.sh's SUITES_ARM64. Results go to
# target/qemu/arm64/ (and arm64/nvidia/).
#
# Developer overrides: RADAR_KMOD_DIR (module source instead of kmod/),
# RADAR_SUITE_BIN (a p2p-suite binary instead of building it), RADAR_RADARD_BIN
# (a static radard for the radard suite instead of building it; its radar-dsp,
# which writes the front-end recording, beside it or in RADAR_DSP_BIN),
# RADAR_SHARED_DIR (the test inputs; default: see tests/shared-dir.sh),
# RADAR_QEMU_OUTDIR (results elsewhere than target/qemu).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
# shellcheck source=tests/qemu/lib.sh
. "$here/lib.sh"
# shellcheck source=tests/shared-dir.sh
. "$here/../shared-dir.sh"

usage() { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }

kernel='' suite='' keep=0 host_timeout='' canary=0 swiotlb=0 p2p=shim arch=x86_64 list=0
while [ $# -gt 0 ]; do
	case $1 in
	--arch) arch=${2:-}; shift 2 ;;
	--swiotlb) swiotlb=1; shift ;;
	--kernel) kernel=${2:-}; shift 2 ;;
	--p2p) p2p=${2:-}; shift 2 ;;
	--suite) suite=${2:-}; shift 2 ;;
	--keep) keep=1; shift ;;
	--canary) canary=1; suite=canary; shift ;;
	--timeout) host_timeout=${2:-}; shift 2 ;;
	--list) list=1; shift ;;
	-h | --help) usage ;;
	*) log "unknown argument: $1"; usage ;;
	esac
done
case $arch in
x86_64 | x86-64 | amd64) arch=x86_64 ;;
arm64 | aarch64)
	arch=arm64
	# Debian's arm64 kernel only: the debug kernel, swiotlb and the canary
	# are x86 configurations.
	kernel=${kernel:-debian}
	[ "$kernel" = debian ] || die "--arch arm64 runs Debian's arm64 kernel (--kernel debian) only"
	if [ "$swiotlb" = 1 ] || [ "$canary" = 1 ]; then die "--swiotlb and --canary are x86 runs"; fi
	;;
*) usage ;;
esac
[ "$list" = 1 ] && { sh "$here/guest-init.sh" --list "$arch"; exit 0; }
case $kernel in debian | debug) ;; *) usage ;; esac
case $p2p in shim | nvidia) ;; *) usage ;; esac
[ -n "$suite" ] || usage

# Suites and their guest time limits come from the table in guest-init.sh
# (the arm64 guests have their own).
declare -A limit_of=()
all_suites=()
while read -r name limit; do
	limit_of[$name]=$limit
	all_suites+=("$name")
done < <(sh "$here/guest-init.sh" --list "$arch")
case $suite in
all)
	suites=("${all_suites[@]}")
	# The card's clock (the ptp suite) does not go through nv-p2p: it runs
	# with the shim only, not again against NVIDIA's module.
	if [ "$p2p" = nvidia ]; then
		kept=()
		for s in "${suites[@]}"; do [ "$s" = ptp ] || kept+=("$s"); done
		suites=("${kept[@]}")
	fi
	;;
shell) suites=() ;;
canary)
	# The detector canary: a deliberately broken module and program
	# (tests/qemu/planted-bugs/); every suite but stream commits one kind of
	# kernel bug.
	[ "$canary" = 1 ] || die "use --canary"
	[ "$kernel" = debug ] || die "--canary needs the debug kernel's detectors"
	suites=(stream ownership revocation crash badinput duplex)
	export RADAR_KMOD_DIR="$here/planted-bugs" RADAR_SUITE_BIN="$here/planted-bugs/p2p-suite"
	;;
*)
	# One suite, or a comma-separated list (run in the table's order).
	IFS=, read -r -a asked <<<"$suite"
	suites=()
	for s in "${asked[@]}"; do
		[ -n "${limit_of[$s]:-}" ] || die "no suite '$s' (have: ${all_suites[*]} all shell)"
	done
	for s in "${all_suites[@]}"; do
		printf '%s\n' "${asked[@]}" | grep -qx "$s" && suites+=("$s")
	done
	;;
esac

t_start=$SECONDS
ensure_pkgs qemu-system-x86 busybox-static cpio kmod python3 build-essential binutils

outdir=${RADAR_QEMU_OUTDIR:-"$top/target/qemu"}
# The arm64 guests' files are kept apart from the x86 ones of the same kernel.
[ "$arch" = arm64 ] && outdir="$outdir/arm64"
# The canary's suites fail on purpose: keep their files apart from the
# real suites' results of the same kernel.
[ "$suite" = canary ] && outdir="$outdir/canary"
# Runs against NVIDIA's module keep their own files beside the shim's.
[ "$p2p" = nvidia ] && outdir="$outdir/nvidia"
# swiotlb=force (every DMA bounced, the IOMMU off): a missing or wrong sync
# shows up as a byte mismatch. Its results are kept apart.
[ "$swiotlb" = 1 ] && outdir="$outdir/swiotlb"
name="$kernel-${suite//,/+}"
work="$outdir/$name.d"
console_log="$outdir/$name.log"
results_log="$outdir/$name.results"
rm -rf "$work"
mkdir -p "$work" "$outdir"
rm -f "$console_log" "$results_log"

# --- the kernel ------------------------------------------------------------------
# Module builds for another architecture: make's arguments, and where
# modprobe finds the kernel's modules (-d).
cross_args=() mod_root=/
case $arch-$kernel in
arm64-debian)
	# Debian's arm64 packages, unpacked (debian-arm64.sh): no kernel build.
	arm64_tree=$(bash "$here/debian-arm64.sh" | tail -n 1)
	kver=$(cat "$arm64_tree/kernel-release")
	kdir="$arm64_tree/usr/src/linux-headers-$kver"
	kimage="$arm64_tree/boot/vmlinuz-$kver"
	cross_args=(ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-)
	mod_root=$arm64_tree
	;;
x86_64-debian)
	ensure_pkgs linux-image-amd64 linux-headers-amd64
	# The newest installed Debian kernel that has its headers.
	kver=''
	for img in $(printf '%s\n' /boot/vmlinuz-*-amd64 | sort -V -r); do
		v=${img#/boot/vmlinuz-}
		if [ -f "/usr/src/linux-headers-$v/Makefile" ]; then kver=$v; break; fi
	done
	[ -n "$kver" ] || die "no /boot/vmlinuz-*-amd64 with matching linux-headers"
	kdir="/usr/src/linux-headers-$kver"
	kimage="$work/vmlinuz"
	# /boot/vmlinuz-* is readable by root only on Debian.
	as_root cat "/boot/vmlinuz-$kver" >"$kimage"
	;;
x86_64-debug)
	kdir=$(bash "$here/build-debug-kernel.sh" | tail -n 1)
	kimage="$kdir/arch/x86/boot/bzImage"
	kver=$(cat "$kdir/include/config/kernel.release")
	;;
esac
log "kernel: $kernel $arch ($kver) from $kdir; nv-p2p: $p2p"

# --- the modules -----------------------------------------------------------------
kmod_src=${RADAR_KMOD_DIR:-"$top/kmod"}
[ -f "$kmod_src/Makefile" ] || die "no $kmod_src/Makefile (the kernel module is not there yet)"
# A private copy: builds for the two kernels must not share objects.
cp -a "$kmod_src" "$work/kmod"
log "building modules against $kdir"
# Objects of an in-place build in the checkout must not leak into this one.
make -C "$work/kmod" KDIR="$kdir" "${cross_args[@]}" clean >/dev/null 2>&1 || true
kmod_args=()
if [ "$p2p" = nvidia ]; then
	# NVIDIA's module, unmodified, from a scratch copy (kbuild writes into M=).
	nv_src=$(shared_dir "$top")/nvidia-p2p
	[ -f "$nv_src/nvidia-p2p.c" ] || die "no NVIDIA nvidia-p2p source in $nv_src"
	cp -a "$nv_src" "$work/nvidia-p2p"
	log "building NVIDIA's nvidia-p2p against $kdir"
	make -C "$kdir" M="$work/nvidia-p2p" "${cross_args[@]}" -j"$(nproc)" modules \
		>"$work/nvidia-p2p.log" 2>&1 ||
		{ cat "$work/nvidia-p2p.log" >&2; die "building NVIDIA's nvidia-p2p failed"; }
	# fpga_p2p against NVIDIA's header and exports; no shim is built.
	kmod_args=(NVP2P_INC="$work/nvidia-p2p/include"
		KBUILD_EXTRA_SYMBOLS="$work/nvidia-p2p/Module.symvers")
fi
make -C "$work/kmod" KDIR="$kdir" "${cross_args[@]}" "${kmod_args[@]}" -j"$(nproc)" \
	>"$work/kmod.log" 2>&1 ||
	{ cat "$work/kmod.log" >&2; die "building the modules failed"; }
ko_of() {
	local ko
	ko=$(find "$2" -name "$1.ko" -print -quit)
	[ -n "$ko" ] || die "the module build made no $1.ko"
	printf '%s\n' "$ko"
}
if [ "$p2p" = nvidia ]; then
	p2p_ko=$(ko_of nvidia-p2p "$work/nvidia-p2p")
else
	p2p_ko=$(ko_of nvp2p_shim "$work/kmod")
fi
fpga_ko=$(ko_of fpga_p2p "$work/kmod")

# --- QEMU with the emulated card -------------------------------------------------
qemu_bin=$(bash "$here/build-qemu.sh" --arch "$arch" | tail -n 1)
[ -x "$qemu_bin" ] || die "no QEMU binary from build-qemu.sh"
# This run's own link to it: checkouts sharing the cache remove builds they
# think unused, and the programs below take minutes to build.
ln -f "$qemu_bin" "$work/" 2>/dev/null || cp "$qemu_bin" "$work/"
qemu_bin="$work/${qemu_bin##*/}"

# --- the test programs -----------------------------------------------------------
uapi_make_args=()
if [ "$arch" = arm64 ]; then
	# The image's aarch64 executables, glibc-linked (tests/qemu/arm64.sh): they
	# come in through the developer overrides below.
	# shellcheck source=tests/qemu/arm64.sh
	. "$here/arm64.sh"
	arm64_programs
fi
if [ -n "${RADAR_SUITE_BIN:-}" ]; then
	suite_bin=$RADAR_SUITE_BIN
else
	# shellcheck disable=SC1091
	[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
	command -v cargo >/dev/null || die "no cargo (run scripts/setup.sh)"
	rustup target list --installed | grep -qx x86_64-unknown-linux-musl ||
		rustup target add x86_64-unknown-linux-musl
	log "building p2p-suite (static, musl)"
	(cd "$top" && cargo build --release --locked -p p2p-suite \
		--target x86_64-unknown-linux-musl) >"$work/cargo.log" 2>&1 ||
		{ cat "$work/cargo.log" >&2; die "building p2p-suite failed"; }
	suite_bin="$top/target/x86_64-unknown-linux-musl/release/p2p-suite"
fi
[ -x "$suite_bin" ] || die "no test program $suite_bin"
if [ "$arch" = x86_64 ] && readelf -l "$suite_bin" 2>/dev/null | grep -q 'interpreter'; then
	die "$suite_bin is dynamically linked; the initramfs has no libc"
fi

# radard itself, static like p2p-suite (its CUDA and NVML loading find
# nothing in the guest), for the radard and ptp suites only.
radard_bin=''
if printf '%s\n' "${suites[@]}" | grep -qx -e radard -e ptp; then
	if [ -n "${RADAR_RADARD_BIN:-}" ]; then
		radard_bin=$RADAR_RADARD_BIN
	else
		log "building radard and radar-dsp (static, musl)"
		(cd "$top" && cargo build --release --locked -p radard -p radar-dsp \
			--target x86_64-unknown-linux-musl) >"$work/cargo-radard.log" 2>&1 ||
			{ cat "$work/cargo-radard.log" >&2; die "building radard failed"; }
		radard_bin="$top/target/x86_64-unknown-linux-musl/release/radard"
	fi
	[ -x "$radard_bin" ] || die "no radard binary $radard_bin"
	dsp_bin=${RADAR_DSP_BIN:-$(dirname "$radard_bin")/radar-dsp}
	[ -x "$dsp_bin" ] || die "no radar-dsp binary $dsp_bin (RADAR_DSP_BIN names one)"
	if [ "$arch" = x86_64 ] && readelf -l "$radard_bin" 2>/dev/null | grep -q 'interpreter'; then
		die "$radard_bin is dynamically linked; the initramfs has no libc"
	fi
fi

# The uapi kselftest (kmod/tests/uapi_test.c), for the uapi suite only: static,
# against kselftest_harness.h of Debian's kernel source (ensure_kernel_src).
uapi_bin=''
if printf '%s\n' "${suites[@]}" | grep -qx uapi; then
	ksrc=$(ensure_kernel_src)
	log "building the uapi kselftest (static)"
	make -C "$top/kmod/tests" KSRC="$ksrc" OUT="$work" "${uapi_make_args[@]}" \
		>"$work/uapi-test.log" 2>&1 ||
		{ cat "$work/uapi-test.log" >&2; die "building the uapi kselftest failed"; }
	uapi_bin="$work/fpga_p2p_uapi_test"
	if readelf -l "$uapi_bin" 2>/dev/null | grep -q 'interpreter'; then
		die "$uapi_bin is dynamically linked; the initramfs has no libc"
	fi
fi

# --- the initramfs ---------------------------------------------------------------
root="$work/root"
mkdir -p "$root/bin" "$root/lib/modules/radar"
if [ "$arch" = arm64 ]; then
	# Debian's arm64 busybox and glibc (tests/qemu/arm64.sh).
	arm64_userspace "$root" "$suite_bin" ${radard_bin:+"$radard_bin"}
else
	cp /bin/busybox "$root/bin/busybox"
fi
ln -s busybox "$root/bin/sh"
install -m 0755 "$here/guest-init.sh" "$root/init"
cp "$suite_bin" "$root/bin/p2p-suite"
[ -z "$uapi_bin" ] || cp "$uapi_bin" "$root/bin/fpga_p2p_uapi_test"
adc_recording=''
if [ -n "$radard_bin" ]; then
	cp "$radard_bin" "$root/bin/radard"
	mkdir -p "$root/etc/radard"
	cp "$here"/radard/* "$root/etc/radard/"
	# The front end of the radard suite's ADC run: front-end.toml written as
	# a raw recording in the suite's geometry (radard.toml's chain sections)
	# for the card's adc-recording property, and its per-frame truth for the
	# guest ("FRAME RANGE VELOCITY AZIMUTH IN_VIEW" lines).
	rec_frames=100
	awk '/^\[/ { keep = ($0 ~ /^\[(geometry|physical|cfar|chain)\]/) } keep' \
		"$here/radard/radard.toml" >"$work/front-end-chain.toml"
	adc_recording="$work/front-end.raw"
	"$dsp_bin" scene --config "$work/front-end-chain.toml" --scene "$here/radard/front-end.toml" \
		--frames "$rec_frames" --seed 5 --output "$adc_recording" \
		--truth "$work/front-end.truth.jsonl" 2>"$work/front-end.log" ||
		{ cat "$work/front-end.log" >&2; die "writing the front-end recording failed"; }
	python3 - "$work/front-end.truth.jsonl" >"$root/etc/radard/front-end.truth" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    f = json.loads(line)
    for t in f["targets"]:
        print(f["frame"], t["range_m"], t["velocity_mps"], t["azimuth_deg"], int(t["in_view"]))
PY
	echo "$rec_frames" >"$root/etc/radard/front-end.frames"
fi
cp "$p2p_ko" "$fpga_ko" "$root/lib/modules/radar/"
if [ "$kernel" = debian ]; then
	# Modules of Debian's kernel that ours need (none are built in), in load order.
	: >"$root/lib/modules/radar/deps.order"
	for dep in $(modinfo -F depends "$p2p_ko" "$fpga_ko" | tr ',' ' '); do
		case $dep in nvp2p_shim | nvidia-p2p | nvidia_p2p | fpga_p2p) continue ;; esac
		modprobe -d "$mod_root" -S "$kver" --show-depends "$dep" | awk '$1 == "insmod" { print $2 }'
	done | awk '!seen[$0]++' | while read -r ko; do
		base=$(basename "$ko")
		case $base in
		*.ko.xz) xz -dc "$ko" >"$root/lib/modules/radar/${base%.xz}"; base=${base%.xz} ;;
		*.ko) cp "$ko" "$root/lib/modules/radar/" ;;
		*) die "cannot use module file $ko" ;;
		esac
		echo "$base" >>"$root/lib/modules/radar/deps.order"
	done
fi
# --- time: linuxptp for the ptp suite (tests/qemu/ptp/) ---------------------------
# linuxptp's own tools from Debian's package, unpacked (not installed on
# this machine) into a cache, with the libraries they load (glibc's).
if printf '%s\n' "${suites[@]}" | grep -qx ptp; then
	lptp_ver=$(apt-cache policy linuxptp | sed -n 's/^ *Candidate: //p')
	[ -n "$lptp_ver" ] && [ "$lptp_ver" != "(none)" ] || die "apt knows no linuxptp package"
	lptp=${RADAR_LINUXPTP_CACHE:-"$HOME/.cache/radar-linuxptp"}/$lptp_ver
	if [ ! -x "$lptp/root/usr/sbin/phc2sys" ]; then
		log "fetching Debian's linuxptp $lptp_ver"
		rm -rf "$lptp"
		mkdir -p "$lptp/dl"
		(cd "$lptp/dl" && apt-get download "linuxptp=$lptp_ver") >"$work/linuxptp.log" 2>&1 ||
			{ cat "$work/linuxptp.log" >&2; die "apt-get download linuxptp failed"; }
		dpkg-deb -x "$lptp"/dl/linuxptp_*.deb "$lptp/root"
	fi
	mkdir -p "$root/usr/sbin" "$root/etc/ptp"
	for b in phc_ctl phc2sys ts2phc pmc ptp4l; do
		cp "$lptp/root/usr/sbin/$b" "$root/usr/sbin/$b"
		# The loader and libraries at the paths the binary names.
		ldd "$lptp/root/usr/sbin/$b" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
	done | sort -u | while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
	cp "$here"/ptp/* "$root/etc/ptp/"
	# The board's unit for the card's phc2sys and its ts2phc configuration:
	# the suite runs them.
	mkdir -p "$root/etc/ptp/board"
	cp "$top/board/jetson-agx-orin-devkit/systemd/radar-phc2sys-card.service" \
		"$top/board/jetson-agx-orin-devkit/linuxptp/ts2phc.conf" "$root/etc/ptp/board/"
fi
python3 "$here/harness.py" cpio "$root" "$work/initramfs.cpio"
log "initramfs: $(du -h "$work/initramfs.cpio" | cut -f1)"

# --- boot ------------------------------------------------------------------------
# panic=-1 plus -no-reboot: a panic ends QEMU at once; the guest leaves with
# `reboot -f`. The second serial port is the result channel. Emulation on a
# busy host can starve a vCPU for seconds: the RCU stall and soft-lockup
# detectors get 60 s instead of ~20 s, so that they report bugs, not load.
# no_timer_check: the boot's test of the IO-APIC timer through interrupt
# remapping counts timer ticks in a few ms of busy-waiting; a starved vCPU
# fails it and the kernel panics ("timer doesn't work through
# Interrupt-remapped IO-APIC"), which says nothing about the driver.
cmdline="console=ttyS0,115200 panic=-1 printk.devkmsg=on no_timer_check"
# arm64: the console is virt's PL011; the result channel a PCI 16550 (ttyS0).
[ "$arch" = arm64 ] && cmdline="console=ttyAMA0 radar.results=/dev/ttyS0 panic=-1 printk.devkmsg=on"
# An oops kills the task inside the kernel, usually holding the driver's
# locks: everything after it hangs until the suite's time limit. oops=panic
# ends the guest at once instead (the Oops is a kernel report and the suite
# has no @@end either way). KASAN, lockdep, DMA-API debug and atomic-sleep
# reports are not oopses and do not panic.
cmdline+=" oops=panic"
cmdline+=" rcupdate.rcu_cpu_stall_timeout=60 watchdog_thresh=30"
if [ "$arch" = arm64 ]; then
	# The card's DMA translated by the SMMU (not passed through), each unmap
	# invalidated at once: a DMA after an unmap faults.
	cmdline+=" iommu.passthrough=0 iommu.strict=1"
elif [ "$swiotlb" = 1 ]; then
	cmdline+=" swiotlb=force iommu=soft intel_iommu=off"
else
	cmdline+=" intel_iommu=on iommu=nopt"
fi
guest_suite=$suite
{ [ "$suite" != all ] || [ "$p2p" = nvidia ]; } && [ "$suite" != shell ] &&
	guest_suite=$(IFS=,; echo "${suites[*]}")
cmdline+=" radar.suite=$guest_suite radar.p2p=$p2p"
# q35 with the emulated IOMMU (DMA and interrupt remapping) first, then the
# card: every DMA of the card goes through the IOMMU's page tables. The
# firmware comes from Debian's QEMU packages (the +dfsg source has none).
qemu=("$qemu_bin" -accel tcg -machine q35 -smp 2 -m 2048 -nodefaults -no-user-config
	-L /usr/share/qemu -L /usr/share/seabios
	-display none -no-reboot -kernel "$kimage" -initrd "$work/initramfs.cpio")
[ "$swiotlb" = 1 ] || qemu+=(-device intel-iommu,intremap=on)
# results_port FILE: QEMU's arguments for the result channel into FILE (the
# array results_port): the second serial port, or on arm64 a PCI serial card.
results_port() {
	if [ "$arch" = arm64 ]; then
		# shellcheck disable=SC2054 # QEMU's option values have commas
		results_port=(-chardev "file,id=radar-results,path=${1//,/,,}"
			-device pci-serial,chardev=radar-results)
	else
		results_port=(-serial "file:$1")
	fi
}
# virt with an SMMUv3 (tests/qemu/arm64.sh); the SMMU's own trace of faults.
smmu_trace=''
if [ "$arch" = arm64 ]; then
	smmu_trace="$outdir/$name.smmu"
	rm -f "$smmu_trace"
	arm64_qemu "$qemu_bin" "$kimage" "$work/initramfs.cpio" "$smmu_trace"
fi
# The card writes its state at the machine's shutdown here (the shutdown
# suite's verdict: the driver's .shutdown must have stopped it).
card_log="$outdir/$name.card"
rm -f "$card_log"
card="radar-fpga-card,shutdown-log=${card_log//,/,,}"
# The card's clock counts from an oscillator 100 ppm fast, as a real one
# may be: what phc2sys has to trim (the ptp suite measures it).
card+=",clock-ppm=100"
[ -z "$adc_recording" ] || card+=",adc-recording=${adc_recording//,/,,}"
qemu+=(-device "$card")

if [ "$suite" = shell ]; then
	log "interactive guest: 'reboot -f' leaves, Ctrl-A X kills QEMU"
	results_port "$results_log"
	exec "${qemu[@]}" -append "$cmdline" -serial mon:stdio "${results_port[@]}"
fi

if [ -z "$host_timeout" ]; then
	# The guest limits every suite itself; the host adds boot and kmemleak time.
	host_timeout=240
	for s in "${suites[@]}"; do host_timeout=$((host_timeout + limit_of[$s] + 60)); done
fi

# A guest that hangs before its init script starts (no @@plan: the kernel's
# own boot under TCG, before any of our code runs) is booted once more;
# the hung attempt's console is kept beside the run's and the log says so.
# Any other hang, and a second boot hang, is the run's verdict.
boot_limit_s=${RADAR_QEMU_BOOT_LIMIT_S:-300}
rm -f "$console_log.boot-hang"
for attempt in 1 2; do
	t_boot=$SECONDS
	log "booting ($kernel, ${#suites[@]} suite(s), host limit ${host_timeout} s); console: $console_log"
	: >"$results_log"
	results_port "$results_log"
	timeout -k 10 "$host_timeout" "${qemu[@]}" -append "$cmdline" \
		-serial "file:$console_log" "${results_port[@]}" </dev/null &
	qemu_pid=$!
	trap 'kill "$qemu_pid" 2>/dev/null || true' EXIT

	# Follow the result channel while QEMU runs: progress, the boot time, and a
	# watchdog. The guest limits each program itself; if the guest makes no
	# progress at all (a kernel hang, a program stuck in the kernel) for the
	# running step's limit plus a margin, QEMU is stopped rather than waiting for
	# the whole run's limit.
	boot_s='' stalled=''
	step='boot' deadline=$((SECONDS + boot_limit_s))
	exec 3< <(tail -n +1 -F --pid="$qemu_pid" "$results_log" 2>/dev/null)
	while :; do
		if IFS= read -r -t 5 line <&3; then
			line=${line%$'\r'}
			case $line in
			@@plan*)
				boot_s=$((SECONDS - t_boot))
				log "guest up after ${boot_s} s: ${line#@@plan }"
				step='between suites' deadline=$((SECONDS + 300))
				;;
			@@begin*)
				log "$((SECONDS - t_boot)) s: ${line#@@}"
				step="suite ${line#@@begin }"
				deadline=$((SECONDS + ${limit_of[${line#@@begin }]:-600} + 120))
				;;
			@@end* | @@done* | @@kmemleak*)
				log "$((SECONDS - t_boot)) s: ${line#@@}"
				step="the step after ${line#@@}" deadline=$((SECONDS + 600))
				;;
			esac
		elif [ $? -le 128 ]; then
			break # end of file: QEMU is gone
		elif [ -z "$stalled" ] && [ "$SECONDS" -gt "$deadline" ]; then
			stalled="no progress from the guest for too long during $step (hang)"
			log "$stalled: stopping QEMU"
			kill "$qemu_pid" 2>/dev/null || true
		fi
	done
	exec 3<&-
	qemu_status=0
	wait "$qemu_pid" || qemu_status=$?
	trap - EXIT
	if [ "$attempt" = 1 ] && [ -n "$stalled" ] && [ -z "$boot_s" ]; then
		mv "$console_log" "$console_log.boot-hang"
		log "the guest hung before its init script (kernel boot; console kept in $console_log.boot-hang): booting once more"
		[ -z "$smmu_trace" ] || rm -f "$smmu_trace"
		rm -f "$card_log"
		continue
	fi
	break
done
duration=$((SECONDS - t_start))
qemu_s=$((SECONDS - t_boot))
log "QEMU exited with status $qemu_status after $qemu_s s"

set +e
python3 "$here/harness.py" report --kernel "$kernel" --arch "$arch" --p2p "$p2p" --suite "${suite//,/+}" \
	--suites "${suites[*]}" --console "$console_log" --results "$results_log" --card "$card_log" \
	--outdir "$outdir" --duration-s "$duration" --qemu-s "$qemu_s" ${boot_s:+--boot-s "$boot_s"} \
	--qemu-status "$qemu_status" ${stalled:+--stalled "$stalled"} \
	${smmu_trace:+--smmu-trace "$smmu_trace"} >"$outdir/$name.summary"
status=$?
set -e
if [ "$status" -ne 0 ]; then
	echo "--- last 40 lines of the kernel console ($console_log):"
	tail -n 40 "$console_log" | tr -d '\r'
	echo "---"
fi
if [ "$keep" -eq 1 ]; then
	log "kept $work; boot it by hand with:"
	results_port "$work/shell.results"
	printf '  %q' "${qemu[@]}" -append "${cmdline/radar.suite=$guest_suite/radar.suite=shell}" -serial mon:stdio "${results_port[@]}"
	echo
else
	rm -rf "$work"
fi
echo "$kernel kernel, suite $suite: results in $outdir/$kernel-*.json"
cat "$outdir/$name.summary"
if [ "$suite" = canary ]; then
	# The suites above were meant to fail; what counts is why.
	echo "--- canary: each detector must have fired in its suite"
	st=0
	python3 "$here/harness.py" canary --console "$console_log" --results "$results_log" || st=$?
	# And the suites: each fixed defect put back must fail its suite.
	echo "--- canary: each defect put back must fail its suite"
	# Without the stand-ins above: the real p2p-suite on the patched module.
	env -u RADAR_SUITE_BIN -u RADAR_KMOD_DIR \
		bash "$here/planted-bugs/regressions.sh" --kernel "$kernel" || st=1
	exit "$st"
fi
exit "$status"
