#!/usr/bin/env bash
# The Yocto layer's checks (run-all step `yocto`), offline:
#   1. the crates list (radar-crates.inc) matches Cargo.toml/Cargo.lock;
#   2. oelint-adv --release scarthgap over every recipe and append: 0 errors;
#   3. the kas file: kas's schema, and `kas dump` with the pinned layer
#      snapshots as local repos;
#   4. bitbake -p, -e and -g against the pinned scarthgap snapshots
#      (../shared/yocto/parse.sh): no error, no warning from our layer; the
#      module's KBUILD_EXTRA_SYMBOLS names nvidia-kernel-oot's Module.symvers;
#      the Rust toolchain recipes resolve to RADAR_RUST_VERSION; the image's
#      task graph resolves;
#   5. the recipes install exactly the board's install manifest
#      (board/jetson-agx-orin-devkit/install-manifest), which the unit test
#      (tests/unit/) installs into its guest.
#
#   bash tests/yocto-checks.sh [crates|lint|kas|parse|manifest]...   (default: all)
# Environment: YOCTO_SNAPSHOT_DIR (default yocto/ in the test inputs, found
# by tests/shared-dir.sh), RADAR_YOCTO_WORK (default /var/tmp/radar-yocto: the source copy).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
layer=$top/yocto-layer
# shellcheck source=tests/shared-dir.sh
. "$top/tests/shared-dir.sh"
snapdir=${YOCTO_SNAPSHOT_DIR:-$(shared_dir "$top")/yocto}
work=${RADAR_YOCTO_WORK:-/var/tmp/radar-yocto}
venv=$top/target/yocto-venv
KAS_VERSION=5.5
OELINT_VERSION=9.11.2
RECIPES=(fpga-p2p radard radarctl radar-board radar-fpga-overlay radar-image radar-bundle
	rust-bin-cross-aarch64 cargo-bin-cross-aarch64)

parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(crates lint kas parse manifest)
fail() { echo "yocto-checks: FAIL: $*" >&2; exit 1; }

python_tools() {
	if ! "$venv/bin/kas" --version 2>/dev/null | grep -q "^kas $KAS_VERSION " ||
		! "$venv/bin/oelint-adv" --version 2>/dev/null | grep -qx "oelint-adv $OELINT_VERSION"; then
		echo "yocto-checks: installing kas $KAS_VERSION and oelint-adv $OELINT_VERSION (PyPI) into $venv"
		python3 -m venv "$venv"
		"$venv/bin/pip" install -q "kas==$KAS_VERSION" "oelint-adv==$OELINT_VERSION"
	fi
}

check_crates() {
	echo "--- crates list"
	python3 "$layer/scripts/gen-crates.py" --check
}

check_lint() {
	echo "--- oelint-adv --release scarthgap"
	python_tools
	mapfile -t files < <(cd "$layer" && find recipes-* -name '*.bb' -o -name '*.bbappend' | sort)
	local suppress=()
	while read -r rule _; do
		[ -n "$rule" ] && suppress+=(--suppress "$rule")
	done < <(sed -e 's/#.*//' "$layer/oelint-suppressions.txt")
	local out
	out=$(cd "$layer" && "$venv/bin/oelint-adv" --quiet --nobackup --release scarthgap \
		"${suppress[@]}" "${files[@]}" 2>&1) || true
	[ -z "$out" ] || printf '%s\n' "$out"
	local errors warnings
	errors=$(grep -c ':error:' <<<"$out" || true)
	warnings=$(grep -c ':warning:' <<<"$out" || true)
	echo "oelint-adv: ${#files[@]} files, $errors errors, $warnings warnings, $((${#suppress[@]} / 2)) rules suppressed (yocto-layer/oelint-suppressions.txt)"
	[ "$errors" -eq 0 ] || fail "oelint-adv reports $errors errors"
}

