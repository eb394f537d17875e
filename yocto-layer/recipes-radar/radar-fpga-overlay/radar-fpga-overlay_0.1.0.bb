SUMMARY = "Device-tree overlay for the radar FPGA card"
DESCRIPTION = "The FPGA's reset and interrupt lines and the PCIe controller it \
sits on (tegra234). UEFI applies it at boot (TEGRA_PLUGIN_MANAGER_OVERLAYS, \
conf/distro/radar.conf)."
LICENSE = "GPL-2.0-only | MIT"
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/GPL-2.0-only;md5=801f80980d171dd6425610833a22dbe6 \
                    file://${COMMON_LICENSE_DIR}/MIT;md5=0835ade698e0bcf8506ecda2f7b4f302"

FILESEXTRAPATHS:prepend := "${RADAR_BOARD_DIR}/dts:"
SRC_URI = "file://radar-fpga-overlay.dts;subdir=dts"
S = "${WORKDIR}/dts"

inherit devicetree

# devicetree.bbclass provides virtual/dtb, and meta-tegra prefers
# nvidia-kernel-oot-dtb for it, which would skip this recipe: an overlay is
# an addition to the board's device tree, not a replacement for it.
PROVIDES = ""

COMPATIBLE_MACHINE = "(tegra)"

# The tegraflash image takes overlays from the top of DEPLOY_DIR_IMAGE;
# devicetree.bbclass deploys into its devicetree/ subdirectory.
do_deploy:append() {
    install -m 0644 ${B}/radar-fpga-overlay.dtbo ${DEPLOYDIR}/
}
