#!/usr/bin/env bash
# OTA with the real `rauc` (Debian 12's rauc 1.8) on a private D-Bus bus:
# file-backed A/B slots, the board's own system.conf (paths pointed at the
# test's files), its nvbootctrl backend, a test double of nvbootctrl and the
# UEFI variables (tests/ota/nvbootctrl) that keeps state in files, a real
# radard run for the health verdict and the board's radar-mark-good script.
#
#   bash tests/ota/run.sh        (tests/run-all.sh step "ota")
#
# What it shows:
#   1. a signed bundle installs into the inactive slot and switches to it;
#      after a simulated reboot, radard's good health verdict of this boot
#      marks it good (UEFI's retry counter restored); a verdict of another
#      boot does not;
#   2. an update whose radard never reaches the verdict is rolled back by
#      the retry counter after three unconfirmed boots;
#   3. unsigned, wrong-key, corrupted, truncated and wrong-compatible
#      bundles are refused and leave both slots, the UEFI variables, the
#      double's state and RAUC's status file byte for byte as they were;
#   4. the image's bundle format, verity, builds and verifies (`rauc info`).
#      Installs use plain bundles: this machine has no device-mapper
#      (/dev/mapper/control), which RAUC needs to mount a verity bundle.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
board="$top/board/jetson-agx-orin-devkit"
# shellcheck source=../qemu/lib.sh
. "$top/tests/qemu/lib.sh"

if [ -z "${RADAR_OTA_IN_BUS:-}" ]; then
	ensure_pkgs rauc dbus dbus-daemon squashfs-tools openssl python3 coreutils
	# shellcheck disable=SC1091
	[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
	log "building radard (release)"
	(cd "$top" && nice cargo build --release --locked -p radard) >&2 ||
		die "building radard failed"
	# The whole test on one private bus: rauc's service and client meet on
	# it as on the system bus.
	exec dbus-run-session -- env RADAR_OTA_IN_BUS=1 bash "$0" "$@"
fi
export DBUS_SYSTEM_BUS_ADDRESS=$DBUS_SESSION_BUS_ADDRESS

work="$top/target/ota"
rm -rf "$work"
mkdir -p "$work"/{efivars,state,data,mnt,run,bundles}
radard="$top/target/release/radard"
[ -x "$radard" ] || die "no $radard"

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok: $*"; }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
# check DESCRIPTION COMMAND...: the command's success is the check.
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}

# --- the doubles and the backend, as the unit would find them -------------------
export NVBOOTCTRL_STATE_DIR="$work/state"
export RADAR_EFIVARS_DIR="$work/efivars"
export RADAR_NVBOOTCTRL="$here/nvbootctrl"
nvb() { "$RADAR_NVBOOTCTRL" "$@"; }
backend="$board/rauc/rauc-backend-nvbootctrl"
slot_name() { case $1 in 0) echo A ;; 1) echo B ;; esac; }
current() { slot_name "$(nvb -t rootfs get-current-slot)"; }
active() { nvb -t rootfs dump-slots-info | sed -n 's/^Active rootfs slot: //p'; }
retry_of() { nvb -t rootfs dump-slots-info | awk -v s="$1" -F'[:,]' '$1 == "slot" && $2 + 0 == s { gsub(/ /, "", $4); print $4 }'; }
status_of() { nvb -t rootfs dump-slots-info | awk -v s="$1" -F'[:,]' '$1 == "slot" && $2 + 0 == s { gsub(/ /, "", $6); print $6 }'; }

# --- keys: development-only, made now, never stored -------------------------------
bash "$board/rauc/make-dev-keys.sh" "$work/keys" >/dev/null
bash "$board/rauc/make-dev-keys.sh" "$work/other-keys" "another vendor" >/dev/null

# --- slots and images -----------------------------------------------------------
slot_bytes=$((8 << 20))
# make_image FILE VERSION: a rootfs image that says which version it is.
make_image() {
	{
		printf 'radar rootfs %s\n' "$2"
		head -c $((3 << 20)) /dev/urandom
	} >"$1"
}
make_image "$work/rootfs-v1.img" 1.0.0
head -c "$slot_bytes" /dev/zero >"$work/slotA.img"
dd if="$work/rootfs-v1.img" of="$work/slotA.img" conv=notrunc status=none
head -c "$slot_bytes" /dev/zero >"$work/slotB.img"

