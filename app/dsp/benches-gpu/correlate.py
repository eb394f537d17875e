"""Line the per-frame times of a `radar-dsp bench --samples` report up with
an nvidia-smi log taken during the run (run.sh SMI_MS=...): for each
nvidia-smi sample inside a timed loop, the slowest frame within half a
sampling interval of it; then the GPU state (SM clock, PCIe link, clock
event reasons; run.sh's field order) while frames were slow (> threshold) against while they
were not. Usage: correlate.py report.json smi.csv [threshold_us]"""
import bisect
import csv
import datetime
import json
import sys
from collections import Counter

r = json.load(open(sys.argv[1]))
thr = float(sys.argv[3]) if len(sys.argv) > 3 else 150.0
rows = []
with open(sys.argv[2]) as f:
    for row in csv.reader(f):
        row = [c.strip() for c in row]
        try:
            t = datetime.datetime.strptime(row[0], "%Y/%m/%d %H:%M:%S.%f")
        except (ValueError, IndexError):
            continue
        rows.append((t.replace(tzinfo=datetime.timezone.utc).timestamp(), row[1:]))
if len(rows) < 2:
    sys.exit("no nvidia-smi samples")
half = (rows[-1][0] - rows[0][0]) / (len(rows) - 1) / 2

for key, start_key, label in [
    ("end_to_end_samples_us", "end_to_end_started_unix_s", "back to back"),
    ("end_to_end_paced_samples_us", "end_to_end_paced_started_unix_s", "paced"),
]:
    s, t0 = r.get(key), r.get(start_key)
    if not s or not t0:
        continue
    if key.startswith("end_to_end_paced"):
        period = r["period_us"] * 1e-6
        times = [t0 + k * period for k in range(len(s))]
    else:
        times, acc = [], t0
        for us in s:
            times.append(acc)
            acc += us * 1e-6
    slow_state, fast_state = Counter(), Counter()
    for ts, fields in rows:
        a = bisect.bisect_left(times, ts - half)
        b = bisect.bisect_right(times, ts + half)
        if a >= b:
            continue
        worst = max(s[a:b])
        # power and load (the last two) vary too finely to key on
        (slow_state if worst > thr else fast_state)[" ".join(fields[:-2])] += 1
    for name, c in [("slow", slow_state), ("not slow", fast_state)]:
        top = ", ".join(f"[{k}] x{n}" for k, n in c.most_common(6))
        print(f"{label}, {name}: {sum(c.values())} samples: {top}")
