#!/usr/bin/env bash
# The main job: builds radard and runs it on the frame simulator (synthetic
# radar scene, 4 MiB frames every 8 ms, best available backend) until Ctrl-C.
# Extra arguments go to radard (see `radard --help`), for example:
#   bash scripts/run-radard.sh --frames 500 --backend cpu
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --run-only
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p radard
exec ./target/release/radard --source sim "$@"
