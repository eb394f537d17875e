#!/bin/sh
# Runs in the unit test's guest at every boot, before systemd (the stage
# init of tests/unit/build-image.sh): puts the run's files in place.
#   $1/root        the repository's files at the install manifest's paths
#   $1/accounts    the manifest's groups and user (as the recipe's useradd)
#   $1/enable      the units the recipes enable (systemctl preset: the
#                  board's 90-radar.preset decides, as on the image)
#   $1/test-root   the test's own files (drop-ins, shell, network)
set -eu
S=$1
kver=$(cat "$S/kernel-version")
cp -a "$S/root/." /
while read -r kind name arg; do
	case $kind in
	group) getent group "$name" >/dev/null || groupadd --system "$name" ;;
	user)
		groups=${arg#*:}
		useradd --system --gid "${arg%%:*}" ${groups:+--groups "$groups"} --home-dir /nonexistent \
			--no-create-home --shell /usr/sbin/nologin "$name"
		;;
	esac
done <"$S/accounts"
depmod -a "$kver"
while read -r unit; do
	systemctl preset "$unit"
done <"$S/enable"
cp -a "$S/test-root/." /
systemctl enable radar-unit-shell.service systemd-networkd.service
