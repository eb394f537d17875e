"""One line per kernel from an `ncu --metrics ...` log: name, grid, block,
GPU time, DRAM read/write and L2 traffic (run.sh's NCU=1 step)."""
import re
import sys

SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9,
         "us": 1, "ns": 1e-3, "ms": 1e3,
         "usecond": 1, "nsecond": 1e-3, "msecond": 1e3}
rows, cur = [], None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"^  (\S.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\)", line)
    if m:
        name = re.sub(r"^void ", "", m.group(1))
        name = re.sub(r"\(kernel_arguments_t.*", "", name)[:40]
        cur = {"name": name,
               "grid": "x".join(m.group(i) for i in (2, 3)),
               "block": "x".join(m.group(i) for i in (5, 6))}
        rows.append(cur)
        continue
    m = re.match(r"^\s+(\S+)\s+(\S+)\s+([\d.,]+)\s*$", line)
    if m and cur is not None:
        cur[m.group(1)] = float(m.group(3).replace(",", "")) * SCALE.get(m.group(2), 1)
nan = float("nan")
for r in rows:
    mb = lambda k: r.get(k, nan) / 1e6
    print(f'{r["name"]:<40} {r["grid"]:>9} {r["block"]:>6} '
          f'{r.get("gpu__time_duration.sum", nan):8.2f} us  '
          f'dram rd {mb("dram__bytes_read.sum"):6.2f} wr {mb("dram__bytes_write.sum"):6.2f} MB  '
          f'L2 {mb("lts__t_bytes.sum"):6.2f} MB')
