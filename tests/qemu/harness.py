#!/usr/bin/env python3
"""Host-side helpers of the QEMU harness (called by tests/qemu/run.sh).

  harness.py cpio STAGING_DIR OUT.cpio
      Pack a directory as an initramfs (newc), owned by root, with /dev/console,
      without needing root or mknod on the host.

  harness.py report --kernel K --suite S --suites "a b" --console LOG --results RES
                    --outdir DIR --duration-s N [--boot-s N] [--qemu-status N]
      Parse the guest's result channel and kernel console, write
      DIR/<K>-<suite>.json (and DIR/<K>-all.json for --suite all), the run as
      one KTAP document DIR/<K>-<suite>.ktap (each suite a subtest holding its
      program's own KTAP report), print a summary ending with
      "N passed, N failed", exit 1 if anything failed.

  harness.py canary --console LOG --results RES
      run.sh --canary: did each detector fire in the suite whose planted bug
      provokes it, and only there?

The result protocol is described in tests/qemu/README.md.
"""

import argparse
import json
import os
import re
import stat
import sys

COUNTERS = (
    "frames_verified",
    "frames_dropped",
    "revocations",
    "kill_cycles",
    "load_cycles",
    "fuzz_calls",
)

# A line of the kernel log that reports a kernel problem. Lockdep, RCU,
# DMA-API (through WARN) and list debugging reports start with "WARNING:";
# KASAN, sleeping-in-atomic, soft lockups and bad page faults with "BUG:".
REPORT = re.compile(
    r"WARNING:|BUG:|kernel BUG at|Oops|general protection fault|Kernel panic"
    r"|possible circular locking|inconsistent lock state|suspicious RCU"
    r"|possible recursive locking|bad unlock balance|held lock freed"
    r"|blocked for more than \d+ seconds|rcu_\w+ detected stalls|soft lockup"
    r"|unreferenced object 0x|list_(add|del) corruption|UBSAN:|DMA-API: "
    # The emulated IOMMU refused a DMA of the card (unmapped or wrong
    # direction): a driver bug, not noise.
    r"|DMAR: \[DMA (Read|Write)|DMAR: DRHD: handling fault"
    # The same on arm64: an event the SMMUv3 reported (a translation or
    # permission fault of the card's DMA), or a global SMMU error.
    r"|arm-smmu-v3 \S+: event 0x|arm-smmu-v3 \S+: unexpected global error"
    # guest-init.sh's kprobe watch: dma_sync_single_* on the card's SG ring.
    r"|DMA-API misuse:"
)
# DMA-API debug's own status lines are not reports.
NOT_REPORT = re.compile(
    r"DMA-API: (preallocated \d+ debug entries|debugging enabled by kernel config"
    r"|dma_debug_entry pool grown)"
)
MARK = re.compile(r"radar-harness: (begin|end) (\S+)")
# One IOMMU fault of the card's DMA, as the guest's IOMMU driver logs it (one
# line per fault, before its details): intel-iommu's DMAR fault, the SMMUv3's
# event (drivers/iommu/arm/arm-smmu-v3: "event 0x10 received:").
# QEMU's trace lines of the SMMUv3 (run.sh --arch arm64): an event recorded
# in its event queue, a transaction aborted.
SMMU_EVENT = re.compile(r"smmuv3_(record_event|translate_abort)")
IOMMU_FAULT = re.compile(r"DMAR: \[DMA (Read|Write)|arm-smmu-v3 \S+: event 0x[0-9a-f]+ received")

# The top level of a (K)TAP document (the kernel's
# Documentation/dev-tools/ktap.rst); kselftests print "TAP version 13".
KTAP_VERSION = re.compile(r"(KTAP version 1|TAP version 1[34])$")
KTAP_PLAN = re.compile(r"1\.\.(\d+)$")
KTAP_RESULT = re.compile(r"(ok|not ok) (\d+)(?: -)?(?: ([^#]*[^#\s]))?\s*(?:#\s*(.*\S))?\s*$")
# The diagnostic line that carries a suite's figures (one JSON object).
FIGURES = "# figures: "
# Suites whose program is a kselftest (kselftest_harness.h): one KTAP test
# per TEST(), no figures line, so no counts.
KSELFTEST_SUITES = {"uapi"}
# The emulated card's state when the machine shut down (run.sh's shutdown-log).
CARD_SHUTDOWN = re.compile(r"radar-fpga-card: machine shutdown \(([^)]*)\): (.*)")


