SUMMARY = "radard: the radar appliance program"
DESCRIPTION = "The 8 ms frame loop: FPGA capture into GPU-visible memory through \
fpga_p2p, the processing chain on the GPU (cuFFT, NVRTC), detections."

require recipes-radar/radar-workspace/radar-workspace.inc

RADAR_CARGO_PACKAGE = "radard"

inherit systemd

FILESEXTRAPATHS:prepend := "${RADAR_BOARD_DIR}/systemd:${RADAR_BOARD_DIR}:"
SRC_URI += "\
    file://radard.service \
    file://radard.toml \
    file://tmpfiles/radard.conf \
    file://radard-site.conf.example \
    file://docs/image.md \
    file://docs/bring-up.md \
"

do_install:append() {
    install -d ${D}${systemd_system_unitdir}
    install -m 0644 ${WORKDIR}/radard.service ${D}${systemd_system_unitdir}/
    # the unit's configuration (board/jetson-agx-orin-devkit/radard.toml);
    # a site's changes go into drop-ins beside it (radard.toml.d/*.toml)
    install -d ${D}${sysconfdir}/radard ${D}${sysconfdir}/radard/radard.toml.d
    install -m 0644 ${WORKDIR}/radard.toml ${D}${sysconfdir}/radard/
    # /data/radard, the JSONL output's directory, made at boot
    install -d ${D}${nonarch_libdir}/tmpfiles.d
    install -m 0644 ${WORKDIR}/tmpfiles/radard.conf ${D}${nonarch_libdir}/tmpfiles.d/
    # radard.service's Documentation= and the example of a site's drop-in;
    # the bring-up guide (the time units' Documentation=)
    install -d ${D}${docdir}/radard
    install -m 0644 ${WORKDIR}/docs/image.md ${WORKDIR}/radard-site.conf.example ${D}${docdir}/radard/
    install -m 0644 ${WORKDIR}/docs/bring-up.md ${D}${docdir}/radard/
}

CONFFILES:${PN} = "${sysconfdir}/radard/radard.toml"
FILES:${PN} += "${nonarch_libdir}/tmpfiles.d"

SYSTEMD_SERVICE:${PN} = "radard.service"

# cudarc loads libcuda (tegra-libraries-cuda) and libnvrtc with dlopen at
# run time: no ELF dependency tells bitbake, so they are named here (the
# chain's FFTs are its own kernels: no cuFFT). cuda-cudart installs the
# ld.so.conf.d entry for /usr/local/cuda-*/lib, where libnvrtc lives. The kernel module, the radar user and the
# device node rule come with the last two.
RDEPENDS:${PN} = "\
    cuda-cudart \
    cuda-nvrtc \
    kernel-module-fpga-p2p \
    radar-board \
    tegra-libraries-cuda \
"
