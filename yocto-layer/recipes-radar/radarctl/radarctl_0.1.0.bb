SUMMARY = "radarctl: the radar appliance's diagnostics client"
DESCRIPTION = "Talks to radard's diagnostics protocol over the serial console."

require recipes-radar/radar-workspace/radar-workspace.inc

RADAR_CARGO_PACKAGE = "radarctl"
