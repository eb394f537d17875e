#!/usr/bin/env python3
"""Records a diagnostics session for docs/diagnostics.md: radard on the
simulator (CPU backend) with its diagnostics link on a pseudo-terminal,
joined to a second one as a null-modem cable joins two UARTs; then every
radarctl command, the text console typed byte by byte, and a snapshot PNG.
Prints the session as Markdown.

    cargo build --release -p radard -p radarctl
    python3 scripts/diag-session.py [--png docs/diagnostics-snapshot.png] > session.md
"""

import argparse
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import tty
import fcntl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release")

# A noise-heavy scene with two known targets, 20 ms frames (as the tests').
SCENE = """noise_rms_lsb = 96.0
[[target]]
range_m = 30.0
velocity_mps = 12.0
azimuth_deg = 10.0
snr_db = -6.0
[[target]]
range_m = 80.0
velocity_mps = -20.0
azimuth_deg = -25.0
snr_db = -6.0
"""

CONFIG = """[source]
slots = 4
chunk_period_us = 5000
scene_frames = 4
scene_file = "{scene}"
[backend]
kind = "cpu"
[geometry]
n_tx = 2
n_rx = 4
n_loops = 32
n_samples = 64
chunks_per_frame = 4
[cfar]
train_doppler = 2
train_range = 4
[rt]
priority = 0
lock_memory = false
[output]
print_every = 0
[loop]
power_map_every = 5
[health]
good_frames = 200
state_file = "{health}"
[diag]
port = "{port}"
baud = 115200
"""


def open_pty():
    master, slave = os.openpty()
    tty.setraw(slave)
    return master, slave, os.ttyname(slave)


def relay(a, b, stop):
    while not stop.is_set():
        r, _, _ = select.select([a, b], [], [], 0.05)
        for fd in r:
            try:
                data = os.read(fd, 4096)
            except OSError:
                continue
            os.write(b if fd == a else a, data)


def radarctl(port, *args, timeout=5):
    cmd = [os.path.join(BIN, "radarctl"), "--port", port, "--timeout", str(timeout), *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def show(port, *args):
    code, out, err = radarctl(port, *args)
    text = (out + err).replace(port, "/dev/ttyUSB0")
    shown = " ".join(a if a != port else "/dev/ttyUSB0" for a in args)
    print("```text")
    print(f"$ radarctl {shown}")
    print(text.rstrip("\n"))
    if code != 0:
        print(f"$ echo $?\n{code}")
    print("```\n")
    return code, out


def render(screen_bytes, rows, cols):
    """Enough of a VT100 to read ratatui's output: cursor moves, text, erase."""
    grid = [[" "] * cols for _ in range(rows)]
    r = c = 0
    text = screen_bytes.decode("utf-8", "replace")
    i = 0
    csi = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
    while i < len(text):
        m = csi.match(text, i)
        if m:
            args, op = m.group(1), m.group(2)
            nums = [int(x) if x.isdigit() else 0 for x in args.replace("?", "").split(";")] if args else []
            if op == "H":
                r = (nums[0] if nums and nums[0] else 1) - 1
                c = (nums[1] if len(nums) > 1 and nums[1] else 1) - 1
            elif op == "J" and (nums[:1] == [2] or args == "2"):
                grid = [[" "] * cols for _ in range(rows)]
            i = m.end()
            continue
        ch = text[i]
        i += 1
        if ch == "\x1b":
            continue
        if ch == "\r":
            c = 0
        elif ch == "\n":
            r += 1
        elif ch >= " " and 0 <= r < rows and 0 <= c < cols:
            grid[r][c] = ch
            c += 1
    return "\n".join("".join(row).rstrip() for row in grid).rstrip()


def top_screen(port, rows=34, cols=100):
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    p = subprocess.Popen(
        [os.path.join(BIN, "radarctl"), "--port", port, "top", "--period-ms", "500", "--frames", "4"],
        stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "TERM": "xterm"},
    )
    os.close(slave)
    got = b""
    last_screen = b""
    while True:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            got += data
        elif p.poll() is not None:
            break
    p.wait()
    os.close(master)
    # The last full frame drawn before the alternate screen was left.
    leave = got.rfind(b"\x1b[?1049l")
    body = got[:leave] if leave > 0 else got
    return render(body, rows, cols)


