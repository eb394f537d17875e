# shellcheck shell=bash
# Where the test inputs are (the arm64 kbuild tree, NVIDIA's nvidia-p2p
# source, the pinned Yocto snapshots): a directory `shared` that is not part
# of the repository. Sourced by the scripts that need it.
#
#   shared_dir TOP   prints the first that exists of: $RADAR_SHARED_DIR,
#                    TOP/../shared (beside the checkout), TOP/../../shared
#                    (beside a directory of worktrees), and ../shared beside
#                    the repository this one was cloned from (a clean clone
#                    elsewhere, e.g. CI's); else TOP/../shared, for the
#                    caller's "not found" message.
shared_dir() {
	local top=$1 origin d
	if [ -n "${RADAR_SHARED_DIR:-}" ]; then
		printf '%s\n' "$RADAR_SHARED_DIR"
		return
	fi
	origin=$(git -C "$top" remote get-url origin 2>/dev/null || true)
	case $origin in /*) ;; *) origin= ;; esac
	for d in "$top/../shared" "$top/../../shared" ${origin:+"$origin/../shared"}; do
		if [ -d "$d" ]; then
			(cd "$d" && pwd)
			return
		fi
	done
	printf '%s\n' "$top/../shared"
}
