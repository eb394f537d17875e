#!/bin/bash
# Build the CUDA backend's device bundle on the development machine: the
# radar-dsp binary, the cuda-vs-cpu test binary, the library's unit tests,
# radard, its hot-loop allocation test and its loop_floor bench, run.sh and radard's gpu-run.sh
# (with gpu-run.toml), stripped, into DEST
# (default: .device-bin/cuda in the repo).
# The GPU machine has no cargo; carry DEST there and run DEST/run.sh.
set -euo pipefail
ROOT=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
DEST=${1:-$ROOT/.device-bin/cuda}
cd "$ROOT"
# The radar-dsp tool and cuda_matches_cpu need the CUDA backend's
# instrumented runs (feature `instrument`, a default of radar-dsp; radard
# links the library without it, its loop_floor bench with it).
cargo build --release -p radar-dsp --features instrument --bins --tests
cargo build --release -p radard --bins --tests
mkdir -p "$DEST"
exe() { # target name, kind[, package[, cargo command: test (release), bench]]
  local cmd=(test --release)
  [ "${4:-test}" = bench ] && cmd=(bench) # bench profile: release already
  cargo "${cmd[@]}" -p "${3:-radar-dsp}" --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]==sys.argv[1] and m["target"]["kind"]==[sys.argv[2]]:
        print(m["executable"])' "$1" "$2"
}
cp target/release/radar-dsp "$DEST/radar-dsp"
cp "$(exe cuda_matches_cpu test)" "$DEST/cuda_matches_cpu"
cp "$(exe radar_dsp lib)" "$DEST/radar_dsp_unit"
# radard as it ships: built alone, so that radar-dsp comes without
# `instrument` (built with its tests and benches, it would have it).
cargo build --release -p radard --bin radard
cp target/release/radard "$DEST/radard"
cp "$(exe hot_loop_alloc test radard)" "$DEST/radard_hot_loop_alloc"
cp "$(exe loop_floor bench radard bench)" "$DEST/loop_floor"
cp "$(exe trigger_latency bench radard bench)" "$DEST/trigger_latency"
strip "$DEST/radar-dsp" "$DEST/cuda_matches_cpu" "$DEST/radar_dsp_unit" "$DEST/radard" "$DEST/radard_hot_loop_alloc" "$DEST/loop_floor" "$DEST/trigger_latency"
cp "$(dirname "$0")/run.sh" "$(dirname "$0")/culibs.sh" "$(dirname "$0")/ncu_table.py" "$(dirname "$0")/correlate.py" "$DEST/"
# GPU-triggered processing's checks and figures in one call: DEST/trigger-run.sh.
cp "$(dirname "$0")/trigger-run.sh" "$(dirname "$0")/ncu_bytes.py" "$DEST/"
cp tests/radard_targets.py "$DEST/"
# radard's own GPU-machine runs (8 ms and 1 ms frames): DEST/gpu-run.sh.
cp app/radard/gpu-run.sh app/radard/gpu-variants.sh app/radard/gpu-run.toml "$DEST/"
# Optional: cubins of the default configuration's kernels for run.sh to
# disassemble there (cuobjdump), when NVRTC and ptxas are at hand here
# (CUDA_TOOLS: a pip nvidia-cuda-nvrtc-cu12 / nvidia-cuda-nvcc-cu12 tree).
rm -rf "$DEST/sass"
TOOLS=${CUDA_TOOLS:-/work/cache/cudatools/nvidia}
if [ -x "$TOOLS/cuda_nvcc/bin/ptxas" ] && [ -d "$TOOLS/cuda_nvrtc/lib" ]; then
  PTX=$(mktemp -d)
  LD_LIBRARY_PATH="$TOOLS/cuda_nvrtc/lib:${LD_LIBRARY_PATH:-}" RADAR_PTX_DIR="$PTX" \
    "$DEST/radar_dsp_unit" kernels_compile_with_nvrtc >/dev/null
  mkdir -p "$DEST/sass"
  for a in 90 87; do
    "$TOOLS/cuda_nvcc/bin/ptxas" -arch=sm_$a -O3 "$PTX/default_sm$a.ptx" -o "$DEST/sass/default_sm$a.cubin"
  done
  rm -rf "$PTX"
fi
git rev-parse HEAD > "$DEST/COMMIT"
du -sh "$DEST"
