"""Where the slow frames of a `radar-dsp bench --samples` report are: for the
back-to-back and the paced end-to-end runs (whole frames and chunk-streamed), how many frames exceed the
threshold (default 150 us), in how many separate stretches (slow frames
less than GAP frames apart count as one), the longest stretch, and the
p99.9 with and without the stretches' frames. Usage: tail.py report.json [threshold_us]"""
import json
import sys

GAP = 50


def p999(v):
    v = sorted(v)
    if not v:
        return float("nan")
    k = max(1, min(len(v), -(-999 * len(v) // 1000)))
    return v[k - 1]


def stretches(samples, thr):
    slow = [i for i, t in enumerate(samples) if t > thr]
    runs = []
    for i in slow:
        if runs and i - runs[-1][1] < GAP:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return slow, runs


r = json.load(open(sys.argv[1]))
thr = float(sys.argv[2]) if len(sys.argv) > 2 else 150.0
period = f"one frame every {r.get('period_us') or 0:.0f} us"
for key, label in [("end_to_end_samples_us", "back to back"),
                   ("end_to_end_paced_samples_us", period),
                   ("end_to_end_streamed_samples_us", "chunk-streamed"),
                   ("end_to_end_streamed_paced_samples_us", f"chunk-streamed, {period}")]:
    s = r.get(key)
    if not s:
        continue
    slow, runs = stretches(s, thr)
    inside = {i for a, b in runs for i in range(a, b + 1)}
    rest = [t for i, t in enumerate(s) if i not in inside]
    longest = max((b - a + 1 for a, b in runs), default=0)
    where = ", ".join(f"{a}-{b}" for a, b in runs[:8]) + (" ..." if len(runs) > 8 else "")
    print(f"{label:<28} n={len(s)} over {thr:.0f} us: {len(slow)} frames in {len(runs)} stretch(es)"
          f" (longest spans {longest} frames: {where or '-'}); p99.9 {p999(s):.1f} us, "
          f"outside the stretches {p999(rest):.1f} us")
