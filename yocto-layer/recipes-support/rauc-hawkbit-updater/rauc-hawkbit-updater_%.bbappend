# Fleet updates from an Eclipse hawkBit server (DISTRO = "radar"): the
# appliance's configuration template (server, tenant and token are set per
# unit at provisioning, see docs/image.md) in place of the upstream example.
FILESEXTRAPATHS:prepend:radar := "${RADAR_BOARD_DIR}/rauc:"
SRC_URI:append:radar = " file://hawkbit-updater.conf.template"

do_install:append:radar() {
    # the updater runs as user rauc-hawkbit; the token is secret
    install -m 0640 -g rauc-hawkbit ${WORKDIR}/hawkbit-updater.conf.template ${D}${sysconfdir}/${BPN}/config.conf
}
