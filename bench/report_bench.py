#!/usr/bin/env python3
"""`forensics report` at job scale: a synthetic dump set of N ranks (default 16,384) with one
injected culprit, reported as JSON under /usr/bin/time -v. Prints wall seconds and max RSS
against the targets (<= 5 s, <= 2 GB), a baseline measured in the same run (reading every
dump file once, page cache warm: the machine's floor for any reader), and checks that the
verdict names the injected culprit.

    bench/report_bench.py [--forensics build/forensics/forensics] [--ranks 16384]
                          [--fault dead-link=4000->4001] [--cache /tmp/hangwatch-report-bench]

The dump set is generated once per (ranks, fault, generator version) and kept in the cache
dir; exit status 1 when the verdict is wrong or the report failed, 0 otherwise (speed is
reported, not asserted)."""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GENERATOR = HERE / "gen_dump_set.py"
TARGET_WALL_S = 5.0
TARGET_RSS_MB = 2048.0


def dump_set(cache, ranks, fault, pad_frames):
    version = hashlib.sha1(GENERATOR.read_bytes()).hexdigest()[:10]
    tag = re.sub(r"[^0-9A-Za-z]+", "_", f"{ranks}-{fault}-{pad_frames}-{version}")
    job = Path(cache) / f"job-{tag}"
    if not (job / "GENERATED.json").exists():
        print(f"generating {ranks} ranks ({fault}) into {job} ...", flush=True)
        t0 = time.monotonic()
        subprocess.run([sys.executable, str(GENERATOR), str(job), "--ranks", str(ranks), "--fault", fault,
                        "--pad-frames", str(pad_frames)], check=True, stdout=subprocess.DEVNULL)
        print(f"generated in {time.monotonic() - t0:.1f} s", flush=True)
    return job


def read_all(job):
    """Seconds to read every dump file once, and the bytes read: the I/O floor."""
    files = sorted((job / "ranks").iterdir()) + [job / "TRIGGER.json"]
    total = 0
    t0 = time.monotonic()
    for f in files:
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 20):
                total += len(chunk)
    return time.monotonic() - t0, total, len(files)


def timed_report(forensics, job, out):
    cmd = ["/usr/bin/time", "-v", forensics, "report", str(job), "--format", "json", "-o", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", r.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    seconds = None
    if wall:
        h, m, s = wall.groups()
        seconds = int(h or 0) * 3600 + int(m) * 60 + float(s)
    user = re.search(r"User time \(seconds\): ([\d.]+)", r.stderr)
    system = re.search(r"System time \(seconds\): ([\d.]+)", r.stderr)
    cpu = float(user.group(1)) + float(system.group(1)) if user and system else None
    return r.returncode, seconds, int(rss.group(1)) / 1024 if rss else None, cpu, r.stderr


def check_verdict(report, expected):
    v = report.get("verdict", {})
    problems = []
    if v.get("kind") != expected["kind"]:
        problems.append(f"kind {v.get('kind')!r}, injected {expected['kind']!r}")
    if expected["culprit_link"] is not None:
        link = v.get("culprit_link") or {}
        if (link.get("from"), link.get("to")) != (expected["culprit_link"]["from"], expected["culprit_link"]["to"]):
            problems.append(f"culprit_link {v.get('culprit_link')}, injected {expected['culprit_link']}")
    else:
        if sorted(v.get("culprit_ranks") or []) != expected["culprit_ranks"]:
            problems.append(f"culprit_ranks {v.get('culprit_ranks')}, injected {expected['culprit_ranks']}")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--forensics", default=os.environ.get("FORENSICS", str(HERE.parent / "build" / "forensics" /
                                                                            "forensics")))
    ap.add_argument("--ranks", type=int, default=16384)
    ap.add_argument("--fault", default="dead-link=4000->4001")
    ap.add_argument("--pad-frames", type=int, default=18)
    ap.add_argument("--cache", default=os.environ.get("REPORT_BENCH_DIR", "/tmp/hangwatch-report-bench"))
    ap.add_argument("--repeat", type=int, default=1, help="report runs; the best is kept")
    args = ap.parse_args()

    job = dump_set(args.cache, args.ranks, args.fault, args.pad_frames)
    expected = json.loads((job / "GENERATED.json").read_text())
    read_all(job)  # warm the page cache, so both figures are taken from memory
    base_s, nbytes, nfiles = read_all(job)
    out = Path(args.cache) / "report.json"
    best = None
    for _ in range(args.repeat):
        code, wall, rss_mb, cpu, err = timed_report(args.forensics, job, out)
        if code != 0 or wall is None:
            print(f"forensics report failed (exit {code}):\n{err[-2000:]}")
            return 1
        if best is None or wall < best[0]:
            best = (wall, rss_mb, cpu)
    wall, rss_mb, cpu = best
    report = json.loads(out.read_text())
    problems = check_verdict(report, expected)

    print(f"dump set:        {args.ranks} ranks, {nfiles} files, {nbytes / 1e9:.2f} GB ({job})")
    print(f"baseline read:   {base_s:.2f} s ({nbytes / 1e9 / base_s:.2f} GB/s, page cache warm)")
    print(f"report wall:     {wall:.2f} s  (target <= {TARGET_WALL_S:.0f} s: "
          f"{'ok' if wall <= TARGET_WALL_S else 'OVER'}), {wall / base_s:.1f}x the baseline read")
    print(f"report CPU:      {cpu:.2f} s user+sys on {os.cpu_count()} cores")
    print(f"report max RSS:  {rss_mb:.0f} MB  (target <= {TARGET_RSS_MB:.0f} MB: "
          f"{'ok' if rss_mb <= TARGET_RSS_MB else 'OVER'})")
    v = report.get("verdict", {})
    print(f"verdict:         {v.get('kind')} culprit_ranks={v.get('culprit_ranks')} "
          f"culprit_link={v.get('culprit_link')} (injected {expected['fault']})")
    print(f"stack classes:   {len(report.get('stack_classes', []))}")
    if problems:
        print("VERDICT WRONG: " + "; ".join(problems))
        return 1
    print("verdict names the injected culprit")
    return 0


if __name__ == "__main__":
    sys.exit(main())
