#!/usr/bin/env bash
# Canary for the suites: each patch in regressions/ puts one fixed defect
# back into a copy of kmod/ (its header names the suite that must catch it
# and the nv-p2p module to run on, and an optional "kernel:" line the kernel
# it needs, which then overrides --kernel); the suite must then fail. A suite that
# passes with the defect back cannot tell the fixed driver from the broken
# one, and this script fails.
#
#   bash tests/qemu/planted-bugs/regressions.sh --kernel debian|debug [NAME...]
#
# Results under target/qemu/canary/regressions/<name>/; last line
# "N caught, N missed".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
# shellcheck source=tests/qemu/lib.sh
. "$here/../lib.sh"

kernel=''
names=()
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=${2:-}; shift 2 ;;
	-*) die "unknown argument: $1" ;;
	*) names+=("$1"); shift ;;
	esac
done
case $kernel in debian | debug) ;; *) die "usage: $0 --kernel debian|debug [NAME...]" ;; esac
if [ ${#names[@]} -eq 0 ]; then
	for p in "$here"/regressions/*.patch; do names+=("$(basename "$p" .patch)"); done
fi
ensure_pkgs patch

caught=0 missed=0
for name in "${names[@]}"; do
	patchf="$here/regressions/$name.patch"
	[ -f "$patchf" ] || die "no $patchf"
	suite=$(sed -n 's/^suite: //p' "$patchf" | head -n 1)
	p2p=$(sed -n 's/^p2p: //p' "$patchf" | head -n 1)
	[ -n "$suite" ] && [ -n "$p2p" ] || die "$patchf: no 'suite:' or 'p2p:' line"
	# A detector only one kernel has (the dma_sync_single_* watch needs
	# kprobe events: Debian's kernel) names that kernel.
	pkernel=$(sed -n 's/^kernel: //p' "$patchf" | head -n 1)
	pkernel=${pkernel:-$kernel}
	case $pkernel in debian | debug) ;; *) die "$patchf: kernel '$pkernel' is not debian or debug" ;; esac
	out="$top/target/qemu/canary/regressions/$name"
	rm -rf "$out"
	mkdir -p "$out"
	cp -a "$top/kmod" "$out/kmod"
	if ! patch -s -d "$out/kmod" -p1 <"$patchf" >"$out/patch.log" 2>&1; then
		cat "$out/patch.log"
		echo "MISSED $name: the patch no longer applies to kmod/ (remake it)"
		missed=$((missed + 1))
		continue
	fi
	log "$name: $suite on the $pkernel kernel with $p2p, defect back in"
	status=0
	RADAR_KMOD_DIR="$out/kmod" RADAR_QEMU_OUTDIR="$out" \
		bash "$here/../run.sh" --kernel "$pkernel" --suite "$suite" --p2p "$p2p" \
		>"$out/run.log" 2>&1 || status=$?
	json="$out/$pkernel-$suite.json"
	[ "$p2p" = nvidia ] && json="$out/nvidia/$pkernel-$suite.json"
	verdict=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["passed"], r["failure"][:300])' "$json" 2>/dev/null || echo "none")
	case $verdict in
	"0 "*)
		echo "CAUGHT $name: $suite failed: ${verdict#0 }"
		caught=$((caught + 1))
		;;
	*)
		echo "MISSED $name: $suite did not fail with the defect back in (run.sh exit $status; log $out/run.log)"
		missed=$((missed + 1))
		;;
	esac
done
echo "$caught caught, $missed missed"
[ "$missed" -eq 0 ]
