#!/usr/bin/env python3
"""Decodes the unit test's captured ASTERIX datagrams (a raw-IP pcap) with
the two independent decoders of tests/asterix_compare.py: Wireshark's
dissector (tshark) and asterix_decoder (PyPI). Run with the Python of the
venv that has asterix_decoder (tests/asterix-decoder-venv.sh makes it).

    asterix_decode.py PCAP PORT  ->  JSON on stdout:
    {"tshark": [records | "what is wrong", ...], "pypi": [...]}, one entry per datagram
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import asterix_compare as ac  # noqa: E402 (the shared decoders)


def main():
    pcap, port = sys.argv[1], int(sys.argv[2])
    datagrams = ac.read_pcap(pcap)
    json.dump({"tshark": ac.tshark_records(pcap, port), "pypi": [ac.pypi_records(d) for d in datagrams],
               "datagrams": len(datagrams)}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
