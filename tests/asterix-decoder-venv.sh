#!/usr/bin/env bash
# The ASTERIX tests' second decoder, Croatia Control's asterix_decoder (PyPI,
# pinned), in a venv under ~/.cache/radar-asterix, made when missing. Prints
# the venv's python (tests/asterix-roundtrip.sh, tests/unit/run.sh).
set -euo pipefail
version=0.7.11
venv=$HOME/.cache/radar-asterix/venv-asterix_decoder-$version
if ! "$venv/bin/python" -c "import asterix" 2>/dev/null; then
	echo "asterix: installing asterix_decoder $version (PyPI) into $venv" >&2
	rm -rf "$venv"
	python3 -m venv "$venv" >&2
	"$venv/bin/pip" install -q "asterix_decoder==$version" >&2
fi
echo "$venv/bin/python"