def console(slave_path, lines):
    fd = os.open(slave_path, os.O_RDWR | os.O_NOCTTY)
    tty.setraw(fd)
    out = []
    for line in lines:
        for ch in line.encode() + b"\r":
            os.write(fd, bytes([ch]))
            time.sleep(0.03)
        got = b""
        deadline = time.time() + 5
        while time.time() < deadline and not got.endswith(b"radar:/> "):
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                got += os.read(fd, 4096)
        out.append(got.decode("ascii", "replace"))
    os.close(fd)
    return "radar:/> " + "".join(out).replace("\r\n", "\n").replace("\r", "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--png", default=os.path.join(tempfile.gettempdir(), "diag-session.png"))
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="diag-session-")
    ma, sa, pa = open_pty()
    mb, sb, pb = open_pty()
    stop = threading.Event()
    t = threading.Thread(target=relay, args=(ma, mb, stop), daemon=True)
    t.start()
    with open(os.path.join(work, "scene.toml"), "w") as f:
        f.write(SCENE)
    cfg = os.path.join(work, "radard.toml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(scene=os.path.join(work, "scene.toml"), health=os.path.join(work, "health"), port=pa))
    log = open(os.path.join(work, "radard.log"), "w")
    rd = subprocess.Popen([os.path.join(BIN, "radard"), "--no-rt", "--config", cfg], stdout=log, stderr=log)
    try:
        deadline = time.time() + 60
        while True:
            code, out, _ = radarctl(pb, "--json", "status")
            if code == 0 and '"frames"' in out:
                import json
                s = json.loads(out)
                if s["frames"] > 250 and s["frame_rate_hz"] > 0:
                    break
            if time.time() > deadline:
                sys.exit("radard did not come up: " + open(os.path.join(work, "radard.log")).read())
            time.sleep(0.3)
        print("<!-- recorded by scripts/diag-session.py -->\n")
        show(pb, "ping")
        show(pb, "identity")
        show(pb, "status")
        show(pb, "stats")
        show(pb, "params")
        show(pb, "get", "cfar.pfa")
        show(pb, "set", "cfar.pfa", "1e-3")
        time.sleep(0.5)
        show(pb, "status")
        show(pb, "set", "cfar.pfa", "0.5")
        show(pb, "set", "cfar.train_range", "8")
        show(pb, "set", "cfar.pfa", "1e-6")
        show(pb, "log", "-n", "6")
        show(pb, "snapshot", "--png", a.png)
        show(pb, "--json", "identity")
        print("```text\n$ radarctl top    # last screen of `top --frames 4`, 100x34 terminal")
        print(top_screen(pb))
        print("```\n")
        print("```text\n$ radarctl --port /dev/ttyNOSUCH7 status")
        code, out, err = radarctl("/dev/ttyNOSUCH7", "status")
        print((out + err).rstrip())
        print(f"$ echo $?\n{code}\n```\n")
        print("```text\n$ radarctl --timeout 0.5 status    # a line nobody answers on")
        _, _, quiet = open_pty()
        code, out, err = radarctl(quiet, "status", timeout=0.5)
        print((out + err).replace(quiet, "/dev/ttyUSB0").rstrip())
        print(f"$ echo $?\n{code}\n```\n")
        show(pb, "--claim-protocol", "9", "status")
        print("Text console (picocom on the same port), typed byte by byte:\n")
        print("```text")
        print(console(pb, ["help", "status", "get cfar.pfa", "set cfar.pfa 2", "frobnicate"]).rstrip())
        print("```")
    finally:
        rd.terminate()
        rd.wait(timeout=10)
        stop.set()


if __name__ == "__main__":
    main()
