#!/bin/bash
# Build the CUDA backend's device bundle on the development machine: the
# radar-dsp binary, the cuda-vs-cpu test binary, the library's unit tests
# and run.sh, stripped, into DEST (default: .device-bin/cuda in the repo).
# The GPU machine has no cargo; carry DEST there and run DEST/run.sh.
set -euo pipefail
ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
DEST=${1:-$ROOT/.device-bin/cuda}
cd "$ROOT"
cargo build --release -p radar-dsp --bins --tests
mkdir -p "$DEST"
exe() {
  cargo test --release -p radar-dsp --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]==sys.argv[1] and m["target"]["kind"]==[sys.argv[2]]:
        print(m["executable"])' "$1" "$2"
}
cp target/release/radar-dsp "$DEST/radar-dsp"
cp "$(exe cuda_matches_cpu test)" "$DEST/cuda_matches_cpu"
cp "$(exe radar_dsp lib)" "$DEST/radar_dsp_unit"
strip "$DEST/radar-dsp" "$DEST/cuda_matches_cpu" "$DEST/radar_dsp_unit"
cp "$(dirname "$0")/run.sh" "$DEST/run.sh"
git rev-parse HEAD > "$DEST/COMMIT"
du -sh "$DEST"
