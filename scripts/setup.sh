#!/usr/bin/env bash
# Installs what building, running and testing the project needs on a fresh
# Debian 12 machine: Debian packages, a Rust toolchain with the targets we use.
# Idempotent and quiet when everything is already there.
#
#   bash scripts/setup.sh            # everything (tests included)
#   bash scripts/setup.sh --run-only # just what `radard` on the simulator needs
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
mode=all
[ "${1:-}" = "--run-only" ] && mode=run

SUDO=
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "setup: need root or sudo to install packages" >&2; exit 1; }
	SUDO=sudo
fi

run_pkgs=(build-essential pkg-config ca-certificates curl git xz-utils)
test_pkgs=(
	qemu-system-x86 linux-image-amd64 linux-headers-amd64 linux-source-6.1
	busybox-static cpio kmod sparse bc flex bison libelf-dev libssl-dev dwarves rsync
	gcc-aarch64-linux-gnu libc6-dev-arm64-cross device-tree-compiler python3
	python3-venv file
	# board checks and OTA (tests/board-checks.sh, tests/ota/run.sh)
	systemd udev rauc dbus dbus-daemon squashfs-tools openssl
)
pkgs=("${run_pkgs[@]}")
[ "$mode" = all ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing Debian packages: ${missing[*]}"
	$SUDO apt-get update -q
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Rust: rustup's installer from static.rust-lang.org (the project needs a
# newer Rust than Debian 12 ships).
if [ -f "$HOME/.cargo/env" ]; then
	# shellcheck disable=SC1091
	. "$HOME/.cargo/env"
fi
if ! command -v cargo >/dev/null; then
	echo "setup: installing Rust (rustup, stable)"
	tmp=$(mktemp -d)
	curl -sSf -o "$tmp/rustup-init" \
		"https://static.rust-lang.org/rustup/dist/$(uname -m)-unknown-linux-gnu/rustup-init"
	chmod +x "$tmp/rustup-init"
	"$tmp/rustup-init" -y --profile minimal --default-toolchain stable -c clippy -c rustfmt
	rm -rf "$tmp"
	# shellcheck disable=SC1091
	. "$HOME/.cargo/env"
fi
# The toolchain of rust-toolchain.toml (the Yocto image's Rust), with the
# components and targets it names.
rust=$(sed -n 's/^channel = "\(.*\)"$/\1/p' "$top/rust-toolchain.toml")
rust_targets=(aarch64-unknown-linux-gnu x86_64-unknown-linux-musl thumbv7em-none-eabihf)
have_targets=$(rustup target list --toolchain "$rust" --installed 2>/dev/null || true)
rust_ok=1
rustup run "$rust" cargo clippy --version >/dev/null 2>&1 || rust_ok=0
rustup run "$rust" rustfmt --version >/dev/null 2>&1 || rust_ok=0
for t in "${rust_targets[@]}"; do grep -qx "$t" <<<"$have_targets" || rust_ok=0; done
if [ "$rust_ok" -eq 0 ]; then
	echo "setup: installing Rust $rust (rust-toolchain.toml) with clippy, rustfmt and ${rust_targets[*]}"
	rustup toolchain install "$rust" --profile minimal -c clippy -c rustfmt \
		"${rust_targets[@]/#/-t}"
fi
