# Checks radard's frame lines (--print-every 1) against a front-end
# recording's per-frame truth: frame `seq` of the card's ADC stream is the
# recording's frame seq mod `frames`, and each target in view there must be
# among the frame line's detections within the tolerances (metres, m/s,
# degrees; defaults as in targets.awk).
#
#   awk -f moving-targets.awk -v truth=front-end.truth -v frames=N LOG
#
# truth: one line per target per recording frame, "FRAME RANGE_M
# VELOCITY_MPS AZIMUTH_DEG IN_VIEW(0|1)". Prints "frames=N targets=T
# found=F missed=M moved=D" (D: the span in metres of the first target's
# ranges over the frames checked: how far it was seen to move) and the
# first miss; exits 1 unless every
# target in view was found in every frame and there was at least one frame.
# Runs on busybox awk (the QEMU guest).
function abs(x) { return x < 0 ? -x : x }
BEGIN {
	if (rtol == "") rtol = 1.0
	if (vtol == "") vtol = 2.0
	if (atol == "") atol = 3.0
	if (frames + 0 < 1) { print "frames= not given"; bad = 1; exit 1 }
	while ((getline line < truth) > 0) {
		split(line, f, " ")
		fr = f[1] + 0
		k = ++count[fr]
		R[fr, k] = f[2] + 0; V[fr, k] = f[3] + 0; A[fr, k] = f[4] + 0; IN[fr, k] = f[5] + 0
	}
	if (!(0 in count)) { print "no truth in " truth; bad = 1; exit 1 }
}
/^frame seq=/ {
	seq = $2
	sub(/^seq=/, "", seq)
	fr = (seq + 0) % frames
	checked++
	k = 0
	rest = $0
	while (match(rest, /\[[-+0-9.]+m [-+0-9.]+m\/s [-+0-9.]+deg/)) {
		d = substr(rest, RSTART + 1, RLENGTH - 1)
		rest = substr(rest, RSTART + RLENGTH)
		gsub(/m\/s|deg|m|\+/, "", d)
		split(d, g, " ")
		k++
		dr[k] = g[1] + 0; dv[k] = g[2] + 0; da[k] = g[3] + 0
	}
	for (t = 1; t <= count[fr]; t++) {
		if (!IN[fr, t]) continue
		targets++
		hit = 0
		for (j = 1; j <= k; j++)
			if (abs(dr[j] - R[fr, t]) <= rtol && abs(dv[j] - V[fr, t]) <= vtol && abs(da[j] - A[fr, t]) <= atol)
				hit = 1
		if (hit) found++
		else if (!missed++) first = sprintf("target %d of recording frame %d (%g m, %g m/s, %g deg) missing in: %s", t, fr, R[fr, t], V[fr, t], A[fr, t], substr($0, 1, 200))
	}
	if (checked == 1 || R[fr, 1] < r_min) r_min = R[fr, 1]
	if (checked == 1 || R[fr, 1] > r_max) r_max = R[fr, 1]
}
END {
	if (bad) exit 1
	printf "frames=%d targets=%d found=%d missed=%d moved=%.2f\n", checked, targets, found + 0, missed + 0, r_max - r_min
	if (missed) print first
	exit (checked > 0 && missed == 0) ? 0 : 1
}
