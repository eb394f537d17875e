#!/usr/bin/env python3
"""Receives radard's ASTERIX datagrams on 127.0.0.1 and writes them, byte
for byte, to a pcap file (raw IPv4 + UDP headers around each payload, as a
capture of the loopback would hold them), for tshark to decode.

    asterix_capture.py PCAP PORT_FILE STOP_FILE

Binds an ephemeral UDP port and writes its number to PORT_FILE; receives
until STOP_FILE exists and nothing has come for half a second."""

import os
import socket
import struct
import sys
import time


def ip_checksum(header: bytes) -> int:
    s = sum(struct.unpack("!10H", header))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def packet(src, dst, payload: bytes) -> bytes:
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src[0]), socket.inet_aton(dst[0]))
    ip = ip[:10] + struct.pack("!H", ip_checksum(ip)) + ip[12:]
    return ip + udp


def main() -> int:
    pcap_path, port_file, stop_file = sys.argv[1:4]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind(("127.0.0.1", 0))
    s.settimeout(0.5)
    me = s.getsockname()
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{me[1]}\n")
    os.rename(port_file + ".tmp", port_file)
    n = 0
    with open(pcap_path, "wb") as out:
        # pcap, version 2.4, snap length 65535, LINKTYPE_RAW (101).
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101))
        while True:
            try:
                data, src = s.recvfrom(65535)
            except socket.timeout:
                if os.path.exists(stop_file):
                    break
                continue
            t = time.time()
            p = packet(src, me, data)
            out.write(struct.pack("<IIII", int(t), int((t % 1) * 1e6), len(p), len(p)) + p)
            n += 1
    print(f"asterix-capture: {n} datagrams to {pcap_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
