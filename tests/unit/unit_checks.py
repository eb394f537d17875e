#!/usr/bin/env python3
"""The unit test's checks, run from the host against the booted guest
(tests/unit/run.sh boots it; tests/unit/README.md lists the checks).

The host reaches the guest three ways, none of them through radard:
  - a root shell on the guest's virtio console hvc0 (a unix socket here,
    guest/radar-unit-shell.service there) for systemctl, journalctl, kill;
  - the pty that QEMU gives for the guest's second serial port, the
    header UART (/dev/ttyTHS0 in the guest), for radarctl and the text
    console;
  - UDP on 127.0.0.1:PORT, where QEMU's user-mode network delivers what the
    guest sends to 10.0.2.2:PORT.

Every check is written to --results as one line
    check <name> PASS|FAIL|NOT-RUN <what it measured>
and echoed on stdout. A check NOT-RUN is one whose subject the unit's
configuration does not have (e.g. no [diag] port): the reason names it.
Exit status: 0 all ran checks passed (and none NOT-RUN, unless
--allow-pending); 1 otherwise.
"""
import argparse
import json
import math
import os
import re
import select
import shutil
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import tomllib
import tty

T0 = time.monotonic()


def now():
    return time.monotonic() - T0


def say(msg):
    print(f"[{now():6.1f} s] {msg}", flush=True)


class Shell:
    """The guest's root shell on a serial port (unix socket of QEMU's chardev)."""

    def __init__(self, path, qemu_alive):
        self.path = path
        self.qemu_alive = qemu_alive
        self.sock = None
        self.buf = b""
        self.seq = 0

    def connect(self, deadline):
        while self.sock is None:
            if not self.qemu_alive():
                raise RuntimeError("QEMU exited before the guest's shell came up")
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self.path)
                self.sock = s
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no QEMU chardev socket {self.path}")
                time.sleep(0.5)

    def _send(self, text):
        self.sock.sendall(text.encode())

    def _wait_marker(self, token, timeout):
        pat = re.compile(rb"@@done " + token.encode() + rb" (\d+)\n")
        end = time.monotonic() + timeout
        while True:
            m = pat.search(self.buf)
            if m:
                out = self.buf[: m.start()]
                self.buf = self.buf[m.end():]
                return int(m.group(1)), out.decode(errors="replace")
            left = end - time.monotonic()
            if left <= 0:
                return None, self.buf.decode(errors="replace")
            r, _, _ = select.select([self.sock], [], [], min(left, 1.0))
            if r:
                data = self.sock.recv(65536)
                if not data:
                    raise RuntimeError("the guest's shell socket closed")
                self.buf += data
            elif not self.qemu_alive():
                raise RuntimeError("QEMU exited")

    def _token(self):
        self.seq += 1
        return f"t{os.getpid()}x{self.seq}"

    def wait_up(self, timeout):
        """Until the shell answers (the guest has booted that far)."""
        end = time.monotonic() + timeout
        self.connect(end)
        while time.monotonic() < end:
            token = self._token()
            # The marker is printed by printf, so a command echoed before
            # the shell turned echo off cannot match it.
            self._send(f"\nprintf '@@%s %s %s\\n' done {token} 0\n")
            rc, _ = self._wait_marker(token, 3)
            if rc is not None:
                self.buf = b""
                return True
        return False

    def run(self, cmd, timeout=30):
        """(exit status, output) of CMD run by bash in the guest, killed
        after TIMEOUT s (status 124 then); (None, output) if the shell
        itself did not answer."""
        token = self._token()
        q = "'" + cmd.replace("'", "'\\''") + "'"
        self._send(
            f"timeout -k 5 {int(timeout)} bash -c {q} </dev/null 2>&1; printf '@@%s %s %s\\n' done {token} $?\n"
        )
        return self._wait_marker(token, timeout + 15)

    def out(self, cmd, timeout=30):
        rc, out = self.run(cmd, timeout)
        return out.strip() if rc == 0 else None


