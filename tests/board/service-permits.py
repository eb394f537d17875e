#!/usr/bin/env python3
"""What radard.service permits against what the unit's configuration needs
(tests/board-checks.sh, check "service").

Reads `radard --print-config` of the board's radard.toml on stdin and checks:
  - the configuration enables the outputs the unit ships with: ASTERIX
    over UDP, a JSONL sink on the data partition and the diagnostics link
    on a UART;
  - the unit permits each: the JSONL directory writable (ReadWritePaths=,
    made by the tmpfiles.d entry, owned by radar, on the data partition);
    the UART allowed (DeviceAllow=PORT rw) and its group (dialout) given;
    for outputs with a network address, AF_INET (AF_INET6 for an IPv6
    destination) and the destination in IPAddressAllow= behind
    IPAddressDeny=any;
  - and nothing else: address families AF_UNIX, AF_INET, AF_INET6 only, no
    PrivateNetwork that would cut UDP, no wildcard in IPAddressAllow=, no
    allowed address that no output sends to (once an output sends over the
    network), no device beyond the FPGA/GPU/GPIO classes, the UART and the
    card's clock, no writable path beyond the runtime directory and the
    JSONL directory;
  - the frames' time: with the card as the source, its PTP clock readable
    and no more (DeviceAllow=char-ptp r), adjtimex/clock_adjtime allowed to
    read the system clock's state, and no capability to set any clock.

  service-permits.py UNIT TMPFILES DATA_MOUNT_WHERE < print-config.toml
Prints ok:/FAIL: lines; exit status 1 on any FAIL.
"""

import ipaddress
import os
import sys
import tomllib

# The device classes radard needs besides the UART: the FPGA (misc
# devices of fpga_p2p), the FPGA reset line's GPIO chips, the iGPU.
BASE_DEVICES = {"char-misc", "char-gpiochip", "char-nvgpu", "char-nvhost", "char-nvmap"}
FAMILIES = {"AF_UNIX", "AF_INET", "AF_INET6"}

failed = False


def ok(msg):
    print(f"ok: {msg}")


def bad(msg):
    global failed
    print(f"FAIL: {msg}")
    failed = True