def write_cpio(staging, out):
    """newc archive of STAGING (uid/gid 0, mtime 0) plus dev/console."""
    entries = []
    for root, dirs, files in os.walk(staging):
        dirs.sort()
        rel_root = os.path.relpath(root, staging)
        for name in sorted(dirs) + sorted(files):
            path = os.path.join(root, name)
            rel = os.path.normpath(os.path.join(rel_root, name))
            entries.append((rel, path))

    ino = [100]

    def header(name, mode, size, rdev=(0, 0), nlink=1):
        ino[0] += 1
        fields = (ino[0], mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1],
                  len(name) + 1, 0)
        head = b"070701" + b"".join(b"%08X" % f for f in fields)
        data = head + name.encode() + b"\0"
        return data + b"\0" * (-len(data) % 4)

    with open(out, "wb") as f:
        def add(name, mode, payload=b"", rdev=(0, 0)):
            f.write(header(name, mode, len(payload), rdev,
                           2 if stat.S_ISDIR(mode) else 1))
            f.write(payload + b"\0" * (-len(payload) % 4))

        add("dev", stat.S_IFDIR | 0o755)
        add("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))
        for rel, path in entries:
            st = os.lstat(path)
            perm = stat.S_IMODE(st.st_mode)
            if rel == "dev":
                continue
            if stat.S_ISDIR(st.st_mode):
                add(rel, stat.S_IFDIR | perm)
            elif stat.S_ISLNK(st.st_mode):
                add(rel, stat.S_IFLNK | 0o777, os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as src:
                    add(rel, stat.S_IFREG | perm, src.read())
            else:
                raise SystemExit(f"cpio: unsupported file type: {path}")
        add("TRAILER!!!", 0)


def read_lines(path):
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return []
    return [line.rstrip("\r") for line in text.split("\n")]


def kernel_reports(console_lines):
    """Count report lines per suite segment; key None is outside any suite.
    Returns (counts, examples, iommu_faults), the last one counts per segment."""
    counts, examples, faults = {None: 0}, {None: []}, {None: 0}
    current = None
    for line in console_lines:
        m = MARK.search(line)
        if m:
            current = m.group(2) if m.group(1) == "begin" else None
            counts.setdefault(current, 0)
            examples.setdefault(current, [])
            faults.setdefault(current, 0)
            continue
        if REPORT.search(line) and not NOT_REPORT.search(line):
            counts[current] = counts.get(current, 0) + 1
            examples.setdefault(current, []).append(line.strip())
        if IOMMU_FAULT.search(line):
            faults[current] = faults.get(current, 0) + 1
    return counts, examples, faults


def parse_ktap(lines):
    """Check the top level of a KTAP document and read its results.

    Indented lines belong to subtests, which their parent's result line
    judges. Returns (tests, figures, errors): tests as (ok, number, name,
    directive) tuples, figures the JSON text of the "# figures: " lines,
    errors what makes the document malformed.
    """
    tests, figures, errors = [], [], []
    version = plan = None
    for line in lines:
        if not line.strip() or line[0] in " \t":
            continue
        m = KTAP_RESULT.match(line)
        if KTAP_VERSION.match(line):
            if version is not None:
                errors.append("a second version line")
            version = line
        elif KTAP_PLAN.match(line):
            if plan is not None:
                errors.append("a second plan line")
            plan = int(KTAP_PLAN.match(line).group(1))
        elif m:
            tests.append((m.group(1) == "ok", int(m.group(2)), m.group(3) or "",
                          m.group(4) or ""))
        elif line.startswith(FIGURES):
            figures.append(line[len(FIGURES):])
        elif line.startswith("Bail out!"):
            errors.append(line)
        else:
            continue
        if version is None:
            errors.append(f"{line[:40]!r} before the version line")
    if version is None:
        errors.append("no version line")
    if plan is None:
        errors.append("no plan line")
    elif plan == 0:
        errors.append("an empty plan")
    elif len(tests) != plan:
        errors.append(f"the plan says {plan} tests, {len(tests)} results")
    if [t[1] for t in tests] != list(range(1, len(tests) + 1)):
        errors.append("results not numbered 1..N in order")
    return tests, figures, errors


def parse_results(lines):
    """Group the result channel by suite."""
    plan, done, suites, order = None, None, {}, []
    current = None
    for line in lines:
        if not line.startswith("@@"):
            continue
        word, _, rest = line.partition(" ")
        if word == "@@plan":
            plan = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        elif word == "@@begin":
            current = rest.strip()
            order.append(current)
            suites[current] = {"ktap": [], "end": None, "log": []}
        elif word == "@@ktap" and current:
            suites[current]["ktap"].append(rest)
        elif word == "@@log" and current:
            suites[current]["log"].append(rest)
        elif word == "@@end" and current:
            fields = {}
            tokens = rest.split()
            for tok in tokens[1:]:
                if "=" in tok:
                    k, v = tok.split("=", 1)
                    fields[k] = v
            suites[current]["end"] = fields
            current = None
        elif word == "@@done":
            done = rest
    return plan, done, suites, order


def not_behind_smmu(card_iommu):
    """Why the card's DMA was not translated by the SMMUv3 (None if it was):
    guest-init.sh's "<group>:<domain type>:<IOMMU>" after the suite. The
    point of the arm64 runs; an "identity" domain would be passthrough."""
    parts = card_iommu.split(":")
    if len(parts) == 3 and parts[1] in ("DMA", "DMA-FQ") and parts[2].startswith("smmu3"):
        return None
    return ("the card is not behind the SMMUv3 in a DMA domain "
            f"(card_iommu={card_iommu or 'not reported'})")


def as_count(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    return int(value)


def judge_shutdown(card_lines):
    """The shutdown suite's verdict: the card's state at the guest's reboot."""
    states = [m for m in map(CARD_SHUTDOWN.search, card_lines) if m]
    if not states:
        return "the card reported no state at the machine's shutdown"
    cause, state = states[-1].group(1), states[-1].group(2)
    reasons = []
    if cause not in ("guest-reset", "guest-shutdown"):
        reasons.append(f"the machine shut down by {cause}, not by the guest's reboot")
    for part in ("c2h engine running", "h2c engine running", "source on", "bus master on"):
        if part in state:
            reasons.append(f"{part} when the machine reset (the driver's .shutdown"
                           " did not stop the card)")
    return "; ".join(reasons) or None


def judge(name, entry, reports, report_examples, kernel, card_lines=()):
    """One suite's record, with the reasons it failed (if any)."""
    rec = {"suite": name, "kernel": kernel}
    for c in COUNTERS:
        rec[c] = 0
    reasons = []
    detail = ""
    passed_by_program = False
    if entry is None:
        reasons.append("not run (guest crashed, hung or stopped before it)")
    else:
        tests, figures, errors = parse_ktap(entry["ktap"])
        if not any(line.strip() for line in entry["ktap"]):
            reasons.append("no KTAP report")
        elif errors:
            reasons.append(f"malformed KTAP report ({'; '.join(errors)})")
        results = []
        for raw in figures:
            try:
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
                results.append(obj)
            except ValueError as e:
                reasons.append(f"unparsable figures line: {e}: {raw[:120]}")
        if name in KSELFTEST_SUITES:
            ok = sum(1 for t in tests if t[0] and not t[3])
            detail = f"{ok} of {len(tests)} tests passed"
        elif entry["ktap"]:
            if len(figures) != 1:
                reasons.append(f"{len(figures)} figures lines (want exactly 1)")
            names = [t[2] for t in tests]
            if not errors and names != [name]:
                reasons.append(f"KTAP test {names[0]!r} (want {name!r})")
        if results:
            res = results[-1]
            for c in COUNTERS:
                rec[c] = as_count(res.get(c, 0))
            detail = str(res.get("detail", ""))
            if res.get("suite") != name:
                reasons.append(f"figures name suite {res.get('suite')!r}")
        # A skipped test (a directive) is not a pass.
        bad = [" ".join(filter(None, ["ok" if ok else "not ok", str(n), t,
                                      "# " + d if d else ""]))
               for ok, n, t, d in tests if not ok or d]
        if results and results[-1].get("passed") is not True:
            bad.append("figures say passed: " + json.dumps(results[-1].get("passed")))
        if bad:
            reasons.append(f"program reported failure ({'; '.join(bad)})")
        passed_by_program = bool(tests) and not bad and not errors
        end = entry["end"]
        if end is None:
            reasons.append("no @@end (guest crashed or hung during the suite)")
        else:
            rec["duration_s"] = float(end.get("duration_s", 0) or 0)
            if end.get("rc") != "0":
                reasons.append(f"exit status {end.get('rc')}"
                               + (" (killed by the guest's time limit)"
                                  if end.get("rc") == "137" else ""))
            if end.get("load") != "ok":
                reasons.append(f"module load: {end.get('load')}")
            # The shutdown suite ends in a reboot with the modules loaded.
            if end.get("unload") != ("reboot" if name == "shutdown" else "ok"):
                reasons.append(f"module unload: {end.get('unload')}")
        if name == "shutdown" and passed_by_program:
            why = judge_shutdown(card_lines)
            if why:
                reasons.append(why)
            states = [m for m in map(CARD_SHUTDOWN.search, card_lines) if m]
            if states:
                detail = f"{detail}; the card at the reset: {states[-1].group(2)}"

    rec.setdefault("duration_s", 0.0)
    rec["kernel_reports"] = reports
    if reports:
        reasons.append(f"{reports} kernel report line(s), first: {report_examples[0]}")
    rec["passed"] = 0 if reasons else 1
    rec["failed"] = 1 if reasons else 0
    rec["detail"] = detail
    rec["failure"] = "; ".join(reasons)
    return rec


def run_ktap(records, suites, problems, whole_run):
    """The run as one KTAP document: a test per suite with the harness's
    verdict (the program, load and unload, kernel reports), the program's
    own KTAP report as its subtest; a run of all suites ends with a test
    "run" for what failed outside the suites."""
    tests = len(records) + (1 if whole_run else 0)
    out = ["KTAP version 1", f"1..{tests}"]
    for i, rec in enumerate(records, 1):
        # Without a "# Subtest:" header (optional): the kernel's parser
        # (kunit.py) takes a subtest's test named like the subtest for the
        # subtest's own result line.
        sub = (suites.get(rec["suite"]) or {}).get("ktap", [])
        out.extend(f"    {line}" if line.strip() else "" for line in sub)
        if rec["failure"]:
            out.append(f"# {rec['suite']}: {rec['failure']}")
        out.append(f"{'ok' if rec['passed'] else 'not ok'} {i} {rec['suite']}")
    if whole_run:
        out.extend(f"# run: {p}" for p in problems)
        out.append(f"{'not ok' if problems else 'ok'} {tests} run")
    return "\n".join(out) + "\n"


def report(args):
    console = read_lines(args.console)
    plan, done, suites, _order = parse_results(read_lines(args.results))
    counts, examples, faults = kernel_reports(console)
    wanted = args.suites.split()
    os.makedirs(args.outdir, exist_ok=True)

    records = []
    for name in wanted:
        rec = judge(name, suites.get(name), counts.get(name, 0),
                    examples.get(name, []), args.kernel, read_lines(args.card))
        rec["iommu_faults"] = faults.get(name, 0)
        end = (suites.get(name) or {}).get("end") or {}
        rec["card_iommu"] = end.get("card_iommu", "")
        if args.arch == "arm64" and end:
            why = not_behind_smmu(rec["card_iommu"])
            if why:
                rec["failure"] = "; ".join(filter(None, [rec["failure"], why]))
                rec["passed"], rec["failed"] = 0, 1
        records.append(rec)

    # Reports outside the requested suites: boot, shutdown, the final kmemleak scan.
    outside = sum(n for seg, n in counts.items() if seg not in wanted)
    outside_examples = [e for seg, ex in examples.items() if seg not in wanted for e in ex]
    problems = []
    if plan is None:
        problems.append("the guest never reached the init script (no @@plan)")
    if done is None:
        problems.append("the guest did not finish (crash, panic or hang: no @@done)")
    if args.stalled:
        problems.append(f"the host stopped QEMU: {args.stalled}")
    if args.qemu_status not in (0, None):
        problems.append(f"QEMU exited with status {args.qemu_status}"
                        + (" (host time limit)" if args.qemu_status in (124, 137) else ""))
    if outside:
        problems.append(f"{outside} kernel report line(s) outside the suites, "
                        f"first: {outside_examples[0]}")
    card_iommu = next((r["card_iommu"] for r in records if r["card_iommu"]), "")
    # What the SMMU itself recorded (QEMU's trace, arm64): any event is a
    # fault of a DMA, whatever the guest's driver logged.
    smmu_events = None
    if args.smmu_trace is not None:
        if os.path.exists(args.smmu_trace):
            lines = [l for l in read_lines(args.smmu_trace) if SMMU_EVENT.search(l)]
            smmu_events = len(lines)
            if lines:
                problems.append(f"the SMMU recorded {len(lines)} event(s) or abort(s) "
                                f"(QEMU's trace), first: {lines[0].strip()}")
        elif plan is not None:
            problems.append(f"no SMMU trace {args.smmu_trace} from QEMU")

    common = {
        "kernel": args.kernel,
        "arch": args.arch,
        # arm64: events the SMMUv3 recorded during the whole run (QEMU's trace).
        "smmu_events": smmu_events,
        "kernel_release": (plan or {}).get("kernel", ""),
        "p2p": args.p2p,
        # guest-init.sh's dma_sync_single_* watch: "on" or "off:<why>".
        "dma_sync_probe": (plan or {}).get("dma_sync_probe", ""),
        "boot_s": args.boot_s,
        "qemu_s": args.qemu_s,
    }
    for rec in records:
        rec.update(common)
    total_reports = sum(counts.values())
    if args.suite != "all":
        # A single-suite run: its file also owns what happened outside the suite.
        rec = records[0]
        rec["kernel_reports"] = total_reports
        rec["iommu_faults"] = sum(faults.values())
        if problems:
            rec["failure"] = "; ".join(filter(None, [rec["failure"]] + problems))
            rec["passed"], rec["failed"] = 0, 1
        rec["run_duration_s"] = args.duration_s
    for rec in records:
        with open(os.path.join(args.outdir, f"{args.kernel}-{rec['suite']}.json"), "w") as f:
            json.dump(rec, f, indent=2)
            f.write("\n")

    with open(os.path.join(args.outdir, f"{args.kernel}-{args.suite}.ktap"), "w") as f:
        f.write(run_ktap(records, suites, problems, args.suite == "all"))

    passed = sum(r["passed"] for r in records)
    failed = sum(r["failed"] for r in records)
    if args.suite == "all":
        summary = dict(common, suite="all")
        for c in COUNTERS:
            summary[c] = sum(r[c] for r in records)
        summary["kernel_reports"] = total_reports
        summary["iommu_faults"] = sum(faults.values())
        summary["card_iommu"] = card_iommu
        summary["passed"] = passed
        summary["failed"] = failed
        summary["duration_s"] = args.duration_s
        summary["suites"] = {r["suite"]: ("passed" if r["passed"] else r["failure"])
                             for r in records}
        summary["problems"] = problems
        with open(os.path.join(args.outdir, f"{args.kernel}-all.json"), "w") as f:
            json.dump(summary, f, indent=2)
            f.write("\n")

    for rec in records:
        state = "PASS" if rec["passed"] else "FAIL"
        counts_txt = " ".join(f"{c}={rec[c]}" for c in COUNTERS if rec[c])
        print(f"  {state} {rec['suite']:<11} {rec['duration_s']:7.1f} s  {counts_txt}")
        if rec["detail"]:
            print(f"       detail: {rec['detail']}")
        if rec["failure"]:
            print(f"       failure: {rec['failure']}")
            entry = suites.get(rec["suite"])
            for line in (entry or {}).get("log", [])[-15:]:
                print(f"       | {line}")
    if plan is not None and common["dma_sync_probe"] != "on":
        print(f"  note: the dma_sync_single_* detector was "
              f"{common['dma_sync_probe'] or 'not set up'} on this kernel")
    if plan is not None:
        print(f"  card's IOMMU (group:domain:IOMMU): {card_iommu or 'none'};"
              f" IOMMU faults in the kernel log: {sum(faults.values())}"
              + ("" if smmu_events is None else f"; events the SMMU recorded: {smmu_events}"))
    for p in problems:
        print(f"  FAIL run: {p}")
    ok = failed == 0 and not problems
    # A run-level problem with every suite passed (say, a report after the
    # last suite) still counts as one failure, so the last line never lies.
    print(f"{passed} passed, {failed if ok or failed else 1} failed")
    return 0 if ok else 1


# run.sh --canary: the suite, and what the kernel must have reported during it
# (tests/qemu/planted-bugs/ commits one bug per suite); None: no report allowed.
CANARY = {
    "stream": None,
    "ownership": ("lockdep", r"WARNING: possible circular locking dependency"),
    "revocation": ("KASAN", r"BUG: KASAN: slab-out-of-bounds"),
    "crash": ("atomic sleep", r"BUG: (sleeping function called from invalid context|scheduling while atomic)"),
    "badinput": None,
    "duplex": ("DMA-API debug", r"DMA-API: .*different size"),
    "kmemleak": ("kmemleak", r"unreferenced object 0x"),
}


def canary(args):
    """Did every detector fire where the broken module provoked it, and only there?"""
    segments, current = {}, None
    for line in read_lines(args.console):
        m = MARK.search(line)
        if m:
            current = m.group(2) if m.group(1) == "begin" else None
            segments.setdefault(current, [])
            continue
        if current:
            segments[current].append(line)
    _plan, done, suites, _order = parse_results(read_lines(args.results))
    passed = failed = 0
    for seg, expect in CANARY.items():
        lines = segments.get(seg)
        reports = [l for l in lines or [] if REPORT.search(l) and not NOT_REPORT.search(l)]
        if lines is None:
            ok, why = False, "segment missing from the kernel log"
        elif expect is None:
            ok = not reports
            why = "no report, as expected" if ok else f"unexpected report: {reports[0].strip()}"
        else:
            name, pattern = expect
            hit = [l for l in reports if re.search(pattern, l)]
            ok = bool(hit)
            why = f"{name}: {hit[0].strip()}" if ok else f"{name} did not report"
        if seg in suites and (suites[seg]["end"] or {}).get("unload") != "ok":
            ok, why = False, why + "; module unload failed"
        print(f"  {'PASS' if ok else 'FAIL'} {seg:<11} {why}")
        passed += ok
        failed += not ok
    if done is None:
        print("  FAIL the guest did not finish")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("cpio")
    c.add_argument("staging")
    c.add_argument("out")
    r = sub.add_parser("report")
    r.add_argument("--kernel", required=True)
    r.add_argument("--p2p", default="shim", help="the nv-p2p module: shim or nvidia")
    r.add_argument("--arch", default="x86_64", help="the guest's architecture: x86_64 or arm64")
    r.add_argument("--smmu-trace", default=None,
                   help="QEMU's trace of the SMMUv3's recorded events and aborts (arm64)")
    r.add_argument("--suite", required=True)
    r.add_argument("--suites", required=True)
    r.add_argument("--console", required=True)
    r.add_argument("--results", required=True)
    r.add_argument("--outdir", required=True)
    r.add_argument("--duration-s", type=float, default=0.0)
    r.add_argument("--qemu-s", type=float, default=None)
    r.add_argument("--boot-s", type=float, default=None)
    r.add_argument("--qemu-status", type=int, default=None)
    r.add_argument("--stalled", default=None)
    r.add_argument("--card", default="", help="the card's shutdown-log file")
    t = sub.add_parser("canary")
    t.add_argument("--console", required=True)
    t.add_argument("--results", required=True)
    args = ap.parse_args()
    if args.cmd == "canary":
        return canary(args)
    if args.cmd == "cpio":
        write_cpio(args.staging, args.out)
        return 0
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
