# nv_update_verifier marks every boot good, whatever the software does: not
# enabled on the appliance (radar-board also masks it), where radar-mark-good
# does so only after radard's health verdict.
SYSTEMD_AUTO_ENABLE:${PN}:radar = "disable"
