#!/usr/bin/env python3
"""Checks that the Yocto recipes install exactly what the board's install
manifest (board/jetson-agx-orin-devkit/install-manifest) lists, so that the
unit test, which installs the manifest into its QEMU guest, installs what
the image would.

What is read from each recipe named in the manifest:
  - `install -m MODE FILE... DIR/` and `install -m MODE FILE DEST` lines of
    do_install (and do_install:append), their sources found through
    SRC_URI's file:// entries and FILESEXTRAPATHS (the recipe and the files
    it requires); `install -d` of a directory that receives no file (an
    empty directory the image ships, such as a drop-in directory);
  - `ln -sf TARGET DEST` lines of do_install;
  - RADAR_CARGO_PACKAGE (cargo installs the program into ${bindir});
  - `inherit module`: every obj-m module of kmod/Kbuild but nvp2p_shim
    (left out when NVP2P_INC is set, as the recipe sets it), installed by
    kbuild's modules_install into MODLIB/extra;
  - KERNEL_MODULE_AUTOLOAD (/etc/modules-load.d/NAME.conf);
  - SYSTEMD_SERVICE (enabled units);
  - GROUPADD_PARAM and USERADD_PARAM (groups, the user and its groups).

Variables take the radar distro's values (systemd, usrmerge).

Usage: check-install-manifest.py [--top DIR]
Prints each entry checked; exit status 1 on any difference, 2 on a
manifest or recipe it cannot read.
"""
import argparse
import glob
import os
import re
import shlex
import sys

# The radar distro's layout (INIT_MANAGER = "systemd" brings usrmerge).
VARS = {
    "prefix": "/usr",
    "exec_prefix": "/usr",
    "bindir": "/usr/bin",
    "sbindir": "/usr/sbin",
    "libexecdir": "/usr/libexec",
    "sysconfdir": "/etc",
    "datadir": "/usr/share",
    "nonarch_base_libdir": "/usr/lib",
    "nonarch_libdir": "/usr/lib",
    "docdir": "/usr/share/doc",
    "systemd_unitdir": "/usr/lib/systemd",
    "systemd_system_unitdir": "/usr/lib/systemd/system",
    "KERNEL_VERSION": "KERNEL_VERSION",
    "D": "",
}


class Unreadable(Exception):
    pass


def expand(text, local):
    def sub(m):
        name = m.group(1)
        if name in local:
            return local[name]
        if name in VARS:
            return VARS[name]
        raise Unreadable(f"unknown variable ${{{name}}} in {text!r}")

    prev = None
    while prev != text:
        prev, text = text, re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", sub, text)
    return text


def logical_lines(text):
    """Lines with backslash continuations joined."""
    out, cur = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def assignments(lines, name):
    """The values of NAME = / += / ?= / :prepend := ... (quoted), in order."""
    pat = re.compile(r"^\s*" + re.escape(name) + r'(?::\$\{PN\})?(?::prepend|:append)?\s*(\?=|\+=|=|:=|\?\?=)\s*"(.*)"\s*$')
    vals = []
    for line in lines:
        m = pat.match(line)
        if m:
            vals.append((m.group(1), m.group(2)))
    return vals


def value(lines, name):
    v = ""
    for op, val in assignments(lines, name):
        v = val if op in ("=", ":=", "?=", "??=") and not v else (v + " " + val if v else val)
    return v.strip()


def function_bodies(lines, names):
    bodies = []
    i = 0
    while i < len(lines):
        m = re.match(r"^\s*([A-Za-z_:]+)\s*\(\)\s*\{\s*$", lines[i])
        if m and m.group(1) in names:
            body = []
            i += 1
            while i < len(lines) and lines[i].strip() != "}":
                body.append(lines[i])
                i += 1
            bodies.extend(body)
        i += 1
    return bodies


def with_requires(layer, path):
    """The recipe's text with every `require`d file's in its place."""
    out = []
    for line in open(path, encoding="utf-8").read().splitlines():
        m = re.match(r"^\s*(require|include)\s+(\S+)\s*$", line)
        if m:
            for cand in (os.path.join(layer, m.group(2)), os.path.join(os.path.dirname(path), m.group(2))):
                if os.path.isfile(cand):
                    out.append(with_requires(layer, cand))
                    break
            else:
                raise Unreadable(f"{path}: cannot find {m.group(2)}")
        else:
            out.append(line)
    return "\n".join(out)


