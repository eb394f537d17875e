#!/usr/bin/env bash
# No module of any crate imports one that imports it back (tests/module-cycles.py):
# every library, binary and src/bin/* tool of the workspace. Exits non-zero on a cycle.
set -uo pipefail
cd "$(dirname "$0")/.."
fail=0 n=0
while IFS= read -r root; do
	dir=$(dirname "$root")
	args=()
	[ "$(basename "$root")" = main.rs ] && args=(--bin)
	out=$(python3 tests/module-cycles.py "$dir" "${args[@]}" --quiet) || fail=1
	n=$((n + 1))
	printf '%-40s %s\n' "$dir ($(basename "$root"))" "$(tr '\n' ' ' <<<"$out")"
done < <(git ls-files '*/src/lib.rs' '*/src/main.rs' 'src/lib.rs' '*/src/bin/*/main.rs' | sort)
echo "module-cycles: $n crate roots checked"
exit "$fail"
