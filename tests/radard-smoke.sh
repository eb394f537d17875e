#!/usr/bin/env bash
# End-to-end checks of the radard binary on the simulator: a verified
# test-pattern stream, the synthetic scene through the CPU backend (its four
# targets must be reported), and configuration errors that name the key.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -p radard
radard=./target/release/radard
out=target/radard-smoke
mkdir -p "$out"
fail=0
check() { # description, command...
	local what=$1; shift
	if "$@"; then echo "PASS: $what"; else echo "FAIL: $what"; fail=1; fi
}
json() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))$2)" "$1"; }

# 1. Test pattern as fast as the simulator goes: every byte verified.
rc=0
"$radard" --no-rt --content test-pattern --chunk-period-us 0 --frames 2000 --print-every 0 \
	--stats-json "$out/pattern.json" >"$out/pattern.log" 2>&1 || rc=$?
check "test pattern: radard exits 0" test "$rc" -eq 0
check "test pattern: 2000 frames" test "$(json "$out/pattern.json" "['frames']")" -eq 2000
check "test pattern: no payload errors" test "$(json "$out/pattern.json" "['payload_errors']")" -eq 0
check "test pattern: sequence continuous or explained by drops" test "$(json "$out/pattern.json" "['sequence_errors']")" -eq 0
check "test pattern: drops explained by the source's counter" test \
	"$(json "$out/pattern.json" "['dropped']['at_source']")" -le \
	"$(json "$out/pattern.json" "['source_counters']['drops_no_slot'] + 0")"

# 2. The built-in scene through the CPU backend at full speed.
rc=0
"$radard" --no-rt --backend cpu --chunk-period-us 0 --frames 40 --print-every 1 \
	--stats-json "$out/scene.json" >"$out/scene.log" 2>&1 || rc=$?
check "scene: radard exits 0" test "$rc" -eq 0
check "scene: 40 frames processed" test "$(json "$out/scene.json" "['frames']")" -eq 40
# The built-in scene's four targets in every frame (tests/radard_targets.py).
check "scene: the four targets reported in every frame" python3 tests/radard_targets.py "$out/scene.log" 40

# 3. Bad configuration: exit 2, the key named, nothing started.
printf '[source]\nslots = 1\n' >"$out/bad.toml"
rc=0
"$radard" --config "$out/bad.toml" >"$out/bad.log" 2>&1 || rc=$?
check "bad config: exit status 2" test "$rc" -eq 2
check "bad config: error names source.slots" grep -q "source.slots" "$out/bad.log"

# 4. The README's main command (scripts/run-radard.sh) writes every processed
# frame's detections to target/radard/detections.jsonl (docs/detections-format.md).
rm -f target/radard/detections.jsonl*
rc=0
bash scripts/run-radard.sh --no-rt --backend cpu --chunk-period-us 0 --frames 40 --print-every 0 \
	--stats-json "$out/main.json" >"$out/main.log" 2>&1 || rc=$?
check "main command: radard exits 0" test "$rc" -eq 0
check "main command: a jsonl line per processed frame, each with the four targets" python3 -c '
import json, sys
lines = open("target/radard/detections.jsonl").read().splitlines()
frames = json.load(open(sys.argv[1]))["frames"]
ok = len(lines) == frames == 40
for l in lines:
    d = json.loads(l)
    ok = ok and d["version"] == 1 and d["count"] == len(d["detections"]) >= 4
sys.exit(0 if ok else 1)' "$out/main.json"

exit "$fail"
