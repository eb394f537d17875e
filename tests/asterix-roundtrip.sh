#!/usr/bin/env bash
# radard's ASTERIX CAT-010 output read by two decoders no one here wrote:
# Wireshark's dissector (tshark, Debian) and asterix_decoder (PyPI). radard
# runs the simulator's synthetic scene through the CPU backend (a small
# geometry, so that it is quick) with a jsonl sink and an asterix sink whose
# datagram limit holds two records, so that frames with more reports are
# split; a receiver here writes every datagram to a pcap. Over at least 1000
# frames, every record must be decoded by both without a malformed mark and
# agree with the jsonl detections of the same frame within the items'
# resolution, Time of Day with the frame's UTC time; radard's summary must
# count every datagram, record and split (tests/asterix_compare.py).
# Installs tshark and the decoder (in a venv under ~/.cache) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

FRAMES=1100
MAX_DATAGRAM=45 # a data block's 3-byte header and two 21-byte records
SAC=7
SIC=42

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v tshark >/dev/null; then
	echo "asterix: installing tshark (Debian)"
	as_root apt-get update -q
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends tshark
fi
decoder_python=$(bash tests/asterix-decoder-venv.sh)
echo "asterix: $(tshark -v 2>/dev/null | head -1)"

cargo build --release --locked -p radard
out=target/asterix-roundtrip
rm -rf "$out"
mkdir -p "$out"

python3 tests/asterix_capture.py "$out/capture.pcap" "$out/port" "$out/stop" &
capture=$!
trap 'kill "$capture" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -f "$out/port" ] && break; sleep 0.05; done
port=$(cat "$out/port")

# 64 KiB frames in 4 chunks every 4 ms: the CPU backend keeps up.
cat >"$out/radard.toml" <<-EOT
	[source]
	kind = "sim"
	chunk_period_us = 1000
	[backend]
	kind = "cpu"
	[geometry]
	n_tx = 2
	n_rx = 4
	n_loops = 32
	n_samples = 64
	chunks_per_frame = 4
	[cfar]
	train_doppler = 2
	train_range = 4
	[output]
	print_every = 0
	[[sink]]
	kind = "jsonl"
	path = "$out/detections.jsonl"
	[[sink]]
	kind = "asterix"
	address = "127.0.0.1:$port"
	sac = $SAC
	sic = $SIC
	max_datagram = $MAX_DATAGRAM
EOT
rc=0
./target/release/radard --no-rt --config "$out/radard.toml" --frames "$FRAMES" \
	--stats-json "$out/stats.json" >"$out/radard.log" 2>&1 || rc=$?
grep "^summary: sink" "$out/radard.log" || true
# 3: frames late on a loaded machine; the outputs are what is checked here.
if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ]; then
	echo "asterix: radard exited $rc (log: $out/radard.log)"
	tail -20 "$out/radard.log"
	exit 1
fi
touch "$out/stop"
wait "$capture"
trap - EXIT

"$decoder_python" tests/asterix_compare.py --pcap "$out/capture.pcap" --port "$port" \
	--jsonl "$out/detections.jsonl" --stats "$out/stats.json" --sac "$SAC" --sic "$SIC" \
	--max-datagram "$MAX_DATAGRAM" --min-frames 1000
