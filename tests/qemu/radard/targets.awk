# Checks radard's frame lines (--print-every 1) against a scene file's
# targets: each target must be reported in every frame line, within the
# tolerances (metres, m/s, degrees; defaults: half a range bin, half a
# velocity bin and 3 degrees of the small geometry in radard.toml).
#
#   awk -f targets.awk -v scene=scene-a.toml [-v rtol=1.0 -v vtol=2.0 -v atol=3.0] LOG
#
# Prints "frames=N targets=T found=F missed=M" and one line per target that
# was missed at least once ("missed target i (r m, v m/s, a deg) in K frames,
# first in: LINE"); exits 1 unless every target was found in every frame and
# there was at least one frame. Runs on busybox awk (the QEMU guest).
function value(line,    parts) {
	split(line, parts, "=")
	gsub(/[ \t"]/, "", parts[2])
	return parts[2] + 0
}
BEGIN {
	if (rtol == "") rtol = 1.0
	if (vtol == "") vtol = 2.0
	if (atol == "") atol = 3.0
	n = 0
	while ((getline line < scene) > 0) {
		sub(/#.*/, "", line)
		if (line ~ /^[ \t]*\[\[target\]\]/) n++
		else if (n > 0 && line ~ /^[ \t]*range_m[ \t]*=/) R[n] = value(line)
		else if (n > 0 && line ~ /^[ \t]*velocity_mps[ \t]*=/) V[n] = value(line)
		else if (n > 0 && line ~ /^[ \t]*azimuth_deg[ \t]*=/) A[n] = value(line)
	}
	if (n == 0) { print "no targets in " scene; bad = 1; exit 1 }
}
function abs(x) { return x < 0 ? -x : x }
/^frame seq=/ {
	frames++
	# The detections shown: [R m V m/s A deg S dB]
	k = 0
	rest = $0
	while (match(rest, /\[[-+0-9.]+m [-+0-9.]+m\/s [-+0-9.]+deg/)) {
		d = substr(rest, RSTART + 1, RLENGTH - 1)
		rest = substr(rest, RSTART + RLENGTH)
		gsub(/m\/s|deg|m|\+/, "", d)
		split(d, f, " ")
		k++
		dr[k] = f[1] + 0; dv[k] = f[2] + 0; da[k] = f[3] + 0
	}
	for (t = 1; t <= n; t++) {
		hit = 0
		for (j = 1; j <= k; j++)
			if (abs(dr[j] - R[t]) <= rtol && abs(dv[j] - V[t]) <= vtol && abs(da[j] - A[t]) <= atol)
				hit = 1
		if (hit) found++
		else {
			missed[t]++
			if (!(t in first)) first[t] = $0
		}
	}
}
END {
	if (bad) exit 1
	total = 0
	for (t = 1; t <= n; t++) total += missed[t]
	printf "frames=%d targets=%d found=%d missed=%d\n", frames, n, found + 0, total
	for (t = 1; t <= n; t++)
		if (missed[t])
			printf "missed target %d (%g m, %g m/s, %g deg) in %d frames, first in: %s\n", t, R[t], V[t], A[t], missed[t], substr(first[t], 1, 200)
	exit (frames > 0 && total == 0) ? 0 : 1
}
