SUMMARY = "Radar appliance image for the Jetson AGX Orin devkit"
DESCRIPTION = "radard and its kernel module, CUDA runtime libraries, the board \
files, RAUC with the nvbootctrl backend and the hawkBit updater, on the \
redundant A/B flash layout."
LICENSE = "MIT"

inherit core-image

IMAGE_INSTALL = "\
    packagegroup-core-boot \
    radard \
    radard-doc \
    radarctl \
    radar-board \
    linuxptp \
    kernel-module-fpga-p2p \
    rauc \
    rauc-hawkbit-updater \
    ${CORE_IMAGE_EXTRA_INSTALL} \
"
IMAGE_LINGUAS = ""

# tegraflash for the first flash; ext4 of the root file system for the RAUC
# bundle (radar-bundle).
IMAGE_FSTYPES += "ext4"

# The overlay is deployed by its own recipe; the flash package picks it up.
do_image_tegraflash[depends] += "radar-fpga-overlay:do_deploy"

python () {
    # RAUC's two rootfs slots (APP, APP_b) exist only on the redundant layout.
    if not bb.utils.to_boolean(d.getVar('USE_REDUNDANT_FLASH_LAYOUT')):
        raise bb.parse.SkipRecipe("needs the redundant A/B flash layout (USE_REDUNDANT_FLASH_LAYOUT = \"1\", as in DISTRO = \"radar\")")
}
