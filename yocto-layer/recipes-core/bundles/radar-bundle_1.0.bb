# nooelint: oelint.var.mandatoryvar.SRC_URI - a bundle packs radar-image, it fetches nothing
SUMMARY = "Signed RAUC update bundle of the radar appliance image"
DESCRIPTION = "verity-format bundle with radar-image's root file system for the \
inactive rootfs slot (APP or APP_b)."
LICENSE = "MIT"

inherit bundle

RAUC_BUNDLE_FORMAT = "verity"
RAUC_BUNDLE_COMPATIBLE = "${RADAR_RAUC_COMPATIBLE}"
RAUC_BUNDLE_VERSION = "${DISTRO_VERSION}"
RAUC_BUNDLE_DESCRIPTION = "${SUMMARY}"

RAUC_BUNDLE_SLOTS = "rootfs"
RAUC_SLOT_rootfs = "radar-image"
RAUC_SLOT_rootfs[fstype] = "ext4"

# Development keys unless the build names others (conf/distro/radar.conf,
# docs/image.md "Signing keys").
RAUC_KEY_FILE = "${RADAR_RAUC_KEY_FILE}"
RAUC_CERT_FILE = "${RADAR_RAUC_CERT_FILE}"
