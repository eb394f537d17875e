# shellcheck shell=bash
# Shared helpers for tests/qemu/*.sh and tests/kmod-checks.sh (sourced, not run).
# Everything built from the kernel source lives under $RADAR_KERNEL_CACHE, never
# in the repository.

RADAR_KERNEL_CACHE=${RADAR_KERNEL_CACHE:-"$HOME/.cache/radar-kernel"}
# Bump when the recipe in build-debug-kernel.sh changes in a way the config
# fragment does not show, so stale cached trees are not reused.
# shellcheck disable=SC2034 # used by the scripts that source this
RADAR_KERNEL_RECIPE=1

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ensure_pkgs PKG...: apt-get install the Debian packages that are missing.
ensure_pkgs() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	# Steps of tests/run-all.sh run side by side: one apt at a time (a
	# second would fail on dpkg's lock), and only what is still missing.
	(
		exec 8>"${TMPDIR:-/tmp}/radar-apt.lock"
		flock 8
		local still=()
		for p in "${missing[@]}"; do
			dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
				still+=("$p")
		done
		[ ${#still[@]} -eq 0 ] && exit 0
		log "installing Debian packages: ${still[*]}"
		as_root apt-get update -q >&2
		as_root env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -q --no-install-recommends "${still[@]}" >&2
	)
}

# kernel_src_version: version of Debian's linux-source-6.1 package.
kernel_src_version() {
	dpkg-query -W -f='${Version}' linux-source-6.1
}

# ensure_kernel_src: unpack /usr/src/linux-source-6.1.tar.xz once (pristine:
# builds use O=), print its path.
ensure_kernel_src() {
	ensure_pkgs linux-source-6.1 xz-utils
	local ver dir
	ver=$(kernel_src_version)
	dir="$RADAR_KERNEL_CACHE/src-$ver"
	if [ ! -f "$dir/Makefile" ]; then
		mkdir -p "$RADAR_KERNEL_CACHE"
		# One unpacking at a time (steps run side by side).
		(
			exec 8>"$RADAR_KERNEL_CACHE/.src.lock"
			flock 8
			[ -f "$dir/Makefile" ] && exit 0
			log "unpacking linux-source-6.1 $ver to $dir"
			rm -rf "$dir.tmp"
			mkdir -p "$dir.tmp"
			tar -xJf /usr/src/linux-source-6.1.tar.xz -C "$dir.tmp" --strip-components=1
			mv "$dir.tmp" "$dir"
		) || return 1
	fi
	printf '%s\n' "$dir"
}

# check_config_fragment CONFIG FRAGMENT: every "CONFIG_X=v" line of FRAGMENT
# must be in CONFIG as written, every "# CONFIG_X is not set" must be off.
check_config_fragment() {
	local config=$1 fragment=$2 line sym bad=0
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*)
			grep -qxF -- "$line" "$config" || {
				log "config: asked for '$line', got '$(grep -E "^(# )?${line%%=*}[= ]" "$config" || echo "<absent>")'"
				bad=1
			}
			;;
		"# CONFIG_"*" is not set")
			sym=${line#\# }
			sym=${sym%% *}
			if grep -q "^$sym=" "$config"; then
				log "config: asked for '$line', got '$(grep "^$sym=" "$config")'"
				bad=1
			fi
			;;
		esac
	done <"$fragment"
	return "$bad"
}