# The board's system.conf with its paths pointed at this test's files; every
# substitution must hit, so a changed system.conf cannot silently go untested.
conf="$work/system.conf"
cp "$board/rauc/system.conf" "$conf"
subst() {
	grep -qE "$1" "$conf" || die "system.conf: no line matching '$1' to adapt"
	sed -i -E "s#$1#$2#" "$conf"
}
subst '^bundle-formats=.*' 'bundle-formats=plain verity'
subst '^data-directory=.*' "data-directory=$work/data"
subst '^mountprefix=.*' "mountprefix=$work/mnt"
subst '^path=.*' "path=$work/keys/ca.cert.pem"
subst '^bootloader-custom-backend=.*' "bootloader-custom-backend=$backend"
subst '^device=/dev/disk/by-partlabel/APP$' "device=$work/slotA.img"
subst '^device=/dev/disk/by-partlabel/APP_b$' "device=$work/slotB.img"
subst '^type=ext4$' 'type=raw'
grep -q '^compatible=radar-jetson-agx-orin-devkit$' "$conf" || die "system.conf: compatible changed"
grep -q '^bootloader=custom$' "$conf" || die "system.conf: bootloader is not custom"

# --- bundles --------------------------------------------------------------------
# bundle OUT VERSION FORMAT COMPATIBLE KEYDIR IMAGE
bundle() {
	local dir="$work/bundles/$(basename "$1").d"
	mkdir -p "$dir"
	cp "$6" "$dir/rootfs.img"
	cat >"$dir/manifest.raucm" <<-EOF
		[update]
		compatible=$4
		version=$2
		description=radar appliance $2 (OTA test)

		[bundle]
		format=$3

		[image.rootfs]
		filename=rootfs.img
	EOF
	rauc bundle --cert="$5/signing.cert.pem" --key="$5/signing.key.pem" \
		"$dir" "$1" >"$dir.log" 2>&1 || { cat "$dir.log" >&2; die "rauc bundle $1 failed"; }
}
compat=radar-jetson-agx-orin-devkit
make_image "$work/rootfs-v2.img" 2.0.0
make_image "$work/rootfs-v3.img" 3.0.0
B="$work/bundles"
bundle "$B/v2.raucb" 2.0.0 plain "$compat" "$work/keys" "$work/rootfs-v2.img"
bundle "$B/v3.raucb" 3.0.0 plain "$compat" "$work/keys" "$work/rootfs-v3.img"
bundle "$B/v2-verity.raucb" 2.0.0 verity "$compat" "$work/keys" "$work/rootfs-v2.img"
bundle "$B/wrong-key.raucb" 3.0.0 plain "$compat" "$work/other-keys" "$work/rootfs-v3.img"
bundle "$B/wrong-compatible.raucb" 3.0.0 plain "radar-some-other-board" "$work/keys" "$work/rootfs-v3.img"
# A plain bundle is squashfs | CMS signature | 8-byte big-endian signature
# size: unsigned = the squashfs alone.
python3 - "$B/v3.raucb" "$B/unsigned.raucb" "$B/corrupted.raucb" "$B/truncated.raucb" <<'EOF'
import struct, sys
src, unsigned, corrupted, truncated = sys.argv[1:]
data = open(src, "rb").read()
sig = struct.unpack(">Q", data[-8:])[0]
open(unsigned, "wb").write(data[: len(data) - 8 - sig])
c = bytearray(data)
c[len(c) // 3] ^= 0x55          # a byte of the image inside the squashfs
open(corrupted, "wb").write(bytes(c))
open(truncated, "wb").write(data[: len(data) // 2])
EOF

# --- rauc's service: one per simulated boot -----------------------------------------
svc_pid=
start_service() {
	rauc service --conf="$conf" --override-boot-slot="$1" >>"$work/service.log" 2>&1 &
	svc_pid=$!
	local i
	for i in $(seq 1 100); do
		# (a client that asks while the service is still starting may
		# abort with SIGTRAP, glib's g_error: quietly, in its own shell)
		sh -c 'rauc status' >/dev/null 2>&1 && return 0
		kill -0 "$svc_pid" 2>/dev/null || { tail -20 "$work/service.log" >&2; die "rauc service exited"; }
		sleep 0.1
	done
	die "rauc service did not answer within 10 s"
}
stop_service() {
	[ -n "$svc_pid" ] || return 0
	kill "$svc_pid" 2>/dev/null || true
	wait "$svc_pid" 2>/dev/null || true
	svc_pid=
}
trap stop_service EXIT

# A simulated reboot: the service stops, /run empties, UEFI picks a slot
# (the double's retry-counter model), RAUC starts on the slot that booted
# (rauc 1.8 has no get-current: it is told, as rauc.slot= would).
reboot_unit() {
	stop_service
	rm -rf "$work/run"
	mkdir -p "$work/run"
	nvb --simulate-boot
	start_service "$(current)"
}

sha() { sha256sum "$1" | cut -d' ' -f1; }
# The first bytes of a slot file, as long as IMAGE: what was written there.
slot_holds() { cmp -s -n "$(stat -c %s "$2")" "$1" "$2"; }

# --- radard and its health verdict ----------------------------------------------------
real_boot_id=$(cat /proc/sys/kernel/random/boot_id)
# The key of radard's [health] section whose default is the verdict file
# (found, not assumed, so a renamed key is followed, a missing one reported).
health_key=$("$radard" --print-config | awk '
	/^\[/ { section = $0; next }
	section == "[health]" && $3 == "\"/run/radard/health\"" { print $1 }')
[ -n "$health_key" ] ||
	die "radard --print-config shows no [health] key with default \"/run/radard/health\": radard cannot give the health verdict this test needs"
# write_radard_config FILE GOOD_FRAMES
write_radard_config() {
	cat >"$1" <<-EOF
		[source]
		kind = "sim"
		# paced, 64 ms frames: an unpaced simulator outruns the chain, and
		# a frame dropped at the source or late is not a good frame (a
		# loaded CI machine must still keep the pace)
		chunk_period_us = 4000
		[backend]
		kind = "cpu"
		[output]
		print_every = 0
		# radard prints its verdict with the next status line
		status_interval_ms = 200
		[health]
		good_frames = $2
		$health_key = "$work/run/radard/health"
	EOF
}
write_radard_config "$work/radard-good.toml" 8
write_radard_config "$work/radard-never.toml" 100000
# run_radard CONFIG FRAMES
run_radard() {
	mkdir -p "$work/run/radard"
	"$radard" --config "$1" --frames "$2" --no-rt >"$work/radard.log" 2>&1 || true
}
# mark_good TIMEOUT_S: the board's script, as the unit runs it.
mark_good() {
	rm -f "$work/reboot-requested"
	RADAR_HEALTH_FILE="$work/run/radard/health" RADAR_MARK_GOOD_TIMEOUT_S="$1" \
		RADAR_RAUC_BACKEND="$backend" RADAR_REBOOT_CMD="touch $work/reboot-requested" \
		RADAR_MARK_GOOD_POLL_S=0.2 \
		sh "$board/scripts/radar-mark-good" >"$work/mark-good.log" 2>&1
}

echo "== 1. update, reboot, health verdict, mark good"
start_service "$(current)"
slotA_before=$(sha "$work/slotA.img")
out=$(rauc install "$B/v2.raucb" 2>&1) && rc=0 || rc=$?
check "signed bundle v2 installs (rc $rc)" test "$rc" -eq 0
check "v2 is written into the inactive slot B" slot_holds "$work/slotB.img" "$work/rootfs-v2.img"
check "the booted slot A is untouched" test "$(sha "$work/slotA.img")" = "$slotA_before"
check "slot B is now the active (next) boot slot" test "$(active)" = B
check "still running from A until the reboot" test "$(current)" = A
check "RootfsStatusSlotB is normal after set-primary" test "$(status_of 1)" = normal
check "backend get-primary says B" test "$("$backend" get-primary)" = B

reboot_unit
check "after the reboot UEFI boots B" test "$(current)" = B
check "B's retry counter is spent by one (unconfirmed boot: 2)" test "$(retry_of 1)" = 2
check "rauc sees the booted slot B" sh -c "rauc status --output-format=shell | grep -qx \"RAUC_SYSTEM_BOOTED_BOOTNAME='B'\""

# A verdict left by another boot must not count.
mkdir -p "$work/run/radard"
printf 'verdict=good\ngood_frames=8\nsequence=8\nunix_time=%s\nboot_id=%s\n' \
	"$(date +%s)" 00000000-0000-0000-0000-000000000000 >"$work/run/radard/health"
mark_good 1 && rc=0 || rc=$?
check "a verdict of another boot is refused (rc $rc)" test "$rc" -eq 1
check "... and says why" grep -q "is not this boot's" "$work/mark-good.log"
check "... and B stays unconfirmed (retry 2)" test "$(retry_of 1)" = 2
rm -f "$work/run/radard/health"

# As on the unit: radard and radar-mark-good start together; the script
# waits until radard's verdict appears.
run_radard "$work/radard-good.toml" 60 &
radard_job=$!
mark_good 10 && rc=0 || rc=$?
wait "$radard_job"
sed 's/^/   /' "$work/mark-good.log"
check "radard wrote a health verdict" test -f "$work/run/radard/health"
if [ -f "$work/run/radard/health" ]; then
	echo "   verdict file: $(tr '\n' ' ' <"$work/run/radard/health")"
	check "the verdict is good" grep -qx 'verdict=good' "$work/run/radard/health"
	check "the verdict carries this boot's id" grep -qx "boot_id=$real_boot_id" "$work/run/radard/health"
	check "radard logged its verdict" grep -q 'health: verdict good' "$work/radard.log"
else
	tail -20 "$work/radard.log"
fi
check "radar-mark-good marks B good (rc $rc)" test "$rc" -eq 0
check "B's retry counter is restored (3)" test "$(retry_of 1)" = 3
check "B's status is normal" test "$(status_of 1)" = normal
check "rauc reports B's boot status good" sh -c "rauc status --output-format=shell | grep -q \"^RAUC_SLOT_BOOT_STATUS_.*='good'\""

echo "== 2. an update that never becomes healthy is rolled back"
out=$(rauc install "$B/v3.raucb" 2>&1) && rc=0 || rc=$?
check "bundle v3 installs (rc $rc) into the inactive slot A" test "$rc" -eq 0
check "v3 is in slot A" slot_holds "$work/slotA.img" "$work/rootfs-v3.img"
check "A is the next boot" test "$(active)" = A
boots_of_A=0
for attempt in 1 2 3 4 5; do
	reboot_unit
	[ "$(current)" = A ] || break
	boots_of_A=$((boots_of_A + 1))
	run_radard "$work/radard-never.toml" 20
	mark_good 2 && rc=0 || rc=$?
	check "boot $attempt of A: no verdict, not marked (rc $rc), reboot requested" \
		test "$rc" -eq 1 -a -f "$work/reboot-requested"
done
check "A was tried exactly 3 times (UEFI's retry counter), tried $boots_of_A" test "$boots_of_A" -eq 3
check "the unit is back on B" test "$(current)" = B
check "B still holds v2" slot_holds "$work/slotB.img" "$work/rootfs-v2.img"
check "UEFI marked A unbootable" test "$(status_of 0)" = unbootable
check "the backend reports A bad" test "$("$backend" get-state A)" = bad
check "rauc reports the booted slot B" sh -c "rauc status --output-format=shell | grep -qx \"RAUC_SYSTEM_BOOTED_BOOTNAME='B'\""
run_radard "$work/radard-good.toml" 40
mark_good 10 && rc=0 || rc=$?
check "back on B, radard healthy: B is confirmed again (rc $rc, retry $(retry_of 1))" test "$rc" -eq 0 -a "$(retry_of 1)" = 3

echo "== 3. bad bundles are refused and change nothing"
# snapshot: both slots, the UEFI variables, the double's state, RAUC's status.
snapshot() {
	{
		sha "$work/slotA.img"
		sha "$work/slotB.img"
		find "$work/efivars" "$work/state" "$work/data" -type f | sort | xargs -r sha256sum
		nvb -t rootfs dump-slots-info
	} | sha256sum | cut -d' ' -f1
}
# refuse NAME REASON_REGEX
refuse() {
	local before after out rc
	before=$(snapshot)
	out=$(rauc install "$B/$1.raucb" 2>&1) && rc=0 || rc=$?
	after=$(snapshot)
	echo "   $1: rc $rc: $(printf '%s\n' "$out" | grep -m1 '^LastError:')"
	check "$1 bundle is refused" test "$rc" -ne 0
	check "$1: the refusal names the reason (/$2/)" sh -c 'printf "%s\n" "$1" | grep -qiE "$2"' _ "$out" "$2"
	check "$1: slots, UEFI variables, boot state and RAUC status unchanged" test "$before" = "$after"
}
refuse unsigned 'LastError: .*signature size'
refuse wrong-key 'LastError: signature verification failed'
refuse corrupted 'LastError: signature verification failed'
refuse truncated 'LastError: Invalid bundle format'
refuse wrong-compatible 'LastError: .*Compatible mismatch'

echo "== 4. the image's verity bundle"
info=$(rauc info --keyring="$work/keys/ca.cert.pem" "$B/v2-verity.raucb" 2>&1) && rc=0 || rc=$?
check "rauc info verifies the verity bundle's signature (rc $rc)" test "$rc" -eq 0
check "its format is verity" sh -c 'printf "%s\n" "$1" | grep -qE "^Bundle Format:[[:space:]]+verity"' _ "$info"
check "its compatible is the board's" sh -c 'printf "%s\n" "$1" | grep -q "^Compatible:.*radar-jetson-agx-orin-devkit"' _ "$info"
info=$(rauc info --keyring="$work/other-keys/ca.cert.pem" "$B/v2-verity.raucb" 2>&1) && rc=0 || rc=$?
check "rauc info refuses it against another CA (rc $rc)" test "$rc" -ne 0
if [ -e /dev/mapper/control ]; then
	out=$(rauc install "$B/v2-verity.raucb" 2>&1) && rc=0 || rc=$?
	check "the verity bundle installs (device-mapper present) (rc $rc)" test "$rc" -eq 0
else
	echo "   note: no /dev/mapper/control here: verity installs need device-mapper; installs above used plain bundles"
fi

stop_service
echo "ota: $passed passed, $failed failed (rauc $(rauc --version | awk '{print $2}'), logs in $work)"
[ "$failed" -eq 0 ]
