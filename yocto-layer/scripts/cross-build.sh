#!/usr/bin/env bash
# Cross-compile the workspace packages the layer's Rust recipes install, for
# aarch64, the way the recipes do: the same Rust (RADAR_RUST_VERSION of
# conf/distro/radar.conf), cargo and rustc flags
# (recipes-radar/radar-workspace/radar-cargo-flags.inc, plus --frozen from
# classes/radar_cargo_offline.bbclass and cargo_bin's --profile=release and
# CARGO_PROFILE_RELEASE_DEBUG=true), one build per recipe (RADAR_CARGO_PACKAGE).
# The crates are fetched first (`cargo fetch`, as bitbake's do_fetch does),
# then the build runs offline.
#
#   bash yocto-layer/scripts/cross-build.sh [recipe.bb...]   (default: all Rust recipes)
#   ... [recipe.bb...] --also PACKAGE   also a workspace package no recipe installs,
#                                       with the same flags (the arm64 QEMU guests'
#                                       test program p2p-suite, tests/qemu/arm64.sh)
set -euo pipefail
layer=$(cd "$(dirname "$0")/.." && pwd)
top=$(dirname "$layer")
cd "$top"

value() { # FILE NAME: the value of a plain `NAME = "value"` line
	sed -n "s/^$2 = \"\\(.*\\)\"\$/\\1/p" "$1" | tail -1
}
rust=$(value "$layer/conf/distro/radar.conf" RADAR_RUST_VERSION)
cargo_flags=$(value "$layer/recipes-radar/radar-workspace/radar-cargo-flags.inc" RADAR_CARGO_FLAGS)
rustflags=$(value "$layer/recipes-radar/radar-workspace/radar-cargo-flags.inc" RADAR_RUSTFLAGS)
[ -n "$rust" ] || { echo "cross-build: RADAR_RUST_VERSION not found in conf/distro/radar.conf" >&2; exit 2; }
# The workspace builds and tests with rust-toolchain.toml's Rust: the same.
pinned=$(sed -n 's/^channel = "\(.*\)"$/\1/p' "$top/rust-toolchain.toml")
[ "$pinned" = "$rust" ] || {
	echo "cross-build: rust-toolchain.toml pins Rust '$pinned' but conf/distro/radar.conf's RADAR_RUST_VERSION is '$rust': make them one" >&2
	exit 2
}
target=aarch64-unknown-linux-gnu

recipes=() also=()
while [ $# -gt 0 ]; do
	case $1 in
	--also) [ -n "${2:-}" ] || { echo "cross-build: --also needs a package" >&2; exit 2; }
		also+=("$2"); shift 2 ;;
	*) recipes+=("$1"); shift ;;
	esac
done
if [ ${#recipes[@]} -eq 0 ]; then
	mapfile -t recipes < <(grep -l '^RADAR_CARGO_PACKAGE = ' "$layer"/recipes-radar/*/*.bb | sort)
fi
[ ${#recipes[@]} -gt 0 ] || { echo "cross-build: no recipe sets RADAR_CARGO_PACKAGE" >&2; exit 2; }

cargo "+$rust" fetch --locked --target "$target"
members=$(cargo "+$rust" metadata --format-version 1 --no-deps --frozen |
	python3 -c 'import json, sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"]))')
export CARGO_TARGET_DIR=$top/target/yocto-cross
export CARGO_PROFILE_RELEASE_DEBUG=true
export RUSTFLAGS="$rustflags"
failed=()
for r in "${recipes[@]}" "${also[@]/#/--also=}"; do
	case $r in
	--also=*) pkg=${r#--also=} r="$pkg (no recipe)" ;;
	*) pkg=$(value "$r" RADAR_CARGO_PACKAGE) ;;
	esac
	[ -n "$pkg" ] || { echo "cross-build: $r sets no RADAR_CARGO_PACKAGE" >&2; exit 2; }
	case " $members " in *" $pkg "*) ;; *)
		echo "cross-build: FAIL: $(basename "$r"): RADAR_CARGO_PACKAGE $pkg is not a package of the workspace (Cargo.toml members: $members)" >&2
		failed+=("$pkg")
		continue ;;
	esac
	# word splitting of the flag strings is intended: bitbake splits them too
	# shellcheck disable=SC2086
	set -- --target="$target" --profile=release $cargo_flags --frozen --package "$pkg"
	echo "cross-build: $(basename "$r"): RUSTFLAGS='$RUSTFLAGS' cargo +$rust build $*"
	cargo "+$rust" build "$@"
	bins=$(cargo "+$rust" metadata --format-version 1 --no-deps --frozen |
		python3 -c 'import json, sys
m = json.load(sys.stdin)
print(" ".join(t["name"] for p in m["packages"] if p["name"] == sys.argv[1]
               for t in p["targets"] if "bin" in t["kind"]))' "$pkg")
	[ -n "$bins" ] || { echo "cross-build: package $pkg has no binaries to install" >&2; exit 1; }
	for b in $bins; do
		file -L "$CARGO_TARGET_DIR/$target/release/$b" | grep -q 'ARM aarch64' ||
			{ echo "cross-build: $b is not an aarch64 executable" >&2; exit 1; }
	done
	echo "cross-build: $pkg: aarch64 executables: $bins"
done
[ ${#failed[@]} -eq 0 ] || { echo "cross-build: FAILED: ${failed[*]}" >&2; exit 1; }
