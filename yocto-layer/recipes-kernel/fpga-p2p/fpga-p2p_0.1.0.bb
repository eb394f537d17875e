SUMMARY = "fpga_p2p: DMA from the radar FPGA card straight into GPU memory"
DESCRIPTION = "Out-of-tree kernel module for the FPGA card on PCIe (XDMA-based): \
frame ring in GPU memory pinned through NVIDIA's nvidia-p2p module."
LICENSE = "GPL-2.0-only"
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/GPL-2.0-only;md5=801f80980d171dd6425610833a22dbe6"

# NVIDIA's out-of-tree modules: module.bbclass turns every kernel-module-*
# in DEPENDS into KBUILD_EXTRA_SYMBOLS (their Module.symvers, for the
# nvidia_p2p_* symbols); nvidia-oot's headers (linux/nv-p2p.h) are staged
# next to it. With NVP2P_INC set, kmod/Kbuild builds against them and leaves
# out nvp2p_shim, the stand-in for kernels without NVIDIA's module.
DEPENDS += "kernel-module-nvidia-kernel-oot"

inherit module

# kmod/ of the checkout that holds this layer.
FILESEXTRAPATHS:prepend := "${RADAR_SRC_DIR}:"
SRC_URI = "file://kmod"
S = "${WORKDIR}/kmod"

NVIDIA_OOT_INCDIR = "${STAGING_INCDIR}/nvidia-kernel-oot"
EXTRA_OEMAKE += "KDIR=${STAGING_KERNEL_DIR} NVP2P_INC=${NVIDIA_OOT_INCDIR}"
MAKE_TARGETS = "modules"

# nvidia-p2p.ko is built by nvidia-kernel-oot, packaged as
# nv-kernel-module-nvidia-p2p, to which nvidia-kernel-oot.inc adds the
# unprefixed name kernel-module-nvidia-p2p (RPROVIDES). Nothing installs it
# by default.
RDEPENDS:${PN} += "kernel-module-nvidia-p2p"

# /etc/modules-load.d/fpga_p2p.conf; modprobe loads nvidia-p2p first (symbols).
KERNEL_MODULE_AUTOLOAD += "fpga_p2p"

COMPATIBLE_MACHINE = "(tegra)"
