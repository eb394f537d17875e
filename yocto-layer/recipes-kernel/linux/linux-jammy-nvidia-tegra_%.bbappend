# Kernel configuration for the frame loop (DISTRO = "radar"): tickless
# isolated cores (nohz_full/rcu_nocbs on the command line,
# conf/distro/radar.conf), and optionally the fully preemptible kernel.
FILESEXTRAPATHS:prepend:radar := "${THISDIR}/files:"

SRC_URI:append:radar = " file://radar-nohz-full.cfg"
SRC_URI:append:radar = " ${@'file://radar-preempt-rt.cfg' if d.getVar('RADAR_PREEMPT_RT') == '1' else ''}"
