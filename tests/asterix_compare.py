#!/usr/bin/env python3
"""Checks radard's ASTERIX CAT-010 datagrams against its JSONL for the same
frames, through two decoders no one here wrote: Wireshark's dissector
(tshark) and the PyPI package asterix_decoder (Croatia Control's). Run with
a Python that has `asterix` (asterix_decoder) installed.

    asterix_compare.py --pcap P --port N --jsonl F --stats S --sac A --sic B
                       --max-datagram M [--min-frames 1000]

Every datagram must be one CAT-010 data block that both decoders read
without a malformed mark; every frame's detections must be its records, in
order, in datagrams filled up to the limit (a frame over it split on record
boundaries); each record must match its detection within the items'
resolution (RHO 1 m, THETA and track angle 360/2^16 deg, ground speed
2^-14 NM/s, amplitude 1 dB), with Time of Day within 1/256 s of the
frame's UTC time; radard's summary must account for every datagram, record
and split. Prints the disagreements and exits 1 if there is any."""

import argparse
import json
import struct
import subprocess
import sys

import asterix  # asterix_decoder

NM = 1852.0
ANGLE_LSB = 360.0 / 65536
SPEED_LSB = NM / 16384
TOD_LSB = 1.0 / 128
FIELDS = [
    "frame.number", "asterix.category", "asterix.010_010_SAC", "asterix.010_010_SIC",
    "asterix.010_000_VALUE", "asterix.010_020_TYP", "asterix.010_020_SIM",
    "asterix.010_140_VALUE", "asterix.010_040_RHO", "asterix.010_040_TH",
    "asterix.010_200_GSP", "asterix.010_200_TRA", "asterix.010_131_VALUE",
    "_ws.malformed", "_ws.expert",
]


