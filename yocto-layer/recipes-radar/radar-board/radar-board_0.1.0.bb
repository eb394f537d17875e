SUMMARY = "Radar appliance board files for the Jetson AGX Orin devkit"
DESCRIPTION = "The radar user, the udev rule for /dev/fpga-p2p* and the card's \
PTP clock, the power mode and clocks unit, the health-gated mark-good unit (in \
place of NVIDIA's unconditional nv_update_verifier), the data partition's \
mount, the hardware watchdog setting, linuxptp's configuration and units \
(PTP on eth0 to the system clock to the card's clock; GNSS PPS as the \
alternative) and the systemd preset."
LICENSE = "GPL-2.0-only | MIT"
LIC_FILES_CHKSUM = "file://${COMMON_LICENSE_DIR}/GPL-2.0-only;md5=801f80980d171dd6425610833a22dbe6 \
                    file://${COMMON_LICENSE_DIR}/MIT;md5=0835ade698e0bcf8506ecda2f7b4f302"

# board/jetson-agx-orin-devkit/ of the checkout that holds this layer.
FILESEXTRAPATHS:prepend := "${RADAR_BOARD_DIR}:"
SRC_URI = "\
    file://udev/60-fpga-p2p.rules \
    file://systemd/radar-performance.service \
    file://systemd/radar-mark-good.service \
    file://systemd/data.mount \
    file://systemd/radar-data-mkfs.service \
    file://systemd/90-radar.preset \
    file://systemd/system.conf.d/radar-watchdog.conf \
    file://scripts/radar-mark-good \
    file://linuxptp/ptp4l.conf \
    file://linuxptp/ts2phc.conf \
    file://systemd/radar-ptp4l.service \
    file://systemd/radar-phc2sys-system.service \
    file://systemd/radar-phc2sys-card.service \
    file://systemd/radar-ts2phc.service \
    file://systemd/radar-phc2sys-gnss.service \
"
S = "${WORKDIR}"

inherit systemd useradd

USERADD_PACKAGES = "${PN}"
GROUPADD_PARAM:${PN} = "--system radar; --system gpio"
USERADD_PARAM:${PN} = "--system --gid radar --groups gpio,video --home-dir /nonexistent \
                       --no-create-home --shell /sbin/nologin radar"

do_install() {
    install -d ${D}${nonarch_base_libdir}/udev/rules.d
    install -m 0644 ${S}/udev/60-fpga-p2p.rules ${D}${nonarch_base_libdir}/udev/rules.d/

    install -d ${D}${systemd_system_unitdir} ${D}${systemd_unitdir}/system-preset
    install -m 0644 ${S}/systemd/radar-performance.service ${D}${systemd_system_unitdir}/
    install -m 0644 ${S}/systemd/radar-mark-good.service ${D}${systemd_system_unitdir}/
    install -m 0644 ${S}/systemd/data.mount ${S}/systemd/radar-data-mkfs.service ${D}${systemd_system_unitdir}/
    install -m 0644 ${S}/systemd/90-radar.preset ${D}${systemd_unitdir}/system-preset/
    # the hardware watchdog, petted by systemd (RuntimeWatchdogSec=)
    install -d ${D}${systemd_unitdir}/system.conf.d
    install -m 0644 ${S}/systemd/system.conf.d/radar-watchdog.conf ${D}${systemd_unitdir}/system.conf.d/

    install -d ${D}${libexecdir}/radar
    install -m 0755 ${S}/scripts/radar-mark-good ${D}${libexecdir}/radar/

    # Time: linuxptp's configuration and our units for it (the package's own
    # ptp4l@/phc2sys@ templates stay disabled).
    install -d ${D}${sysconfdir}/linuxptp
    install -m 0644 ${S}/linuxptp/ptp4l.conf ${D}${sysconfdir}/linuxptp/radar-ptp4l.conf
    install -m 0644 ${S}/linuxptp/ts2phc.conf ${D}${sysconfdir}/linuxptp/radar-ts2phc.conf
    install -m 0644 ${S}/systemd/radar-ptp4l.service ${S}/systemd/radar-phc2sys-system.service ${D}${systemd_system_unitdir}/
    install -m 0644 ${S}/systemd/radar-phc2sys-card.service ${D}${systemd_system_unitdir}/
    install -m 0644 ${S}/systemd/radar-ts2phc.service ${S}/systemd/radar-phc2sys-gnss.service ${D}${systemd_system_unitdir}/

    # NVIDIA's nv_update_verifier marks every boot good: masked, so only
    # radar-mark-good (after radard's health verdict) does.
    install -d ${D}${sysconfdir}/systemd/system
    ln -sf /dev/null ${D}${sysconfdir}/systemd/system/nv_update_verifier.service
}

# data.mount pulls in radar-data-mkfs.service, which has no [Install]. The
# GNSS alternative's units are installed, not enabled (the preset says so too).
SYSTEMD_SERVICE:${PN} = "radar-performance.service radar-mark-good.service data.mount \
                         radar-ptp4l.service radar-phc2sys-system.service radar-phc2sys-card.service"

FILES:${PN} += "\
    ${nonarch_base_libdir}/udev/rules.d \
    ${systemd_unitdir}/system-preset \
    ${systemd_unitdir}/system.conf.d \
    ${libexecdir}/radar \
    ${sysconfdir}/systemd/system/nv_update_verifier.service \
    ${sysconfdir}/linuxptp \
"

# nvpmodel and jetson_clocks for radar-performance.service; ptp4l, phc2sys
# and ts2phc for the time units (meta-oe's linuxptp).
RDEPENDS:${PN} = "tegra-nvpmodel tegra-tools-jetson-clocks linuxptp"

COMPATIBLE_MACHINE = "(tegra)"