class UdpCapture(threading.Thread):
    """Every datagram that reaches 127.0.0.1:PORT, with its arrival time."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", port))
        self.sock.settimeout(0.5)
        self.port = port
        self.datagrams = []
        self.lock = threading.Lock()
        self.stop = False

    def run(self):
        while not self.stop:
            try:
                data, src = self.sock.recvfrom(65536)
            except socket.timeout:
                continue
            with self.lock:
                self.datagrams.append((time.time(), src, data))

    def count(self):
        with self.lock:
            return len(self.datagrams)

    def since(self, n):
        with self.lock:
            return list(self.datagrams[n:])


def write_pcap(path, datagrams, port):
    """The datagrams as a pcap (raw IPv4), for tshark."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))  # LINKTYPE_RAW
        for t, src, data in datagrams:
            udp = struct.pack("!HHHH", 40000, port, 8 + len(data), 0) + data
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                             socket.inet_aton("10.0.2.15"), socket.inet_aton("10.0.2.2"))
            pkt = ip + udp
            f.write(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(pkt), len(pkt)))
            f.write(pkt)


class Checks:
    def __init__(self, args):
        self.args = args
        self.results = []
        self.res_file = open(args.results, "w")

    def record(self, name, status, detail):
        detail = " ".join(str(detail).split())
        self.results.append((name, status, detail))
        line = f"check {name} {status} {detail}"
        self.res_file.write(line + "\n")
        self.res_file.flush()
        say(line)

    def ok(self, name, cond, detail):
        self.record(name, "PASS" if cond else "FAIL", detail)
        return cond

    def not_run(self, name, why):
        self.record(name, "NOT-RUN", why)


def props(shell, unit, names):
    out = shell.out(f"systemctl show -p {','.join(names)} {unit}") or ""
    d = {}
    for line in out.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            d[k] = v
    return d


def usec(v):
    """systemd's time span ('2s', '100ms', '1min 30s') in seconds."""
    total = 0.0
    for num, unit in re.findall(r"([\d.]+)\s*(us|ms|min|s|h)?", v or ""):
        total += float(num) * {"us": 1e-6, "ms": 1e-3, "s": 1, "min": 60, "h": 3600, "": 1}[unit or ""]
    return total


def status_line(shell, pid=None):
    """radard's newest status line in the journal (optionally of PID)."""
    sel = f"_PID={pid}" if pid else "-u radard.service"
    out = shell.out(f"journalctl -b {sel} -o cat --no-pager -n 400 | grep '^status frames=' | tail -n 1") or ""
    return out.strip()


def sink_counts(line):
    """{sink name: (sent, errors)} from a status line."""
    return {
        m.group(2): (int(m.group(3)), int(m.group(5)))
        for m in re.finditer(r"sink\[(\d+)\]\(([^)]*)\)(?: DOWN)? sent=(\d+) queue_full=(\d+) errors=(\d+)", line)
    }


def frames_of(line):
    m = re.search(r"status frames=(\d+)", line)
    return int(m.group(1)) if m else None


def wait_active(shell, timeout):
    end = time.monotonic() + timeout
    p = {}
    while time.monotonic() < end:
        p = props(shell, "radard", ["ActiveState", "SubState", "MainPID", "NRestarts", "StatusText", "Result"])
        if p.get("ActiveState") == "active" and p.get("MainPID", "0") != "0":
            return True, p
        time.sleep(1)
    return False, p