def f32(x):
    """The float32 radard had (JSON carries its shortest decimal form)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def round_half_away(x):
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def angle_diff(a, b):
    return (a - b + 180.0) % 360.0 - 180.0


def read_pcap(path):
    data = open(path, "rb").read()
    magic, _, _, _, _, _, link = struct.unpack("<IHHiIII", data[:24])
    assert magic == 0xA1B2C3D4 and link == 101, "a raw-IP pcap"
    out, at = [], 24
    while at < len(data):
        _, _, incl, _ = struct.unpack("<IIII", data[at:at + 16])
        pkt = data[at + 16:at + 16 + incl]
        out.append(pkt[28:])  # past the IPv4 and UDP headers
        at += 16 + incl
    return out


def tshark_records(pcap, port):
    """Per datagram: the records as dicts, or a string saying what is wrong."""
    cmd = ["tshark", "-r", pcap, "-d", f"udp.port=={port},asterix", "-T", "fields",
           "-E", "occurrence=a", "-E", "aggregator=,", "-E", "separator=/t"]
    for f in FIELDS:
        cmd += ["-e", f]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    out = []
    for line in text.splitlines():
        cols = line.split("\t")
        v = dict(zip(FIELDS, cols))
        if v["_ws.malformed"] or v["_ws.expert"]:
            out.append(f"malformed: {v['_ws.malformed']} {v['_ws.expert']}")
            continue
        if v["asterix.category"] != "10":
            out.append(f"data blocks of category {v['asterix.category']!r}, want one of 10")
            continue
        lists = {k: v[k].split(",") if v[k] else [] for k in FIELDS[2:13]}
        n = len(lists["asterix.010_010_SAC"])
        # I010/020's SIM bit is in its first extension, which a report of
        # real (not simulated) data leaves out: absent from every record = 0.
        if not lists["asterix.010_020_SIM"]:
            lists["asterix.010_020_SIM"] = ["0"] * n
        if any(len(x) != n for x in lists.values()):
            out.append(f"items missing in some record: {lists}")
            continue
        out.append([{
            "sac": int(lists["asterix.010_010_SAC"][i], 0),
            "sic": int(lists["asterix.010_010_SIC"][i], 0),
            "type": int(lists["asterix.010_000_VALUE"][i], 0),
            "typ": int(lists["asterix.010_020_TYP"][i], 0),
            "sim": int(lists["asterix.010_020_SIM"][i], 0),
            "tod": float(lists["asterix.010_140_VALUE"][i]),
            "rho": float(lists["asterix.010_040_RHO"][i]),
            "theta": float(lists["asterix.010_040_TH"][i]),
            "gsp": float(lists["asterix.010_200_GSP"][i]),
            "tra": float(lists["asterix.010_200_TRA"][i]),
            "pam": int(lists["asterix.010_131_VALUE"][i], 0),
        } for i in range(n)])
    return out


def pypi_records(datagram):
    """The records asterix_decoder reads, their lengths, or what is wrong."""
    try:
        recs = asterix.parse(bytes(datagram), verbose=False)
    except Exception as e:  # noqa: BLE001 (any failure is a disagreement)
        return f"asterix_decoder raised {e!r}"
    if sum(r.get("len", 0) for r in recs) + 3 != len(datagram):
        return f"records of {[r.get('len') for r in recs]} bytes in a {len(datagram)}-byte block"
    out = []
    for r in recs:
        items = ("I010", "I000", "I020", "I140", "I040", "I200", "I131")
        if r.get("category") != 10 or r.get("hexdata") is None or any(i not in r for i in items):
            return f"malformed record: {r}"
        out.append({
            "sac": r["I010"]["SAC"]["val"], "sic": r["I010"]["SIC"]["val"],
            "type": r["I000"]["MsgTyp"]["val"], "typ": r["I020"]["TYP"]["val"],
            "sim": r["I020"].get("SIM", {}).get("val", 0), "tod": r["I140"]["ToD"]["val"],
            "rho": r["I040"]["RHO"]["val"], "theta": r["I040"]["Theta"]["val"],
            "gsp": r["I200"]["GS"]["val"], "tra": r["I200"]["TA"]["val"],
            "pam": r["I131"]["PAM"]["val"], "len": r["len"],
        })
    return out


def check_record(rec, det, frame, args):
    """What disagrees between a decoded record and its JSONL detection."""
    bad = []
    if (rec["sac"], rec["sic"], rec["type"], rec["typ"], rec["sim"]) != (args.sac, args.sic, 1, 3, 1):
        bad.append(f"SAC/SIC/type/TYP/SIM {rec['sac']}/{rec['sic']}/{rec['type']}/{rec['typ']}/{rec['sim']}")
    utc_s = (frame["utc_ns"] % 86_400_000_000_000) / 1e9
    # Seconds apart, across midnight too.
    if abs((rec["tod"] - utc_s + 43200) % 86400 - 43200) > TOD_LSB / 2 + 1e-6:
        bad.append(f"ToD {rec['tod']} s vs UTC {utc_s} s of day")
    rng, az = f32(det["range_m"]), f32(det["azimuth_deg"])
    v, snr = f32(det["velocity_mps"]), f32(det["snr_db"])
    if abs(rec["rho"] - rng) > 0.5 + 1e-9:
        bad.append(f"RHO {rec['rho']} vs {rng} m")
    if abs(angle_diff(rec["theta"], az)) > ANGLE_LSB / 2 + 1e-9:
        bad.append(f"THETA {rec['theta']} vs {az} deg")
    if abs(rec["gsp"] * NM - abs(v)) > SPEED_LSB / 2 + 1e-9:
        bad.append(f"GSP {rec['gsp'] * NM} vs |{v}| m/s")
    track = az if v >= 0 else az + 180.0
    if abs(angle_diff(rec["tra"], track)) > ANGLE_LSB / 2 + 1e-9:
        bad.append(f"TRA {rec['tra']} vs {track} deg (velocity {v})")
    if rec["pam"] != min(255, max(0, round_half_away(snr))):
        bad.append(f"amplitude {rec['pam']} vs SNR {snr} dB")
    return bad


def main():
    ap = argparse.ArgumentParser()
    for a in ("--pcap", "--jsonl", "--stats"):
        ap.add_argument(a, required=True)
    for a in ("--port", "--sac", "--sic", "--max-datagram"):
        ap.add_argument(a, type=int, required=True)
    ap.add_argument("--min-frames", type=int, default=1000)
    args = ap.parse_args()

    datagrams = read_pcap(args.pcap)
    by_tshark = tshark_records(args.pcap, args.port)
    by_pypi = [pypi_records(d) for d in datagrams]
    frames = [json.loads(line) for line in open(args.jsonl)]
    stats = json.load(open(args.stats))
    problems = []
    if len(by_tshark) != len(datagrams):
        problems.append(f"tshark read {len(by_tshark)} packets of {len(datagrams)}")
    for i, (t, p) in enumerate(zip(by_tshark, by_pypi)):
        for name, r in (("tshark", t), ("asterix_decoder", p)):
            if isinstance(r, str):
                problems.append(f"datagram {i}: {name}: {r}")

    # Frames in order; each takes whole datagrams, filled up to the limit.
    d = 0
    records = split = with_reports = 0
    for f in frames:
        dets = f["detections"]
        # The frame's UTC time (docs/detections-format.md, "Time"): the
        # simulator's host clock, a card's clock, or the frame event.
        if f.get("utc_source") not in ("host-clock", "card-clock", "frame-event") or \
                not isinstance(f.get("utc_ns"), int) or "time_quality" not in f:
            problems.append(f"frame {f['sequence']}: no UTC time with its source and quality")
            continue
        if not dets:
            continue
        with_reports += 1
        got_t, got_p, first = [], [], d
        while len(got_p) < len(dets) and d < len(datagrams):
            t, p = by_tshark[d] if d < len(by_tshark) else "missing", by_pypi[d]
            if isinstance(t, str) or isinstance(p, str):
                break
            # Filled: the next record of the frame would not have fitted.
            if len(got_p) + len(p) < len(dets) and len(datagrams[d]) + p[-1]["len"] <= args.max_datagram:
                problems.append(f"frame {f['sequence']}: datagram {d} not filled to the limit")
            if len(datagrams[d]) > args.max_datagram:
                problems.append(f"datagram {d}: {len(datagrams[d])} bytes, over the limit")
            got_t += t
            got_p += p
            d += 1
        if d - first > 1:
            split += 1
        if len(got_p) != len(dets) or len(got_t) != len(dets):
            problems.append(f"frame {f['sequence']}: {len(dets)} detections, records "
                            f"{len(got_p)} (asterix_decoder) {len(got_t)} (tshark)")
            continue
        for k, det in enumerate(dets):
            for name, rec in (("tshark", got_t[k]), ("asterix_decoder", got_p[k])):
                for b in check_record(rec, det, f, args):
                    problems.append(f"frame {f['sequence']} detection {k}: {name}: {b}")
            records += 1
    if d != len(datagrams):
        problems.append(f"{len(datagrams) - d} datagrams beyond the frames' detections")

    sink = next((s for s in stats["sinks"] if s.get("asterix")), None)
    if sink is None:
        problems.append("no asterix sink in radard's summary")
    else:
        a = sink["asterix"]
        for key, want in (("datagrams", len(datagrams)), ("records", records),
                          ("split_frames", split), ("send_errors", 0)):
            if a[key] != want:
                problems.append(f"summary: {key} = {a[key]}, counted here {want}")
        if sink["queue_full"] or sink["errors"] or sink["sent"] != len(frames):
            problems.append(f"summary: sink {sink}")
    if stats["frames"] != len(frames):
        problems.append(f"summary: {stats['frames']} frames, {len(frames)} jsonl lines")
    if with_reports < args.min_frames:
        problems.append(f"{with_reports} frames with reports, want at least {args.min_frames}")
    if split == 0:
        problems.append("no frame over the datagram limit: the split is untested")

    print(f"asterix: {len(frames)} frames ({with_reports} with reports), {records} records in "
          f"{len(datagrams)} datagrams of at most {args.max_datagram} bytes, {split} frames split; "
          f"decoded by tshark and asterix_decoder {asterix.__version__}")
    for p in problems[:40]:
        print("DISAGREEMENT:", p)
    print(f"asterix: {len(problems)} disagreements")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
