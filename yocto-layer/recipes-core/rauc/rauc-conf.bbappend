# The appliance's RAUC configuration (DISTRO = "radar"): A/B rootfs over
# nvbootctrl (board/jetson-agx-orin-devkit/rauc/system.conf), the custom
# bootloader backend it names, and the keyring that verifies bundles.
FILESEXTRAPATHS:prepend:radar := "${RADAR_BOARD_DIR}/rauc:"
SRC_URI:append:radar = " file://rauc-backend-nvbootctrl"

# The keyring is not in the repository: a development CA comes from
# board/jetson-agx-orin-devkit/rauc/make-dev-keys.sh, a product's CA from
# wherever RADAR_RAUC_KEYRING_FILE points (docs/image.md). It is copied at
# do_install, so parsing does not need it.
RAUC_KEYRING_URI:radar = ""
RAUC_KEYRING_FILE:radar = "ca.cert.pem"
do_install[file-checksums] += "${RADAR_RAUC_KEYRING_FILE}:False"
do_install[vardeps] += "RADAR_RAUC_KEYRING_FILE"

do_install:prepend:radar() {
    if [ ! -s "${RADAR_RAUC_KEYRING_FILE}" ]; then
        bbfatal "RAUC keyring ${RADAR_RAUC_KEYRING_FILE} is missing: run board/jetson-agx-orin-devkit/rauc/make-dev-keys.sh ${RADAR_RAUC_KEY_DIR} (development) or set RADAR_RAUC_KEYRING_FILE"
    fi
    install -m 0644 "${RADAR_RAUC_KEYRING_FILE}" ${WORKDIR}/${RAUC_KEYRING_FILE}
}

do_install:append:radar() {
    # where system.conf's [handlers] bootloader-custom-backend expects it
    backend=$(sed -n 's/^bootloader-custom-backend *= *//p' ${WORKDIR}/system.conf)
    [ -n "$backend" ] || bbfatal "system.conf names no bootloader-custom-backend"
    install -D -m 0755 ${WORKDIR}/rauc-backend-nvbootctrl ${D}$backend
}

FILES:${PN}:append:radar = " ${libexecdir}/radar"
# The backend drives NVIDIA's nvbootctrl and writes the UEFI variables
# (chattr -i first: efivarfs files are immutable).
RDEPENDS:${PN}:append:radar = " e2fsprogs tegra-redundant-boot-base"
