#!/usr/bin/env bash
# diag-proto builds without std: the protocol crate is meant for small
# targets too (a microcontroller on the far end of the serial link); so does
# the ASTERIX CAT-010 encoder (asterix-cat010, for a sensor front end). Checked
# on thumbv7em-none-eabihf (Cortex-M4F/M7, no operating system); installs
# the target when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
target=thumbv7em-none-eabihf
rustup target list --installed | grep -qx "$target" || rustup target add "$target"
cargo build -p diag-proto --locked --release --target "$target"
echo "diag-proto: no_std build for $target ok"
cargo build -p asterix-cat010 --locked --release --target "$target"
echo "asterix-cat010: no_std build for $target ok"
