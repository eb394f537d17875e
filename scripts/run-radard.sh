#!/usr/bin/env bash
# The main job: builds radard and runs it on the frame simulator (synthetic
# radar scene, 4 MiB frames every 8 ms, best available backend) until Ctrl-C.
# Detections also go to target/radard/detections.jsonl (docs/detections-format.md;
# rotated at 64 MiB, 4 files kept) and the health verdict to target/radard/health.
# A frame line every 125th frame (once a second at 8 ms frames; deadline
# misses are always printed), unless --print-every is given. Extra arguments
# go to radard (see `radard --help`), for example:
#   bash scripts/run-radard.sh --frames 500 --backend cpu --print-every 1
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --run-only
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
cargo build --release --locked -p radard
mkdir -p target/radard
echo "run-radard: detections to $PWD/target/radard/detections.jsonl, health verdict to $PWD/target/radard/health"
print_every=(--print-every 125)
for a in "$@"; do
	case $a in --print-every | --print-every=*) print_every=() ;; esac
done
exec ./target/release/radard --source sim --sink jsonl:target/radard/detections.jsonl \
	--health-file target/radard/health "${print_every[@]}" "$@"
