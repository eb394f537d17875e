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
#            waits for; RAUC's and hawkBit's state lies on the data partition;
#            radard's default configuration path is where the recipe
#            installs radard.toml;
#   service  radard.service against radard.toml (tests/board/service-permits.py):
#            the configuration enables ASTERIX, JSONL and the diagnostics link, the
#            unit permits each (data directory writable, the UART allowed
#            with its group, AF_INET and the destination of each network
#            output) and nothing else (no other address family, device or
#            writable path); the unit is bound to the card's device unit,
#            which the udev rule tags; the hardware watchdog is configured
#            and every board file named here is installed by a recipe;
#            the example site drop-in passes `systemd-analyze verify`.
# The udev rule is exercised in a QEMU guest: tests/board/qemu-board.sh.
#
#   bash tests/board-checks.sh [dtc|verify|security|cmdline|scripts|config|service]...
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
[ ${#want[@]} -gt 0 ] || want=(dtc verify security cmdline scripts config service)
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
	# radard.service with the example of a site's drop-in in place.
	mkdir -p "$root/etc/systemd/system/radard.service.d"
	cp "$board/systemd/radard-site.conf.example" "$root/etc/systemd/system/radard.service.d/site.conf"
	out=$(cd "$work" && SYSTEMD_LOG_LEVEL=notice systemd-analyze verify --root="$root" radard.service 2>&1)
	rc=$?
	if [ "$rc" -eq 0 ] && [ -z "$out" ]; then
		ok "systemd-analyze verify radard.service with radard-site.conf.example as a drop-in"
	else
		bad "systemd-analyze verify radard.service with the site drop-in (rc $rc): $out"
	fi
	rm -r "$root/etc/systemd/system/radard.service.d"
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

radard="$top/target/release/radard"
radard_built=
# Builds radard (release) once for the checks that run it.
build_radard() {
	[ -n "$radard_built" ] && return 0
	# shellcheck disable=SC1091
	[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
	(cd "$top" && nice cargo build --release --locked -p radard) >"$work/radard-build.log" 2>&1 ||
		{ bad "building radard failed: $(tail -3 "$work/radard-build.log")"; return 1; }
	radard_built=1
}

# checked_config: the path of radard.toml as this machine can check it.
# radard refuses an rt.cpu this machine lacks: where it has fewer cores than
# the Orin, the copy leaves rt.cpu out (check_config checks it against
# kernel-args).
checked_config() {
	local conf="$board/radard.toml" cpu
	cpu=$(sed -n 's/^cpu = \([0-9]*\)$/\1/p' "$conf")
	if [ "$(getconf _NPROCESSORS_CONF)" -le "${cpu:-0}" ]; then
		grep -v '^cpu = ' "$conf" >"$work/radard.toml"
		echo "$work/radard.toml"
	else
		echo "$conf"
	fi
}

check_config() {
	local conf="$board/radard.toml" use out cpu iso health
	build_radard || return
	cpu=$(sed -n 's/^cpu = \([0-9]*\)$/\1/p' "$conf")
	iso=$(tr ' ' '\n' <"$board/kernel-args" | sed -n 's/^isolcpus=\([a-z_]*,\)*//p')
	if [ -n "$cpu" ] && cpulist_expand "$iso" | grep -qx "$cpu"; then
		ok "radard.toml: the loop runs on isolated core $cpu (isolcpus $iso)"
	else
		bad "radard.toml: rt.cpu '$cpu' is not one of the isolated cores $iso"
	fi
	use=$(checked_config)
	[ "$use" = "$conf" ] ||
		echo "   (this machine has $(getconf _NPROCESSORS_CONF) CPUs: rt.cpu = $cpu left out of the checked copy)"
	if out=$(env -u RADARD_CONFIG "$radard" --config "$use" --print-config 2>&1); then
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
	# radard.service starts radard without --config: radard's default path
	# must be where the radard recipe installs the board's radard.toml.
	local exec installed default
	exec=$(sed -n 's/^ExecStart=//p' "$board/systemd/radard.service")
	installed=$(sed -n 's|.*install .*radard\.toml \${D}\${sysconfdir}/\(radard\)/$|/etc/\1/radard.toml|p' \
		"$top/yocto-layer/recipes-radar/radard/radard_0.1.0.bb")
	default=$(env -u RADARD_CONFIG "$radard" --print-config 2>&1 | sed -n 's|^#   \(/[^ :]*\).* (base file, by the default path).*|\1|p')
	if [ "$exec" = /usr/bin/radard ] && [ -n "$installed" ] && [ "$default" = "$installed" ]; then
		ok "radard.service runs '$exec': radard reads its default $default (and $default.d/), where the recipe installs radard.toml"
	else
		bad "radard.service runs '$exec'; radard's default configuration is '$default', the recipe installs radard.toml at '$installed'"
	fi
}

check_service() {
	local unit="$board/systemd/radard.service" out data dev devunit wd recipes f
	build_radard || return
	if ! out=$(env -u RADARD_CONFIG "$radard" --config "$(checked_config)" --print-config 2>&1); then
		bad "radard refuses radard.toml: $out"
		return
	fi
	data=$(sed -n 's/^Where=//p' "$board/systemd/data.mount")
	python3 "$here/board/service-permits.py" "$unit" "$board/tmpfiles/radard.conf" "$data" <<<"$out" ||
		failed=1
	mkdir -p "$work/tmpfiles-root/etc"
	echo 'radar:x:990:990::/nonexistent:/sbin/nologin' >"$work/tmpfiles-root/etc/passwd"
	echo 'radar:x:990:' >"$work/tmpfiles-root/etc/group"
	if out=$(systemd-tmpfiles --root="$work/tmpfiles-root" --create "$board/tmpfiles/radard.conf" 2>&1); then
		ok "systemd-tmpfiles --create applies tmpfiles/radard.conf ($(cd "$work/tmpfiles-root" && find . -mindepth 1 -path ./etc -prune -o -print | tr '\n' ' '))"
	else
		bad "systemd-tmpfiles refuses tmpfiles/radard.conf: $out"
	fi
	# The health verdict's directory is the unit's runtime directory.
	health=$(sed -n '/^\[health\]/,/^$/s/^state_file = "\(.*\)"$/\1/p' <<<"$(env -u RADARD_CONFIG "$radard" --config "$(checked_config)" --print-config)")
	[ "$(dirname "$health")" = "/run/$(sed -n 's/^RuntimeDirectory=//p' "$unit")" ] &&
		ok "the health verdict $health lies in the unit's RuntimeDirectory" ||
		bad "the health verdict $health is not in /run/<RuntimeDirectory> of radard.service"
	# The card: the udev rule tags its node for systemd, the unit binds to
	# the device unit of the node radard opens.
	dev=$(sed -n '/^\[source\]/,/^$/s/^device = \([0-9]*\)$/\1/p' "$board/radard.toml")
	devunit="$(systemd-escape --path "/dev/fpga-p2p${dev:-0}").device"
	grep -q 'KERNEL=="fpga-p2p\[0-9\]\*".*TAG+="systemd"' "$board/udev/60-fpga-p2p.rules" &&
		ok "udev rule: TAG+=\"systemd\" on fpga-p2p* (device units)" ||
		bad "udev rule does not tag fpga-p2p* for systemd: no device unit to bind to"
	if grep -qxF "BindsTo=$devunit" "$unit" && grep -qxF "After=$devunit" "$unit"; then
		ok "radard.service BindsTo= and After= $devunit"
	else
		bad "radard.service is not bound to (BindsTo= and After=) $devunit"
	fi
	grep -q 'systemd-udev-settle' "$unit" &&
		bad "radard.service still refers to the deprecated systemd-udev-settle.service" ||
		ok "no systemd-udev-settle ordering"
	grep -q '^SuccessExitStatus=' "$unit" &&
		bad "SuccessExitStatus= in radard.service: a stop exits 0 now, nothing else is a success" ||
		ok "no SuccessExitStatus= (SIGTERM is exit 0)"
	# The hardware watchdog, installed by radar-board.
	wd=$(sed -n 's/^RuntimeWatchdogSec=//p' "$board/systemd/system.conf.d/radar-watchdog.conf")
	if [ -n "$wd" ] && out=$(systemd-analyze timespan "$wd" 2>&1) &&
		! grep -q 'μs: 0$' <<<"$out"; then
		ok "system.conf.d/radar-watchdog.conf: RuntimeWatchdogSec=$wd"
	else
		bad "no positive RuntimeWatchdogSec= in system.conf.d/radar-watchdog.conf ('$wd')"
	fi
	# Every board file of the service is installed by a recipe.
	recipes=$(cat "$top"/yocto-layer/recipes-*/*/*.bb)
	for f in systemd/radard.service systemd/radard-site.conf.example systemd/system.conf.d/radar-watchdog.conf \
		tmpfiles/radard.conf udev/60-fpga-p2p.rules radard.toml; do
		if grep -q "file://\(.*/\)\?$(basename "$f")\b" <<<"$recipes"; then
			ok "a recipe installs $f"
		else
			bad "no recipe's SRC_URI names $f"
		fi
	done
	# Documentation= names a file the image has.
	local doc
	doc=$(sed -n 's|^Documentation=file:||p' "$unit")
	if [ "$doc" = /usr/share/doc/radard/image.md ] && [ -f "$top/docs/image.md" ] &&
		grep -q 'docs/image.md ${D}${docdir}/radard/\|docs/image.md .*${D}${docdir}/radard/' \
			"$top/yocto-layer/recipes-radar/radard/radard_0.1.0.bb" &&
		grep -qw radard-doc "$top/yocto-layer/recipes-core/images/radar-image.bb"; then
		ok "Documentation=file:$doc: docs/image.md, installed by radard into radard-doc, which the image installs"
	else
		bad "Documentation=file:$doc is not installed (radard recipe, radard-doc in radar-image)"
	fi
}
for c in "${want[@]}"; do
	case $c in
	dtc | verify | security | cmdline | scripts | config | service) "check_$c" ;;
	*) die "unknown check '$c' (dtc, verify, security, cmdline, scripts, config, service)" ;;
	esac
done
[ "$failed" -eq 0 ] && echo "board-checks: all passed" || echo "board-checks: FAILED"
exit "$failed"
