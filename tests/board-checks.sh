#!/usr/bin/env bash
# Static checks of board/jetson-agx-orin-devkit/ with the real tools
# (tests/run-all.sh step "board"):
#   dtc      the FPGA overlay compiles with `dtc -@`, warning-free, and
#            refers to the devkit's x16 root port and GPIO controller;
#   verify   `systemd-analyze verify` accepts every unit (against a scratch
#            root holding this machine's units and stand-ins for the
#            programs the units start, which verify requires to exist);
#   security `systemd-analyze security --offline=true` of radard.service:
#            exposure <= 3.0 (the figure is printed);
#   cmdline  the kernel arguments isolate the loop's cores consistently
#            with radard.service and keep CPU0 (PCIe MSIs on r36) out;
#   scripts  the shell scripts parse (`sh -n`, `bash -n`);
#   config   radard accepts the appliance's radard.toml; its loop core is an
#            isolated one and its health file is the one radar-mark-good
#            waits for; RAUC's and hawkBit's state lies on the data partition.
# The udev rule is exercised in a QEMU guest: tests/board/qemu-board.sh.
#
#   bash tests/board-checks.sh [dtc|verify|security|cmdline|scripts|config]...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
board="$top/board/jetson-agx-orin-devkit"
# shellcheck source=qemu/lib.sh
. "$here/qemu/lib.sh"
ensure_pkgs device-tree-compiler systemd

work="$top/target/board-checks"
rm -rf "$work"
mkdir -p "$work"
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(dtc verify security cmdline scripts config)
failed=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; failed=1; }

check_dtc() {
	local dtbo="$work/radar-fpga.dtbo" msgs
	if ! msgs=$(dtc -@ -I dts -O dtb -o "$dtbo" "$board/dts/radar-fpga-overlay.dts" 2>&1); then
		bad "dtc -@: $msgs"
		return
	fi
	[ -z "$msgs" ] || { bad "dtc -@ warnings: $msgs"; return; }
	ok "dtc -@ compiled the overlay ($(stat -c %s "$dtbo") bytes)"
	local fix
	fix=$(fdtget -p "$dtbo" /__fixups__ 2>/dev/null | tr '\n' ' ')
	if grep -qw pcie_c5_rp <<<"$fix" && grep -qw gpio <<<"$fix"; then
		ok "overlay targets pcie_c5_rp and gpio (fixups: $fix)"
	else
		bad "overlay fixups are '$fix', want pcie_c5_rp and gpio"
	fi
	local lanes
	lanes=$(fdtget "$dtbo" /fragment@0/__overlay__ num-lanes 2>/dev/null)
	[ "$lanes" = 8 ] && ok "the x16 slot's port runs 8 lanes" || bad "num-lanes is '$lanes', want 8"
}

check_verify() {
	local root="$work/root" u out rc
	mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd"
	cp -a /usr/lib/systemd/system "$root/usr/lib/systemd/"
	ln -sfn usr/lib "$root/lib"
	# Stand-ins for the programs the units start: verify checks they exist.
	for u in "$board"/systemd/*.service "$board"/systemd/*.mount; do
		sed -n 's/^Exec[A-Za-z]*=[-@:+!]*\([^ ]*\).*/\1/p' "$u"
	done | sort -u | while read -r exe; do
		mkdir -p "$root$(dirname "$exe")"
		printf '#!/bin/sh\n' >"$root$exe"
		chmod +x "$root$exe"
	done
	cp "$board"/systemd/*.service "$board"/systemd/*.mount "$root/etc/systemd/system/"
	for u in "$board"/systemd/*.service "$board"/systemd/*.mount; do
		u=$(basename "$u")
		out=$(cd "$work" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --root="$root" "$u" 2>&1)
		rc=$?
		# Any message is a finding (unknown keys only warn).
		if [ "$rc" -eq 0 ] && [ -z "$out" ]; then
			ok "systemd-analyze verify $u"
		else
			bad "systemd-analyze verify $u (rc $rc): $out"
		fi
	done
	grep -qx 'disable nv_update_verifier.service' "$board/systemd/90-radar.preset" &&
		ok "the preset disables nv_update_verifier.service" ||
		bad "the preset does not disable nv_update_verifier.service"
}

check_security() {
	local out level
	out=$(cd "$work" && systemd-analyze security --offline=true --no-pager "$board/systemd/radard.service" 2>&1)
	level=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for radard.service: \([0-9.]*\).*/\1/p')
	if [ -z "$level" ]; then
		bad "systemd-analyze security printed no exposure level: $(printf '%s\n' "$out" | tail -3)"
	elif awk -v l="$level" 'BEGIN { exit !(l <= 3.0) }'; then
		ok "systemd-analyze security --offline=true radard.service: exposure $level (limit 3.0)"
	else
		bad "radard.service exposure $level > 3.0"
	fi
}

# cpulist_expand "2-3,5": one CPU per line.
cpulist_expand() {
	tr ',' '\n' <<<"$1" | awk -F- 'NF == 1 { print $1 } NF == 2 { for (i = $1; i <= $2; i++) print i }'
}