def pty_of(stderr_path, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            text = open(stderr_path).read()
        except OSError:
            text = ""
        m = re.search(r"char device redirected to (/dev/pts/\d+) \(label uart\)", text)
        if m:
            return m.group(1)
        time.sleep(0.5)
    return None


def console_command(pty, line, timeout=15):
    """The text console's answer to LINE on the header UART's pty."""
    fd = os.open(pty, os.O_RDWR | os.O_NOCTTY)
    try:
        tty.setraw(fd)
        attrs = termios.tcgetattr(fd)
        attrs[4] = attrs[5] = termios.B115200
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        termios.tcflush(fd, termios.TCIFLUSH)
        os.write(fd, line.encode() + b"\r")
        buf = b""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            r, _, _ = select.select([fd], [], [], 0.5)
            if r:
                buf += os.read(fd, 4096)
                if re.search(rb"\nDone\r?\n|\nError [^\n]*\n", buf):
                    break
        return buf.decode(errors="replace")
    finally:
        os.close(fd)


# --- ASTERIX -------------------------------------------------------------------------


def sin_of(deg):
    return math.sin(math.radians(deg))


# --- the checks ----------------------------------------------------------------------


def b_link_checks(c, args, pty, diag, link):
    """b. radarctl and the text console on the header UART's pty."""
    p = subprocess.run([args.radarctl, "--port", pty, "--timeout", "10", "status"], capture_output=True,
                       text=True, timeout=60)
    c.ok("b-radarctl-status", p.returncode == 0 and "frames" in p.stdout.lower(),
         f"radarctl --port {pty} status: exit {p.returncode}: {(p.stdout + p.stderr)[:400]} "
         f"(guest {diag} -> {link}, a udev rule of the test)")
    ans = console_command(pty, "status")
    c.ok("b-console-status", "Done" in ans and "frames" in ans.lower(),
         f"text console 'status' on {pty}: {ans.strip()[:400]!r}")
    # radard in its sandbox reads the card's clock (DeviceAllow=char-ptp r,
    # group radar) and the system clock's state (adjtimex allowed):
    # no PTP network here, so the card runs free.
    p = subprocess.run([args.radarctl, "--port", pty, "--timeout", "10", "--json", "time"],
                       capture_output=True, text=True, timeout=60)
    try:
        t = json.loads(p.stdout)
    except ValueError:
        t = {}
    c.ok("b-radarctl-time", p.returncode == 0 and t.get("source") == "card-clock" and
         str(t.get("clock", "")).startswith("/dev/ptp") and t.get("read_errors") == 0 and
         t.get("system_synchronised") is not None and t.get("quality") == "FreeRunning" and
         t.get("offset_ns") is not None,
         f"radarctl time: exit {p.returncode}: {(p.stdout + p.stderr)[:400]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shell", required=True)
    ap.add_argument("--qemu-output", required=True)
    ap.add_argument("--qemu-pid", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--radarctl", required=True)
    ap.add_argument("--board", required=True)
    ap.add_argument("--kernel-version", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--console", required=True)
    ap.add_argument("--journal", required=True)
    ap.add_argument("--allow-pending", action="store_true")
    ap.add_argument("--asterix-python", default="")
    ap.add_argument("--truth", default="")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    eff = cfg["effective"]
    c = Checks(args)

    def qemu_alive():
        try:
            os.kill(args.qemu_pid, 0)
            return True
        except OSError:
            return False

    udp = UdpCapture(args.port)
    udp.start()
    shell = Shell(args.shell, qemu_alive)
    say(f"waiting for the guest (radard config: {cfg['mode']}, content {cfg['content']})")
    try:
        up = shell.wait_up(420)
    except RuntimeError as e:
        up = False
        say(str(e))
    if not up:
        try:
            say("QEMU said: " + open(args.qemu_output).read()[-1500:])
        except OSError:
            pass
    if not c.ok("boot", up, f"the guest's shell answered after {now():.0f} s" if up else "no shell from the guest"):
        return finish(c, args, None)
    try:
        run_checks(c, args, cfg, eff, shell, udp)
    except RuntimeError as e:
        c.record("harness", "FAIL", f"lost the guest: {e}")
    return finish(c, args, shell)


def run_checks(c, args, cfg, eff, shell, udp):
    board = args.board
    say("guest: " + (shell.out("uname -r; cat /etc/debian_version; readlink /proc/1/exe") or "?").replace("\n", ", "))
    # The stage init runs before systemd and journald: its word is on the console.
    try:
        stage = next((ln.strip() for ln in open(args.console, errors="replace") if ln.startswith("radar-unit-stage:")),
                     "no word from the stage init")
    except OSError:
        stage = "no console log"

    # --- the unit as installed -------------------------------------------------------
    pid1 = shell.out("readlink /proc/1/exe") or ""
    c.ok("boot-systemd-pid1", pid1.endswith("/systemd") and "are installed" in stage, f"PID 1 is {pid1}; {stage}")
    mods = shell.out("cat /proc/modules") or ""
    fp = re.search(r"^fpga_p2p \d+ \d+ .*$", mods, re.M)
    nv = re.search(r"^nvidia_p2p \d+ \d+ (\S+)", mods, re.M)
    # udev may load fpga_p2p first, for the card's PCI alias (as on the
    # unit); systemd-modules-load then finds it loaded. Either way it must
    # have run, with the recipe's modules-load.d file, and succeeded.
    ml = props(shell, "systemd-modules-load", ["ActiveState", "Result"])
    conf = shell.out("cat /etc/modules-load.d/fpga_p2p.conf") or ""
    mlj = shell.out("journalctl -b -u systemd-modules-load.service -o cat --no-pager | tail -n 3") or ""
    c.ok("boot-modules-load", bool(fp and nv and "fpga_p2p" in nv.group(1)) and conf == "fpga_p2p"
         and ml.get("ActiveState") == "active" and ml.get("Result") == "success",
         f"fpga_p2p loaded: {bool(fp)}; nvidia_p2p used by: {nv.group(1) if nv else 'not loaded'}; "
         f"/etc/modules-load.d/fpga_p2p.conf: {conf!r}; systemd-modules-load {ml}: {mlj!r}")
    card = shell.out("for d in /sys/bus/pci/devices/*; do [ \"$(cat $d/vendor):$(cat $d/device)\" = 0x10ee:0x9038 ] && "
                     "echo ${d##*/} driver=$(basename $(readlink $d/driver)) iommu_group=$(basename $(readlink $d/iommu_group)); done; "
                     "dmesg | grep -m1 -o 'DMAR: Intel(R) Virtualization Technology for Directed I/O'") or ""
    c.ok("boot-card-iommu", "driver=fpga_p2p" in card and "iommu_group=" in card and "DMAR" in card,
         f"card 10ee:9038: {card}")
    node = shell.out("stat -c '%G %a %t:%T' /dev/fpga-p2p0") or "no /dev/fpga-p2p0"
    c.ok("boot-udev-rule", node.startswith("radar 660"), f"/dev/fpga-p2p0: {node} (60-fpga-p2p.rules: group radar, 0660)")
    # The card's clock: named after the card, linked and readable by radar
    # (the same rule), its device unit there for radar-phc2sys-card.service;
    # linuxptp's tools read it; the time units enabled as the preset says.
    ptp = shell.out("readlink /dev/fpga-ptp; stat -L -c '%G %a' /dev/fpga-ptp; "
                    "cat /sys/class/misc/fpga-p2p0/device/ptp/ptp*/clock_name; "
                    "systemctl show -p ActiveState --value 'dev-fpga\\x2dptp.device'; "
                    "phc_ctl /dev/fpga-ptp get 2>&1 | grep -m1 'clock time'") or ""
    en = shell.out("systemctl is-enabled radar-ptp4l radar-phc2sys-system radar-phc2sys-card "
                   "radar-ts2phc radar-phc2sys-gnss 2>&1 | tr '\\n' ' '") or ""
    c.ok("boot-ptp-clock", ptp.split()[1:3] == ["radar", "640"] and "fpga-p2p0" in ptp and
         "\nactive\n" in ptp and "clock time is" in ptp and en.split() == ["enabled"] * 3 + ["disabled"] * 2,
         f"/dev/fpga-ptp: {ptp.replace(chr(10), '; ')}; enabled: {en}")
    want = subprocess.run(["sha256sum", os.path.join(board, "systemd/radard.service")], capture_output=True,
                          text=True).stdout.split()[0]
    unit = props(shell, "radard", ["FragmentPath", "DropInPaths", "UnitFileState"])
    have = (shell.out(f"sha256sum {unit.get('FragmentPath', '/nonexistent')}") or "").split()
    c.ok("boot-unit-file", bool(have) and have[0] == want and unit.get("UnitFileState") == "enabled",
         f"{unit.get('FragmentPath')} {'is' if have and have[0] == want else 'is NOT'} the board's radard.service "
         f"(sha256 {want[:16]}), {unit.get('UnitFileState')}; drop-ins: {unit.get('DropInPaths') or 'none'}")
    pc = shell.out(" ".join(cfg["print_config"]), 60)
    try:
        gcfg = tomllib.loads(pc or "")
    except tomllib.TOMLDecodeError:
        gcfg = {}
    geo = gcfg.get("geometry", {})
    c.ok("boot-config", gcfg.get("backend", {}).get("kind") == "cpu" and
         all(geo.get(k) == v for k, v in eff.get("geometry", {}).items()),
         f"{' '.join(cfg['print_config'])} ({cfg['mode']}): backend {gcfg.get('backend', {}).get('kind')}, "
         f"geometry {geo}, sinks {[s.get('kind') + ':' + str(s.get('address', s.get('path', ''))) for s in gcfg.get('sink', [])] or 'none'}, "
         f"diag {gcfg.get('diag', {}).get('port', 'none')}")
    eff = gcfg or eff

    ok, p = wait_active(shell, 180)
    c.ok("radard-ready", ok and p.get("NRestarts") == "0",
         f"radard.service {p.get('ActiveState')}/{p.get('SubState')} (READY) at {now():.0f} s, "
         f"NRestarts={p.get('NRestarts')}, STATUS={p.get('StatusText')!r}")
    if not ok:
        say(shell.out("systemctl status radard --no-pager -n 30") or "")
    elif p.get("NRestarts") != "0":
        # Why systemd restarted it: its own lines about the unit, and radard's last words.
        say(shell.out("journalctl -b -u radard --no-pager -o short-monotonic | "
                      "grep -iE 'watchdog|exited|killed|failed|restart|timed out|error' | head -n 30") or "")

    # --- c. health verdict and radar-mark-good -----------------------------------------
    good_frames = eff.get("health", {}).get("good_frames")
    hf = eff.get("health", {}).get("state_file", "/run/radard/health")
    end = time.monotonic() + 180
    health = ""
    while time.monotonic() < end:
        health = shell.out(f"cat {hf} 2>/dev/null") or ""
        if "verdict=good" in health or props(shell, "radard", ["ActiveState"]).get("ActiveState") == "failed":
            break
        time.sleep(2)
    boot_id = shell.out("cat /proc/sys/kernel/random/boot_id") or "?"
    c.ok("c-health-verdict", "verdict=good" in health and f"boot_id={boot_id}" in health,
         f"{hf} at {now():.0f} s: {health.replace(chr(10), ' ') or 'absent'} (good_frames {good_frames}; this boot {boot_id})")
    end = time.monotonic() + 60
    mg = {}
    while time.monotonic() < end:
        mg = props(shell, "radar-mark-good", ["ActiveState", "Result", "ExecMainStatus"])
        if mg.get("ActiveState") in ("active", "failed"):
            break
        time.sleep(2)
    mgj = shell.out("journalctl -b -u radar-mark-good.service -o cat --no-pager | grep radar-mark-good: | tail -n 2") or ""
    calls = shell.out("cat /run/radar-unit/rauc-calls 2>/dev/null") or ""
    c.ok("c-mark-good", mg.get("ActiveState") == "active" and mg.get("Result") == "success" and
         "radard healthy in this boot" in mgj and "status mark-good" in calls,
         f"radar-mark-good.service {mg}; journal: {mgj!r}; rauc calls: {calls!r}")

    # --- b. the diagnostics link on the header UART -----------------------------------
    diag = eff.get("diag", {}).get("port")
    if not diag:
        c.not_run("b-radarctl-status", "the unit's radard.toml has no [diag] port (board radard.toml)")
        c.not_run("b-console-status", "the unit's radard.toml has no [diag] port (board radard.toml)")
    else:
        pty = pty_of(args.qemu_output)
        link = shell.out(f"readlink -f {diag}") or "?"
        if not pty:
            c.record("b-radarctl-status", "FAIL", "QEMU named no pty for the header UART")
        else:
            # The pty held open for the whole section: QEMU's pty backend
            # drops the guest's output while no one has the pty open, and
            # notices a new opener only on its next poll (up to a second),
            # so an answer written right after radarctl opened the pty could
            # be lost (radarctl then waited out its timeout). The holder
            # never reads. A real UART has no such gap.
            hold = os.open(pty, os.O_RDWR | os.O_NOCTTY)
            time.sleep(1.5)
            try:
                b_link_checks(c, args, pty, diag, link)
            finally:
                os.close(hold)

    # --- a. ASTERIX to the host's loopback ----------------------------------------------
    sinks = eff.get("sink", [])
    asterix = [s for s in sinks if s.get("kind") == "asterix"]
    if not asterix:
        for n in ("a-asterix-received", "a-asterix-tshark", "a-asterix-pypi", "a-asterix-targets"):
            c.not_run(n, "the unit's radard.toml has no asterix [[sink]] (board radard.toml)")
    else:
        check_asterix(c, args, cfg, eff, shell, udp)

    # --- g. exposure ------------------------------------------------------------------
    sec = shell.out("systemd-analyze security radard.service --no-pager 2>&1 | tail -n 1", 180) or ""
    m = re.search(r"Overall exposure level for radard.service: ([\d.]+)", sec)
    c.ok("g-security", bool(m) and float(m.group(1)) <= 3.0,
         f"systemd-analyze security in the guest: {sec.strip()!r} (at most 3.0)")

    # --- f. outputs failing -----------------------------------------------------------
    check_outputs_failing(c, shell, eff, udp)

    # --- d. stop and start ------------------------------------------------------------
    p = props(shell, "radard", ["MainPID"])
    pid = p.get("MainPID")
    t = time.monotonic()
    rc, out = shell.run("systemctl stop radard.service", 60)
    stop_s = time.monotonic() - t
    p = props(shell, "radard", ["ActiveState", "Result", "ExecMainCode", "ExecMainStatus"])
    summ = shell.out(f"journalctl -b _PID={pid} -o cat --no-pager | grep '^summary' | tail -n 3") or ""
    c.ok("d-stop", rc == 0 and p.get("ActiveState") == "inactive" and p.get("Result") == "success"
         and p.get("ExecMainStatus") == "0" and "summary" in summ,
         f"systemctl stop (pid {pid}) took {stop_s:.1f} s: {p}; journal: {summ!r}")
    t = time.monotonic()
    rc, out = shell.run("systemctl start radard.service", 120)
    start_s = time.monotonic() - t
    ok, p = wait_active(shell, 30)
    c.ok("d-start", rc == 0 and ok, f"systemctl start returned {rc} after {start_s:.1f} s (Type=notify: at READY): "
         f"{p.get('ActiveState')}/{p.get('SubState')}, STATUS={p.get('StatusText')!r}")

    # --- e. frozen: the watchdog ----------------------------------------------------------
    time.sleep(5)  # a few watchdog pings of the new process first
    p = props(shell, "radard", ["MainPID", "WatchdogUSec", "RestartUSec", "NRestarts"])
    wd, rs = usec(p.get("WatchdogUSec")), usec(p.get("RestartUSec"))
    pid = p.get("MainPID")
    script = (f"kill -STOP {pid}; t0=$(cut -d' ' -f1 /proc/uptime); n=0; "
              f"while [ $n -lt 600 ]; do m=$(systemctl show -p MainPID --value radard); "
              f"if [ \"$m\" != {pid} ] && [ \"$m\" != 0 ]; then break; fi; sleep 0.1; n=$((n+1)); done; "
              f"t1=$(cut -d' ' -f1 /proc/uptime); echo new_pid=$m t0=$t0 t1=$t1")
    out = shell.out(script, 90) or ""
    m = re.search(r"new_pid=(\d+) t0=([\d.]+) t1=([\d.]+)", out)
    took = float(m.group(3)) - float(m.group(2)) if m else None
    ok, p2 = wait_active(shell, 60)
    why = shell.out(f"journalctl -b -u radard.service -o cat --no-pager | grep -E 'Watchdog timeout|Killing process {pid} |result .watchdog' | tail -n 3") or ""
    limit = wd + rs
    # Polled every 0.1 s in the guest; TCG adds its own latency.
    c.ok("e-watchdog", bool(m) and m.group(1) != pid and took is not None and took <= limit + 1.0 and ok
         and "Watchdog timeout" in why,
         f"SIGSTOP to pid {pid}: new pid {m.group(1) if m else '?'} after {took if took is None else round(took, 2)} s "
         f"(WatchdogSec {wd:g} s + RestartSec {rs:g} s = {limit:g} s, +1 s polling margin), READY again: {ok}; "
         f"journal: {why!r}")


def check_asterix(c, args, cfg, eff, shell, udp):
    window = 20
    n0 = udp.count()
    t0 = time.time()
    time.sleep(window)
    got = udp.since(n0)
    t1 = time.time()
    c.ok("a-asterix-received", len(got) > 0,
         f"{len(got)} datagrams in {window} s on 127.0.0.1:{args.port} through QEMU's user-mode network "
         f"(the guest sends to {[r['now'] for r in cfg['redirected']]}, the unit's {[r['was'] for r in cfg['redirected']]})")
    names = ("a-asterix-tshark", "a-asterix-pypi", "a-asterix-targets")
    if not got:
        for n in names:
            c.not_run(n, "no datagrams")
        return
    pcap = os.path.join(os.path.dirname(args.results), "unit-asterix.pcap")
    write_pcap(pcap, got, args.port)
    if not args.asterix_python:
        for n in names:
            c.record(n, "FAIL", "no Python with asterix_decoder (run.sh makes its venv)")
        return
    p = subprocess.run([args.asterix_python, os.path.join(os.path.dirname(os.path.abspath(__file__)), "asterix_decode.py"),
                        pcap, str(args.port)], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        for n in names:
            c.record(n, "FAIL", f"asterix_decode.py: {p.stderr.strip()[-400:]}")
        return
    dec = json.loads(p.stdout)
    per = {}
    for name, key in (("tshark", "tshark"), ("asterix_decoder (PyPI)", "pypi")):
        recs = dec[key]
        bad = [(i, r) for i, r in enumerate(recs) if isinstance(r, str)]
        n = sum(len(r) for r in recs if not isinstance(r, str))
        per[key] = recs
        c.ok(f"a-asterix-{key}", len(recs) == len(got) and not bad and n > 0,
             f"{name} read {len(recs) - len(bad)}/{len(got)} datagrams, {n} CAT-010 target reports; "
             f"malformed: {bad[:3] or 'none'} ({pcap})")
    # The frames of the window, from the unit's JSONL (sequence, UTC time),
    # and the records of each frame by its Time of Day.
    jsonl = next((s.get("path") for s in eff.get("sink", []) if s.get("kind") == "jsonl"), None)
    lines = (shell.out(f"tail -n 600 {jsonl}", 60) or "") if jsonl else ""
    with open(os.path.join(os.path.dirname(args.results), "unit-detections.jsonl"), "w") as f:
        f.write(lines + "\n")
    by_tod = {}
    for recs in per["pypi"]:
        if isinstance(recs, str):
            continue
        for r in recs:
            by_tod.setdefault(round(r["tod"] * 128), []).append(r)
    # The frames of the capture window, in the unit's own time: between the
    # first and the last Time of Day captured, a second's margin inside each
    # end. (The host's clock would not do: the guest's starts from the RTC's
    # whole seconds, up to a second off the host's, and the unit's time is
    # the card's clock.) A window across midnight UTC falls back to the
    # host's clock with a margin of two seconds.
    tods = sorted(by_tod)
    across_midnight = not tods or tods[-1] - tods[0] > 43_200 * 128

    def in_window(f):
        if across_midnight:
            return t0 + 2 <= f["utc_ns"] / 1e9 <= t1 - 2
        tod = round(((f["utc_ns"] % 86_400_000_000_000) / 1e9) * 128)
        return tods[0] + 128 <= tod <= tods[-1] - 128

    frames = []
    for line in lines.splitlines():
        try:
            f = json.loads(line)
        except ValueError:
            continue
        if isinstance(f.get("utc_ns"), int) and in_window(f):
            frames.append(f)
    truth = {}
    if args.truth:
        for line in open(args.truth):
            f = json.loads(line)
            truth[f["frame"]] = [t for t in f["targets"] if t.get("in_view", True)]
    elif cfg.get("scene"):
        static = cfg["scene"].get("target", [])
    else:
        c.not_run("a-asterix-targets", "no truth: content neither adc with a recording nor scene")
        return
    g = eff.get("geometry", {})
    # One angle bin: the virtual array's resolution, 2 / (n_tx * n_rx) in
    # sin(azimuth) (half-wavelength spacing), as one range bin is the range
    # FFT's resolution; the angle FFT's zero padding to 64 interpolates.
    abin = 2.0 / (g.get("n_tx", 4) * g.get("n_rx", 4))
    phys = eff.get("physical", {})
    rbin = 299792458.0 * phys.get("sample_rate_hz", 50e6) / (2 * phys.get("slope_hz_per_s", 60e12) * g.get("n_samples", 256))
    good = 0
    misses = []
    ranges = []
    worst_r = worst_a = 0.0
    nrec = len(truth) or 1
    for f in frames:
        tod = round(((f["utc_ns"] % 86_400_000_000_000) / 1e9) * 128)
        recs = by_tod.get(tod, []) + by_tod.get(tod - 1, []) + by_tod.get(tod + 1, [])
        want = truth.get(f["sequence"] % nrec, []) if truth else static
        ok = True
        for k, t in enumerate(want):
            hit = [r for r in recs if abs(r["rho"] - t["range_m"]) <= rbin
                   and abs(sin_of(r["theta"]) - sin_of(t["azimuth_deg"])) <= abin]
            if hit:
                best = min(hit, key=lambda r: abs(r["rho"] - t["range_m"]))
                worst_r = max(worst_r, abs(best["rho"] - t["range_m"]))
                worst_a = max(worst_a, abs(((best["theta"] + 180) % 360) - 180 - t["azimuth_deg"]))
            if not hit:
                ok = False
                misses.append((f["sequence"], t["range_m"], t["azimuth_deg"], [(r["rho"], r["theta"]) for r in recs][:4]))
            elif k == 0:
                ranges.append(hit[0]["rho"])
        good += ok
    moved = max(ranges) - min(ranges) if ranges else 0.0
    motion = truth and moved >= 2 * rbin
    c.ok("a-asterix-targets", len(frames) > 0 and good >= 0.99 * len(frames) and (motion or not truth),
         f"every target of the truth ({'the front-end recording, frame seq mod ' + str(nrec) if truth else 'static scene'}) "
         f"within one range bin ({rbin:.2f} m) and one angle bin ({abin:.3f} in sin(azimuth)) of an ASTERIX report "
         f"in {good}/{len(frames)} frames (>= 99%; worst match {worst_r:.2f} m, {worst_a:.1f} deg); the first target's reports moved over {moved:.1f} m (>= 2 bins: follows the motion); "
         f"first misses {misses[:2]}")


def check_outputs_failing(c, shell, eff, udp):
    sinks = eff.get("sink", [])
    net = [s for s in sinks if s.get("kind") in ("asterix", "udp")]
    files = [s for s in sinks if s.get("kind") == "jsonl"]

    def watch(name, action, undo, sink_kinds, settle=8):
        p0 = props(shell, "radard", ["MainPID", "NRestarts"])
        l0 = status_line(shell)
        rc, out = shell.run(action, 60)
        time.sleep(settle)
        l1 = status_line(shell)
        p1 = props(shell, "radard", ["MainPID", "NRestarts", "ActiveState", "StatusText"])
        shell.run(undo, 60)
        s0, s1 = sink_counts(l0), sink_counts(l1)
        errs = {k: s1.get(k, (0, 0))[1] - s0.get(k, (0, 0))[1] for k in s1 if any(k.startswith(x) for x in sink_kinds)}
        f0, f1 = frames_of(l0), frames_of(l1)
        c.ok(name, rc == 0 and f0 is not None and f1 is not None and f1 > f0 and errs and all(v > 0 for v in errs.values())
             and p1.get("MainPID") == p0.get("MainPID") and p1.get("NRestarts") == p0.get("NRestarts")
             and p1.get("ActiveState") == "active",
             f"'{action}' ({out.strip()[:100]}): over {settle} s frames {f0} -> {f1}, sink errors +{errs}, "
             f"same pid {p1.get('MainPID') == p0.get('MainPID')}, NRestarts {p0.get('NRestarts')} -> {p1.get('NRestarts')} "
             f"(the watchdog kept being fed), {p1.get('ActiveState')}, STATUS={p1.get('StatusText')!r}")

    if not net:
        c.not_run("f-destination-unreachable", "the unit's radard.toml has no network [[sink]] (board radard.toml)")
    else:
        watch("f-destination-unreachable", "ip route add unreachable 10.0.2.2/32", "ip route del unreachable 10.0.2.2/32",
              [s["kind"] for s in net])
    if not files:
        c.not_run("f-data-full", "the unit's radard.toml has no jsonl [[sink]] (board radard.toml)")
    else:
        path = files[0].get("path", "")
        # fallocate: full at once, without the seconds of writes (and the
        # emulated disk's load) that dd would take; dd tops up the rest.
        d = os.path.dirname(path)
        watch("f-data-full", f"a=$(df --output=avail -B1 {d} | tail -n 1); "
              f"fallocate -l $a {d}/../unit-test-fill || fallocate -l $((a - 1048576)) {d}/../unit-test-fill; "
              f"dd if=/dev/zero of={d}/../unit-test-fill2 bs=4k 2>/dev/null; df -h {d} | tail -n 1; true",
              f"rm -f {d}/../unit-test-fill {d}/../unit-test-fill2", ["jsonl"])


def finish(c, args, shell):
    if shell is not None:
        try:
            j = shell.run("journalctl -b -o short-monotonic --no-pager | tail -n 4000", 120)[1]
            with open(args.journal, "w") as f:
                f.write(j)
            shell._send("systemctl poweroff --no-block\n")
        except (RuntimeError, OSError) as e:
            say(f"no journal: {e}")
    passed = sum(1 for r in c.results if r[1] == "PASS")
    failed = [r[0] for r in c.results if r[1] == "FAIL"]
    pending = [r[0] for r in c.results if r[1] == "NOT-RUN"]
    print(f"qemu:unit: {passed} passed, {len(failed)} failed, {len(pending)} not run "
          f"(results {args.results}, journal {args.journal})")
    if failed:
        print("  failed: " + " ".join(failed))
    if pending:
        print("  not run: " + " ".join(pending) + (" (allowed by --allow-pending)" if args.allow_pending else ""))
    return 0 if not failed and (not pending or args.allow_pending) else 1


if __name__ == "__main__":
    sys.exit(main())
