#!/usr/bin/env python3
"""Checks a radard log (--print-every 1) for the built-in scene's targets.

Usage: radard_targets.py LOG FRAMES

The built-in scene (app/radard/src/setup.rs) has four targets (range m,
velocity m/s, azimuth deg). Each must be reported, within half a range bin,
a velocity bin and 2 degrees, in every one of the FRAMES frame lines.
Prints one line per target and exits 1 when any is missed.
"""
import re
import sys

TARGETS = [(18.0, 4.5, -20.0), (42.5, -11.0, 8.0), (77.0, 0.8, 35.0), (103.0, 21.0, -45.0)]
DETECTION = re.compile(r"\[([-+\d.]+)m ([-+\d.]+)m/s ([-+\d.]+)deg")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    log, want = sys.argv[1], int(sys.argv[2])
    frames = 0
    hits = [0] * len(TARGETS)
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith("frame "):
                continue
            frames += 1
            dets = [tuple(map(float, d)) for d in DETECTION.findall(line)]
            for i, (r, v, a) in enumerate(TARGETS):
                if any(abs(x - r) < 0.5 and abs(y - v) < 0.25 and abs(z - a) < 2 for x, y, z in dets):
                    hits[i] += 1
    ok = frames == want
    print(f"{'PASS' if ok else 'FAIL'}: {frames} frame lines (want {want})")
    for (r, v, a), n in zip(TARGETS, hits):
        good = n == want
        ok = ok and good
        print(f"{'PASS' if good else 'FAIL'}: target at {r} m, {v} m/s, {a} deg reported in {n}/{want} frames")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