check_cmdline() {
	local args iso nohz nocb irq aff
	args=$(grep -v '^#' "$board/kernel-args" | tr '\n' ' ')
	arg() { tr ' ' '\n' <<<"$args" | sed -n "s/^$1=//p"; }
	iso=$(arg isolcpus | sed 's/^\([a-z_]*,\)*//')
	nohz=$(arg nohz_full)
	nocb=$(arg rcu_nocbs)
	irq=$(arg irqaffinity)
	aff=$(sed -n 's/^CPUAffinity=//p' "$board/systemd/radard.service")
	[ -n "$iso" ] && [ "$iso" = "$nohz" ] && [ "$iso" = "$nocb" ] &&
		ok "isolcpus, nohz_full and rcu_nocbs name the same cores ($iso)" ||
		bad "isolcpus '$iso', nohz_full '$nohz', rcu_nocbs '$nocb' differ"
	if cpulist_expand "$iso" | grep -qx 0; then bad "CPU0 is isolated (it takes every PCIe MSI on r36)"; else ok "CPU0 stays a housekeeping core"; fi
	if comm -12 <(cpulist_expand "$iso" | sort) <(cpulist_expand "$irq" | sort) | grep -q .; then
		bad "irqaffinity '$irq' overlaps the isolated cores '$iso'"
	else
		ok "irqaffinity=$irq keeps interrupts off the isolated cores"
	fi
	if comm -23 <(cpulist_expand "$iso" | sort) <(cpulist_expand "$aff" | sort) | grep -q .; then
		bad "radard.service CPUAffinity=$aff does not cover the isolated cores $iso"
	else
		ok "radard.service CPUAffinity=$aff covers the isolated cores"
	fi
	grep -q 'SUBSYSTEM=="misc", KERNEL=="fpga-p2p\[0-9\]\*", GROUP="radar", MODE="0660"' \
		"$board/udev/60-fpga-p2p.rules" && ok "udev rule: fpga-p2p* group radar 0660" ||
		bad "udev rule does not set group radar, mode 0660 on fpga-p2p*"
}

check_scripts() {
	local s
	for s in "$board/rauc/rauc-backend-nvbootctrl" "$board/scripts/radar-mark-good"; do
		sh -n "$s" && ok "sh -n $(basename "$s")" || bad "sh -n $(basename "$s")"
	done
	bash -n "$board/rauc/make-dev-keys.sh" && ok "bash -n make-dev-keys.sh" || bad "bash -n make-dev-keys.sh"
	if git -C "$top" ls-files | grep -qE '\.(key|pem)$|key\.pem'; then
		bad "a key or certificate is committed: $(git -C "$top" ls-files | grep -E '\.(key|pem)$')"
	else
		ok "no key or certificate in the repository (development keys are made at test time)"
	fi
}

check_config() {
	local conf="$board/radard.toml" use radard out cpu iso health
	# shellcheck disable=SC1091
	[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
	(cd "$top" && nice cargo build --release --locked -p radard) >"$work/radard-build.log" 2>&1 ||
		{ bad "building radard failed: $(tail -3 "$work/radard-build.log")"; return; }
	radard="$top/target/release/radard"
	cpu=$(sed -n 's/^cpu = \([0-9]*\)$/\1/p' "$conf")
	iso=$(tr ' ' '\n' <"$board/kernel-args" | sed -n 's/^isolcpus=\([a-z_]*,\)*//p')
	if [ -n "$cpu" ] && cpulist_expand "$iso" | grep -qx "$cpu"; then
		ok "radard.toml: the loop runs on isolated core $cpu (isolcpus $iso)"
	else
		bad "radard.toml: rt.cpu '$cpu' is not one of the isolated cores $iso"
	fi
	# radard refuses an rt.cpu this machine lacks: where it has fewer
	# cores than the Orin, the copy it checks leaves rt.cpu out (checked
	# against kernel-args above).
	use=$conf
	if [ "$(getconf _NPROCESSORS_CONF)" -le "${cpu:-0}" ]; then
		use="$work/radard.toml"
		grep -v '^cpu = ' "$conf" >"$use"
		echo "   (this machine has $(getconf _NPROCESSORS_CONF) CPUs: rt.cpu = $cpu left out of the checked copy)"
	fi
	if out=$("$radard" --config "$use" --print-config 2>&1); then
		ok "radard accepts board/.../radard.toml (source $(sed -n '/^\[source\]/,/^$/s/^kind = //p' <<<"$out"), backend $(sed -n '/^\[backend\]/,/^$/s/^kind = //p' <<<"$out"))"
	else
		bad "radard refuses radard.toml: $out"
		return
	fi
	health=$(sed -n 's/^Environment=RADAR_HEALTH_FILE=//p' "$board/systemd/radar-mark-good.service")
	grep -qx "state_file = \"$health\"" <<<"$out" &&
		ok "radard's health.state_file is radar-mark-good's RADAR_HEALTH_FILE ($health)" ||
		bad "radard's health.state_file is not radar-mark-good's RADAR_HEALTH_FILE ($health)"
	# What must outlive a rootfs update lies on the data partition.
	local data dir
	data=$(sed -n 's/^Where=//p' "$board/systemd/data.mount")
	for dir in "$(sed -n 's/^data-directory=//p' "$board/rauc/system.conf")" \
		"$(sed -n 's/^bundle_download_location *= *//p' "$board/rauc/hawkbit-updater.conf.template")"; do
		case $dir in
		"$data"/*) ok "$dir lies on the data partition ($data, data.mount)" ;;
		*) bad "'$dir' is not on the data partition '$data' (data.mount): lost at every update" ;;
		esac
	done
	grep -q -- "--config /etc/radard/radard.toml" "$board/systemd/radard.service" &&
		ok "radard.service reads /etc/radard/radard.toml" ||
		bad "radard.service does not read /etc/radard/radard.toml"
}
for c in "${want[@]}"; do
	case $c in
	dtc | verify | security | cmdline | scripts | config) "check_$c" ;;
	*) die "unknown check '$c' (dtc, verify, security, cmdline, scripts, config)" ;;
	esac
done
[ "$failed" -eq 0 ] && echo "board-checks: all passed" || echo "board-checks: FAILED"
exit "$failed"