def unit_settings(path):
    """Key -> list of values of a unit file; an empty assignment resets
    the list, as systemd does."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;[" or "=" not in line:
                continue
            key, value = line.split("=", 1)
            if value == "":
                out[key] = []
            else:
                out.setdefault(key, []).append(value)
    return out


def words(unit, key):
    return [w for v in unit.get(key, []) for w in v.split()]


def destination_host(address):
    """The host of HOST:PORT or [V6]:PORT."""
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    return address.rsplit(":", 1)[0]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    unit_path, tmpfiles_path, data_where = sys.argv[1:]
    cfg = tomllib.loads(sys.stdin.read())
    unit = unit_settings(unit_path)
    sinks = cfg.get("sink", [])

    # --- writable paths: the JSONL directories ---------------------------
    asterix = [s for s in sinks if s.get("kind") == "asterix"]
    if asterix:
        ok(f"the configuration enables ASTERIX ({', '.join(s['address'] for s in asterix)})")
    else:
        bad("the configuration has no asterix [[sink]]: the unit ships with its ASTERIX output")
    jsonl = [s for s in sinks if s.get("kind") == "jsonl"]
    if jsonl:
        ok(f"the configuration enables JSONL ({', '.join(s['path'] for s in jsonl)})")
    else:
        bad("the configuration has no jsonl [[sink]]")
    rw = [p.lstrip("-") for p in words(unit, "ReadWritePaths")]
    tmpfiles = {}
    with open(tmpfiles_path) as f:
        for line in f:
            fields = line.split()
            if fields and not fields[0].startswith("#") and len(fields) >= 5:
                tmpfiles[fields[1]] = fields
    needed_rw = set()
    for s in jsonl:
        d = os.path.dirname(s["path"])
        needed_rw.add(d)
        if d in rw:
            ok(f"radard.service may write {d} (ReadWritePaths=)")
        else:
            bad(f"the JSONL directory {d} is not in ReadWritePaths= ({rw}): ProtectSystem=strict makes it read-only")
        t = tmpfiles.get(d)
        if t and t[0] in ("d", "D") and t[3] == "radar":
            ok(f"tmpfiles.d makes {d} owned by radar ({' '.join(t[:5])})")
        else:
            bad(f"no tmpfiles.d line makes {d} owned by radar: radard (user radar) could not create its files")
        if d == data_where or d.startswith(data_where.rstrip("/") + "/"):
            ok(f"{d} lies on the data partition ({data_where})")
        else:
            bad(f"{d} is not on the data partition {data_where}")
    extra = [p for p in rw if p not in needed_rw]
    if extra:
        bad(f"ReadWritePaths= has {extra}, which no output writes")
    else:
        ok("no writable path beyond the outputs' (and RuntimeDirectory=)")
    for key in ("StateDirectory", "LogsDirectory", "CacheDirectory"):
        if unit.get(key):
            bad(f"{key}={unit[key]}: radard writes nothing there")

    # --- devices: the UART ---------------------------------------------
    port = cfg.get("diag", {}).get("port")
    allows = {}
    for v in unit.get("DeviceAllow", []):
        dev, _, mode = v.partition(" ")
        allows[dev] = mode.strip()
    if port:
        ok(f"the configuration enables the diagnostics link on {port}")
        if allows.get(port) == "rw":
            ok(f"DeviceAllow={port} rw")
        else:
            bad(f"radard.service does not allow {port} rw (DeviceAllow=): the diagnostics link could not open it")
        groups = words(unit, "SupplementaryGroups")
        if "dialout" in groups:
            ok(f"SupplementaryGroups has dialout ({' '.join(groups)}), the UART's group")
        else:
            bad(f"SupplementaryGroups ({groups}) lacks dialout, the group of {port}")
    else:
        bad("the configuration has no [diag] port: the unit ships with its diagnostics link")
    if unit.get("DevicePolicy") != ["closed"]:
        bad(f"DevicePolicy is {unit.get('DevicePolicy')}, want closed")
    # --- the frames' time: the card's clock, read only --------------------
    kmod = cfg.get("source", {}).get("kind") == "kmod"
    if kmod:
        mode = allows.get("char-ptp")
        if mode == "r":
            ok("DeviceAllow=char-ptp r: the card's PTP clock readable (its offset), not writable")
        else:
            bad(f"DeviceAllow=char-ptp is {mode!r}, want 'r': radard reads the card's clock and must not set it")
        calls = {w for v in unit.get("SystemCallFilter", []) if not v.startswith("~") for w in v.split()}
        if {"adjtimex", "clock_adjtime"} <= calls:
            ok("SystemCallFilter= allows adjtimex and clock_adjtime (the system clock's state)")
        else:
            bad("SystemCallFilter= does not allow adjtimex and clock_adjtime: radard could not tell whether the system clock is synchronised")
        if unit.get("CapabilityBoundingSet") == []:
            ok("CapabilityBoundingSet= is empty: no CAP_SYS_TIME, so adjtimex can only read")
        else:
            bad(f"CapabilityBoundingSet={unit.get('CapabilityBoundingSet')}: radard could set the clock")
    elif "char-ptp" in allows:
        bad("DeviceAllow=char-ptp, but the source is not the card")
    others = set(allows) - BASE_DEVICES - ({port} if port else set()) - ({"char-ptp"} if kmod else set())
    if others:
        bad(f"DeviceAllow= has {sorted(others)}, which nothing configured uses")
    else:
        ok(f"no device beyond {sorted(BASE_DEVICES)} and the UART")
    if "PrivateDevices" in unit and unit["PrivateDevices"] != ["no"]:
        bad("PrivateDevices= would hide the UART and the card")

    # --- network: UDP out to the configured destinations ----------------
    families = set(words(unit, "RestrictAddressFamilies"))
    if any(f.startswith("~") for f in families):
        bad("RestrictAddressFamilies= is a deny list; want the allow list AF_UNIX AF_INET AF_INET6")
    if families - FAMILIES:
        bad(f"RestrictAddressFamilies= allows {sorted(families - FAMILIES)}: radard needs AF_UNIX (sd_notify) and AF_INET/AF_INET6 (UDP) only")
    else:
        ok(f"address families {' '.join(sorted(families))} only (no AF_PACKET, AF_NETLINK, ...)")
    if "AF_UNIX" not in families:
        bad("AF_UNIX missing: sd_notify (READY, WATCHDOG) needs it")
    if unit.get("PrivateNetwork", ["no"])[-1] in ("yes", "true", "1", "on"):
        bad("PrivateNetwork=yes: no UDP output could leave the unit")
    deny = words(unit, "IPAddressDeny")
    allow = words(unit, "IPAddressAllow")
    if deny == ["any"]:
        ok("IPAddressDeny=any: only the allowed addresses are reachable")
    else:
        bad(f"IPAddressDeny is {deny}, want any")
    allowed = []
    for a in allow:
        if a in ("any",) or a.endswith("/0"):
            bad(f"IPAddressAllow={a} allows every address")
            continue
        if a in ("localhost", "link-local", "multicast"):
            allowed.append(a)
            continue
        try:
            allowed.append(ipaddress.ip_network(a, strict=False))
        except ValueError:
            bad(f"IPAddressAllow={a} is not an address or prefix")
    net_sinks = [s for s in sinks if "address" in s]
    used = set()
    for s in net_sinks:
        host = destination_host(s["address"])
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            bad(f"sink {s['kind']} {s['address']}: not a numeric address (a name needs the name server allowed too)")
            continue
        fam = "AF_INET6" if ip.version == 6 else "AF_INET"
        if fam in families:
            ok(f"{fam} allowed for the {s['kind']} output to {s['address']}")
        else:
            bad(f"the {s['kind']} output to {s['address']} needs {fam} in RestrictAddressFamilies=")
        hit = [n for n in allowed if not isinstance(n, str) and ip in n]
        if ip.is_multicast and "multicast" in allowed:
            hit.append("multicast")
        if hit:
            used.update(str(h) for h in hit)
            ok(f"IPAddressAllow= covers {s['kind']} destination {ip} ({hit[0]})")
        else:
            bad(f"the {s['kind']} output sends to {ip}, which IPAddressAllow= ({allow}) does not allow: every datagram would be dropped")
    unused = [str(n) for n in allowed if str(n) not in used]
    if unused and net_sinks:
        bad(f"IPAddressAllow= has {unused}, where no output sends")
    elif unused:
        print(f"note: IPAddressAllow= {unused} with AF_INET for the network output "
              "(ASTERIX); the configuration has none yet, so no destination is checked")
    if failed:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
