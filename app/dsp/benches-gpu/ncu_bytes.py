"""Bytes a frame moves, per kernel and in all, from `ncu --csv --page raw
--print-units base` over `radar-dsp profile --frames N` (trigger-run.sh).

Per kernel: GPU time; the bytes the SMs read from and wrote to the L2
(lts__t_sectors_srcunit_tex_op_read/write x 32: the traffic a device whose
L2 keeps nothing between kernels moves to and from DRAM, Orin's 4 MB L2
being too small for the frame's intermediates); and, with ncu's caches
flushed before each kernel (--cache-control all), the DRAM bytes read.
Usage: ncu_bytes.py NCU_CSV FRAMES [JSON_OUT]"""
import csv
import json
import sys

path, frames = sys.argv[1], int(sys.argv[2])
rows = []
with open(path, errors="replace") as f:
    lines = [l for l in f if l.startswith('"')]
reader = csv.DictReader(lines)
for r in reader:
    try:
        float(r.get("gpu__time_duration.sum", "x").replace(",", ""))
    except ValueError:
        continue  # the units row
    rows.append(r)


def num(r, k):
    v = r.get(k, "")
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return float("nan")


kernels = []
for r in rows:
    name = r.get("Kernel Name", "?")
    name = name.replace("void ", "").split("(")[0][:44]
    rd = num(r, "lts__t_sectors_srcunit_tex_op_read.sum") * 32
    wr = num(r, "lts__t_sectors_srcunit_tex_op_write.sum") * 32
    kernels.append({
        "name": name,
        "grid": r.get("Grid Size", ""),
        "block": r.get("Block Size", ""),
        "time_us": num(r, "gpu__time_duration.sum") / 1e3,
        "sm_l2_read_bytes": rd,
        "sm_l2_write_bytes": wr,
        "dram_read_bytes_flushed": num(r, "dram__bytes_read.sum"),
        "dram_write_bytes": num(r, "dram__bytes_write.sum"),
    })
per = len(kernels) // max(frames, 1)
frame = kernels[:per] if per else []
MiB = 1 << 20
print(f"{'kernel (one frame)':<44} {'grid':>12} {'block':>10} {'us':>7} {'SM<-L2 MiB':>10} {'SM->L2 MiB':>10} {'DRAM rd MiB':>11}")
for k in frame:
    print(f"{k['name']:<44} {k['grid']:>12} {k['block']:>10} {k['time_us']:7.2f} "
          f"{k['sm_l2_read_bytes'] / MiB:10.3f} {k['sm_l2_write_bytes'] / MiB:10.3f} {k['dram_read_bytes_flushed'] / MiB:11.3f}")
tot = lambda key: sum(k[key] for k in kernels) / max(frames, 1)
summary = {
    "frames": frames,
    "kernels_per_frame": per,
    "gpu_time_us_per_frame_sum_of_kernels": tot("time_us"),
    "sm_l2_read_mib_per_frame": tot("sm_l2_read_bytes") / MiB,
    "sm_l2_write_mib_per_frame": tot("sm_l2_write_bytes") / MiB,
    "sm_l2_mib_per_frame": (tot("sm_l2_read_bytes") + tot("sm_l2_write_bytes")) / MiB,
    "dram_read_mib_per_frame_flushed": tot("dram_read_bytes_flushed") / MiB,
    "orin_roofline_us": (tot("sm_l2_read_bytes") + tot("sm_l2_write_bytes")) / 204.8e9 * 1e6,
    "kernels": frame,
}
print(f"per frame ({per} kernels, mean of {frames} frames): SM<->L2 {summary['sm_l2_mib_per_frame']:.2f} MiB "
      f"(read {summary['sm_l2_read_mib_per_frame']:.2f}, write {summary['sm_l2_write_mib_per_frame']:.2f}); "
      f"DRAM read with caches flushed {summary['dram_read_mib_per_frame_flushed']:.2f} MiB; "
      f"sum of kernel times {summary['gpu_time_us_per_frame_sum_of_kernels']:.1f} us (ncu, each kernel alone); "
      f"Orin roofline {summary['orin_roofline_us']:.0f} us at 204.8 GB/s")
if len(sys.argv) > 3:
    with open(sys.argv[3], "w") as f:
        json.dump(summary, f, indent=1)
