#!/usr/bin/env python3
"""radard's configuration for the unit test (tests/unit/run.sh).

The unit's own /etc/radard/radard.toml stays as shipped. The test adds one
drop-in: tests/unit/radard-unit.toml (CPU backend, small geometry), the
scene's file when the content is `scene`, and the unit's [[sink]] tables
with their destination pointed at the host (10.0.2.2, QEMU's user-mode
network) on the test's port.

Where radard reads drop-ins (FILE.d/*.toml beside its configuration; found
by running the radard that the guest gets, on this host, against a
two-file probe) the drop-in goes to /etc/radard/radard.toml.d/. Where it
does not, the test writes the merge of the two (tables key by key, arrays
replaced, as radard merges drop-ins) to /etc/radard/unit-test.toml and a
systemd drop-in points radard.service's ExecStart at it: the unit file
itself is never changed.

  unit_config.py write --board-config F --dropin F --scene F --radard BIN
                       --port N --root DIR --out-json F
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib

HOST = "10.0.2.2"
DROPIN_DIR = "/etc/radard/radard.toml.d"
DROPIN_NAME = "50-unit-test.toml"
MERGED = "/etc/radard/unit-test.toml"
SCENE = "/etc/radard/unit-test-scene.toml"


def merge(base, over):
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list) and all(not isinstance(x, dict) for x in v):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise ValueError(f"cannot write {v!r} as a TOML value")


def dump(doc):
    """TOML for radard's configuration: top-level tables (one level of
    sub-tables) and arrays of tables."""
    lines = []

    def table(name, t, header):
        lines.append(header)
        subs = []
        for k, v in t.items():
            if isinstance(v, dict):
                subs.append((k, v))
            elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                raise ValueError(f"nested array of tables {name}.{k}")
            else:
                lines.append(f"{k} = {toml_value(v)}")
        lines.append("")
        for k, v in subs:
            table(f"{name}.{k}", v, f"[{name}.{k}]")

    for k, v in doc.items():
        if isinstance(v, dict):
            table(k, v, f"[{k}]")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                table(k, item, f"[[{k}]]")
        else:
            lines.insert(0, f"{k} = {toml_value(v)}")
    return "\n".join(lines) + "\n"


def reads_dropins(radard):
    """Whether this radard applies FILE.d/*.toml over FILE."""
    with tempfile.TemporaryDirectory() as d:
        main = os.path.join(d, "r.toml")
        with open(main, "w") as f:
            f.write("[output]\nprint_every = 3\n")
        os.mkdir(main + ".d")
        with open(os.path.join(main + ".d", "a.toml"), "w") as f:
            f.write("[output]\nprint_every = 7\n")
        p = subprocess.run([radard, "--config", main, "--print-config"], capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            raise SystemExit(f"unit_config: {radard} --print-config failed: {p.stderr.strip()}")
        cfg = tomllib.loads(p.stdout)
        return cfg.get("output", {}).get("print_every") == 7


def redirect_sinks(sinks, port):
    """The unit's sinks with every network destination on the host."""
    out, redirected = [], []
    for i, s in enumerate(sinks):
        s = dict(s)
        if "address" in s:
            old = s["address"]
            s["address"] = f"{HOST}:{port}"
            redirected.append({"index": i, "kind": s.get("kind"), "was": old, "now": s["address"]})
        for hk, pk in (("host", "port"),):
            if hk in s and pk in s:
                old = f"{s[hk]}:{s[pk]}"
                s[hk], s[pk] = HOST, port
                redirected.append({"index": i, "kind": s.get("kind"), "was": old, "now": f"{HOST}:{port}"})
        out.append(s)
    return out, redirected


def write(args):
    with open(args.board_config, "rb") as f:
        board = tomllib.load(f)
    with open(args.dropin, "rb") as f:
        dropin = tomllib.load(f)
    with open(args.scene, "rb") as f:
        scene = tomllib.load(f)
    effective = merge(board, dropin)
    content = effective.get("source", {}).get("content", "scene")
    if content == "scene":
        dropin.setdefault("source", {})["scene_file"] = SCENE
    sinks, redirected = redirect_sinks(board.get("sink", []), args.port)
    if sinks:
        dropin["sink"] = sinks
    effective = merge(board, dropin)
    text = (
        "# The unit test's drop-in (tests/unit/radard-unit.toml, the scene file,\n"
        f"# the unit's sinks pointed at the host {HOST}:{args.port}).\n" + dump(dropin)
    )
    root = args.root
    os.makedirs(os.path.join(root, "etc/radard"), exist_ok=True)
    with open(os.path.join(root, SCENE.lstrip("/")), "w") as f:
        f.write(open(args.scene).read())
    if reads_dropins(args.radard):
        mode = "dropin"
        os.makedirs(os.path.join(root, DROPIN_DIR.lstrip("/")), exist_ok=True)
        with open(os.path.join(root, DROPIN_DIR.lstrip("/"), DROPIN_NAME), "w") as f:
            f.write(text)
        print_config = ["radard", "--print-config"]
        unitd = os.path.join(root, "etc/systemd/system/radard.service.d")
    else:
        # radard without drop-ins: the merge, and ExecStart pointed at it.
        mode = "merged"
        with open(os.path.join(root, MERGED.lstrip("/")), "w") as f:
            f.write(
                "# The unit's /etc/radard/radard.toml with the unit test's drop-in\n"
                "# merged in (this radard reads no drop-ins).\n" + dump(effective)
            )
        unitd = os.path.join(root, "etc/systemd/system/radard.service.d")
        os.makedirs(unitd, exist_ok=True)
        with open(os.path.join(unitd, "50-unit-test.conf"), "w") as f:
            f.write(
                "# The unit test: this radard reads no radard.toml.d drop-ins, so its\n"
                "# configuration is the merge of the unit's file and the test's drop-in.\n"
                f"[Service]\nExecStart=\nExecStart=/usr/bin/radard --config {MERGED}\n"
            )
        print_config = ["radard", "--config", MERGED, "--print-config"]
    if redirected:
        # As a site does (radard-site.conf.example): the destination allowed.
        os.makedirs(unitd, exist_ok=True)
        with open(os.path.join(unitd, "50-unit-test-site.conf"), "w") as f:
            f.write(
                "# The unit test's site: its outputs go to the host through QEMU's\n"
                f"# user-mode network.\n[Service]\nIPAddressAllow=\nIPAddressAllow={HOST}\n"
            )
    out = {
        "mode": mode,
        "content": content,
        "effective": effective,
        "dropin": dropin,
        "redirected": redirected,
        "scene": scene if content == "scene" else None,
        "print_config": print_config,
        "port": args.port,
    }
    with open(args.out_json, "w") as f:
        json.dump(out, f, indent=1)
    print(
        f"unit_config: {mode} ({'radard.toml.d drop-in' if mode == 'dropin' else 'merged file + ExecStart drop-in'}); "
        f"content {content}; sinks {[s.get('kind') for s in sinks] or 'none'}; "
        f"diag {effective.get('diag', {}).get('port', 'none')}",
        file=sys.stderr,
    )


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--board-config", required=True)
    w.add_argument("--dropin", required=True)
    w.add_argument("--scene", required=True)
    w.add_argument("--radard", required=True)
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--root", required=True)
    w.add_argument("--out-json", required=True)
    args = ap.parse_args()
    write(args)


if __name__ == "__main__":
    main()