def recipe_entries(top, recipe):
    board = os.path.join(top, "board", "jetson-agx-orin-devkit")
    layer = os.path.join(top, "yocto-layer")
    paths = glob.glob(os.path.join(layer, "recipes-*", recipe, f"{recipe}_*.bb"))
    if len(paths) != 1:
        raise Unreadable(f"recipe {recipe}: found {paths or 'no .bb'}")
    text = with_requires(layer, paths[0])
    lines = logical_lines(text)
    # Only the assignments' own text, not comments.
    lines = [ln for ln in lines if not ln.lstrip().startswith("#")]
    local = {"RADAR_BOARD_DIR": board, "RADAR_SRC_DIR": top, "PN": recipe}
    workdir = "/WORKDIR"
    local["WORKDIR"] = workdir
    s = value(lines, "S")
    local["S"] = expand(s, local) if s else workdir
    # Where bitbake looks for file:// sources: FILESEXTRAPATHS (prepended,
    # colon-separated, in order).
    search = []
    for _, val in assignments(lines, "FILESEXTRAPATHS"):
        search = [expand(p, local) for p in val.split(":") if p] + search
    src_uri = []
    for _, val in assignments(lines, "SRC_URI"):
        src_uri += [u[len("file://"):] for u in val.split() if u.startswith("file://")]

    def source_of(path):
        if not path.startswith(workdir + "/"):
            raise Unreadable(f"recipe {recipe}: install source {path} is not in WORKDIR")
        rel = path[len(workdir) + 1:]
        if rel not in src_uri:
            raise Unreadable(f"recipe {recipe}: {rel} is not a file:// entry of SRC_URI")
        for d in search:
            cand = os.path.join(d, rel)
            if os.path.isfile(cand):
                return os.path.relpath(cand, top)
        raise Unreadable(f"recipe {recipe}: {rel} is in no FILESEXTRAPATHS directory")

    entries = set()
    dirs = set()
    for line in function_bodies(lines, ("do_install", "do_install:append")):
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "install" and "-d" in words:
            dirs |= {expand(w, local).rstrip("/") for w in words[1:] if w != "-d"}
        elif words[0] == "install":
            if words[1] != "-m":
                raise Unreadable(f"recipe {recipe}: cannot read {line.strip()!r}")
            mode = words[2].rjust(4, "0")
            args = [expand(w, local) for w in words[3:]]
            *srcs, dest = args
            for src in srcs:
                target = dest + os.path.basename(src) if dest.endswith("/") else dest
                entries.add((recipe, "file", source_of(src), target, mode))
        elif words[0] == "ln":
            target, dest = (expand(w, local) for w in words[-2:])
            entries.add((recipe, "link", target, dest, "-"))
    files = [e[3] for e in entries]
    for d in dirs:
        if not any(f.startswith(d + "/") for f in files):
            entries.add((recipe, "dir", "-", d, "0755"))
    cargo = value(lines, "RADAR_CARGO_PACKAGE")
    if cargo:
        entries.add((recipe, "program", cargo, f"/usr/bin/{cargo}", "0755"))
    if re.search(r"^\s*inherit\s+.*\bmodule\b", text, re.M):
        kbuild = open(os.path.join(top, "kmod", "Kbuild"), encoding="utf-8").read()
        for mod in re.findall(r"^obj-m\s*\+?=\s*(\S+)\.o\s*$", kbuild, re.M):
            entries.add((recipe, "module", mod, f"/usr/lib/modules/KERNEL_VERSION/extra/{mod}.ko", "0644"))
    for mod in value(lines, "KERNEL_MODULE_AUTOLOAD").split():
        entries.add((recipe, "autoload", mod, f"/etc/modules-load.d/{mod}.conf", "0644"))
    for unit in value(lines, "SYSTEMD_SERVICE").split():
        entries.add((recipe, "enable", unit, "-", "-"))
    for part in value(lines, "GROUPADD_PARAM").split(";"):
        words = part.split()
        if words:
            entries.add((recipe, "group", words[-1], "-", "-"))
    user = value(lines, "USERADD_PARAM").split()
    if user:
        gid = user[user.index("--gid") + 1] if "--gid" in user else user[-1]
        groups = user[user.index("--groups") + 1] if "--groups" in user else ""
        entries.add((recipe, "user", user[-1], f"{gid}:{groups}", "-"))
    return entries


def read_manifest(path):
    entries = set()
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if len(words) != 5:
            raise Unreadable(f"{path}:{n}: want 5 columns (recipe kind source destination mode), got {len(words)}")
        entries.add(tuple(words))
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args = ap.parse_args()
    top = os.path.abspath(args.top)
    manifest = os.path.join(top, "board", "jetson-agx-orin-devkit", "install-manifest")
    try:
        want = read_manifest(manifest)
        have = set()
        for recipe in sorted({e[0] for e in want}):
            have |= recipe_entries(top, recipe)
    except (Unreadable, OSError, ValueError) as e:
        print(f"check-install-manifest: {e}", file=sys.stderr)
        return 2
    for e in sorted(want & have):
        print("ok: " + " ".join(e))
    bad = 0
    for e in sorted(want - have):
        print("FAIL: in the manifest, not installed by the recipe: " + " ".join(e))
        bad = 1
    for e in sorted(have - want):
        print("FAIL: installed by the recipe, not in the manifest: " + " ".join(e))
        bad = 1
    print(f"check-install-manifest: {len(want & have)} entries agree, {len(want ^ have)} differ")
    return bad


if __name__ == "__main__":
    sys.exit(main())