check_kas() {
	echo "--- kas"
	python_tools
	local kasfile=$layer/kas/radar-orin.yml
	# The real file against kas's schema (its URLs cannot be fetched here).
	"$venv/bin/python" - "$kasfile" <<-'EOF'
		import sys, yaml, jsonschema
		from kas.configschema import CONFIGSCHEMA
		cfg = yaml.safe_load(open(sys.argv[1]))
		jsonschema.validate(cfg, CONFIGSCHEMA)
		for name, repo in cfg["repos"].items():
		    if "url" in repo and not (len(repo.get("commit", "")) == 40):
		        sys.exit(f"{sys.argv[1]}: repo {name} is not pinned to a full commit")
		print(f"kas schema: {sys.argv[1]} valid, {len(cfg['repos'])} repos, every URL pinned by commit")
	EOF
	# kas dump with each pinned repo replaced by its unpacked snapshot.
	local snaproot
	snaproot=$(unpacked_snapshots)
	local offline=$top/target/yocto-kas-offline.yml
	"$venv/bin/python" - "$kasfile" "$snaproot" "$offline" <<-'EOF'
		import sys, yaml
		src, snaproot, out = sys.argv[1:]
		cfg = yaml.safe_load(open(src))
		for name, repo in cfg["repos"].items():
		    if "url" in repo:
		        for k in ("url", "branch", "commit"):
		            repo.pop(k, None)
		        repo["path"] = f"{snaproot}/{name}"
		yaml.safe_dump(cfg, open(out, "w"), sort_keys=False)
	EOF
	# the radar repo (no url) is the checkout that holds the file (target/ is in it)
	local dump
	mkdir -p "$top/target/kas-work"
	dump=$(cd "$top" && KAS_WORK_DIR=$top/target/kas-work "$venv/bin/kas" dump "$offline") ||
		fail "kas dump failed"
	grep -q '^machine: jetson-agx-orin-devkit' <<<"$dump" || fail "kas dump: no machine"
	echo "kas dump: machine $(sed -n 's/^machine: //p' <<<"$dump"), distro $(sed -n 's/^distro: //p' <<<"$dump"), target $(sed -n '/^target:/{n;s/^ *- //p}' <<<"$dump")"
	# kas checkout writes bblayers.conf and local.conf; every layer it lists
	# must be a layer (kas itself does not look).
	rm -rf "$top/target/kas-work/build"
	(cd "$top" && KAS_WORK_DIR=$top/target/kas-work "$venv/bin/kas" checkout "$offline") || fail "kas checkout failed"
	local conf=$top/target/kas-work/build/conf n=0 l
	for l in $(sed -n 's/^ *\(${TOPDIR}[^ "]*\).*/\1/p' "$conf/bblayers.conf"); do
		l=${l//\$\{TOPDIR\}/$top/target/kas-work/build}
		[ -f "$l/conf/layer.conf" ] || fail "kas: $l (bblayers.conf) is not a layer"
		n=$((n + 1))
	done
	[ "$n" -ge 6 ] || fail "kas: only $n layers in bblayers.conf"
	grep -q '^DISTRO ??\{0,1\}= "radar"' "$conf/local.conf" || fail "kas: local.conf sets no DISTRO radar"
	echo "kas checkout: $n layers in bblayers.conf, each with conf/layer.conf"
}

# the snapshot set as parse.sh unpacks it (shared with parse.sh's cache)
unpacked_snapshots() {
	[ -x "$snapdir/parse.sh" ] || fail "no Yocto snapshots in $snapdir (set YOCTO_SNAPSHOT_DIR)"
	local d=$work/kas-snapshots
	if [ ! -f "$d/.complete" ]; then
		rm -rf "$d" && mkdir -p "$d"
		for t in "$snapdir"/*.tar.xz; do tar -C "$d" -xJf "$t"; done
		touch "$d/.complete"
	fi
	echo "$d"
}

check_parse() {
	echo "--- bitbake (parse.sh)"
	[ -x "$snapdir/parse.sh" ] || fail "no Yocto snapshots in $snapdir (set YOCTO_SNAPSHOT_DIR)"
	# bitbake runs as an unprivileged user, who may not read this checkout
	# (e.g. under /root): parse a copy of what the recipes use.
	local src=$work/src build log=$work/parse.log
	mkdir -p "$src"
	chmod 755 "$work"
	(cd "$top" && git ls-files -co --exclude-standard -z) |
		rsync -a --delete --delete-excluded --from0 --files-from=- "$top/" "$src/"
	chmod -R a+rX "$src"
	local rc=0
	YOCTO_DISTRO=radar YOCTO_SKIP_LAYERS=meta-lts-mixins \
		bash "$snapdir/parse.sh" -g "$src/yocto-layer" "${RECIPES[@]}" 2>&1 | tee "$log" || rc=$?
	[ "$rc" -eq 0 ] || fail "parse.sh exit $rc"
	build=$(sed -n 's/^\[parse.sh [0-9:]*\] build dir \(.*\) (user .*/\1/p' "$log")
	[ -d "$build/logs" ] || fail "parse.sh named no build dir"

	# warnings that name our layer or recipes
	local ours
	ours=$(grep -hE '(^|\.\.\.)WARNING: ' "$build"/logs/*.log |
		grep -E "yocto-layer|fpga-p2p|radard|radarctl|radar-(board|fpga-overlay|image|bundle)" || true)
	[ -z "$ours" ] || { printf '%s\n' "$ours"; fail "bitbake warnings from our layer"; }
	echo "bitbake: no warnings from our layer"

	local symbols
	symbols=$(sed -n 's/^KBUILD_EXTRA_SYMBOLS="\(.*\)"$/\1/p' "$build/logs/env-fpga-p2p.txt")
	echo "fpga-p2p KBUILD_EXTRA_SYMBOLS=$symbols"
	[[ $symbols == */kernel-module-nvidia-kernel-oot/Module.symvers ]] ||
		fail "fpga-p2p: KBUILD_EXTRA_SYMBOLS does not name nvidia-kernel-oot's Module.symvers"
	local want pv r
	want=$(sed -n 's/^RADAR_RUST_VERSION="\(.*\)"$/\1/p' "$build/logs/env-radard.txt")
	[ -n "$want" ] || fail "radard: RADAR_RUST_VERSION unset"
	for r in rust-bin-cross-aarch64 cargo-bin-cross-aarch64; do
		pv=$(sed -n 's/^PV="\(.*\)"$/\1/p' "$build/logs/env-$r.txt")
		echo "$r: PV=$pv (PREFERRED_VERSION $(sed -n "s/^PREFERRED_VERSION_$r=//p" "$build/logs/env-radard.txt"))"
		[ "$pv" = "$want" ] || fail "$r resolves to $pv, not $want"
	done
	grep -q "^DEPENDS=.*cargo-bin-cross-aarch64" "$build/logs/env-radard.txt" || fail "radard: no cargo-bin-cross-aarch64 in DEPENDS"
	local flags
	flags=$(sed -n 's/^CARGO_BUILD_FLAGS="\(.*\)"$/\1/p' "$build/logs/env-radard.txt" | tr -s ' ')
	echo "radard cargo build flags: $flags"
	[[ $flags == *--frozen* ]] || fail "radard: cargo not run with --frozen"
	for r in radard radarctl; do
		local n
		n=$(sed -n 's/^SRC_URI="\(.*\)"$/\1/p' "$build/logs/env-$r.txt" | tr ' ' '\n' | grep -c '^crate://' || true)
		echo "$r: $n crate:// entries in SRC_URI"
		[ "$n" -gt 0 ] || fail "$r: no crate:// entries"
	done
	grep -q '"radar-image.do_build" -> "radard.do_build"\|"radar-image.do_rootfs" -> "radard.do_package_write' "$build/task-depends.dot" ||
		fail "radar-image's task graph does not reach radard"
	echo "task graph: radar-image -> radard resolved"
}

check_manifest() {
	echo "--- install manifest against the recipes' do_install"
	python3 "$layer/scripts/check-install-manifest.py" --top "$top" ||
		fail "the recipes and board/jetson-agx-orin-devkit/install-manifest disagree"
}

for p in "${parts[@]}"; do
	case $p in
	manifest) check_manifest ;;
	crates) check_crates ;;
	lint) check_lint ;;
	kas) check_kas ;;
	parse) check_parse ;;
	*) fail "unknown part '$p' (crates, lint, kas, parse, manifest)" ;;
	esac
done
echo "yocto-checks: ${parts[*]}: passed"
