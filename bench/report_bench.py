#!/usr/bin/env python3
"""`forensics report` at job scale: a synthetic dump set of N ranks (default 16,384; 8 per node)
with one injected culprit and the node summaries its collectors would have written
(nodes/<host>.json), reported as JSON under /usr/bin/time -v twice in the same run: from the
node summaries (what `report` reads by default) and from every rank's own files (`--flat`, the
baseline). Prints wall seconds, CPU and max RSS of each, the ratio flat/summaries, the
summaries' figures against the targets (<= 10 s, <= 2 GB), and checks that both name the
injected culprit and that both reports are the same bytes.

    bench/report_bench.py [--forensics build/forensics/forensics] [--ranks 16384]
                          [--fault dead-link=4000->4001] [--cache /tmp/hangwatch-report-bench]
                          [--cold]

--cold drops the page cache before each report (`echo 3 > /proc/sys/vm/drop_caches`, root
only): the files come from the disk, as on a parallel file system right after a hang. Without
it both layouts are read warm. The dump set is generated once per (ranks, fault, generator
version) and kept in the cache dir; exit status 1 when a verdict is wrong, the two reports
differ or a report failed, 0 otherwise (speed is reported, not asserted)."""
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
TARGET_WALL_S = 10.0
TARGET_RSS_MB = 2048.0


def dump_set(cache, ranks, fault, pad_frames, forensics):
    version = hashlib.sha1(GENERATOR.read_bytes()).hexdigest()[:10]
    tag = re.sub(r"[^0-9A-Za-z]+", "_", f"{ranks}-{fault}-{pad_frames}-{version}")
    job = Path(cache) / f"job-{tag}"
    if not (job / "GENERATED.json").exists():
        print(f"generating {ranks} ranks ({fault}) into {job} ...", flush=True)
        t0 = time.monotonic()
        subprocess.run([sys.executable, str(GENERATOR), str(job), "--ranks", str(ranks), "--fault", fault,
                        "--pad-frames", str(pad_frames), "--forensics", forensics], check=True,
                       stdout=subprocess.DEVNULL)
        print(f"generated in {time.monotonic() - t0:.1f} s", flush=True)
    return job


def read_all(job, folder="ranks"):
    """Seconds to read every file of a folder once, and the bytes read."""
    files = sorted((job / folder).iterdir())
    total = 0
    t0 = time.monotonic()
    for f in files:
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 20):
                total += len(chunk)
    return time.monotonic() - t0, total, len(files)


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def timed_report(forensics, job, out, extra=()):
    cmd = ["/usr/bin/time", "-v", forensics, "report", str(job), "--format", "json", "--no-save", "-o", str(out),
           *extra]
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
    ap.add_argument("--repeat", type=int, default=1, help="report runs of each layout; the best is kept")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before each report (root)")
    args = ap.parse_args()
    if args.cold and os.geteuid() != 0:
        sys.exit("--cold needs root (it writes /proc/sys/vm/drop_caches)")

    job = dump_set(args.cache, args.ranks, args.fault, args.pad_frames, args.forensics)
    expected = json.loads((job / "GENERATED.json").read_text())
    results = {}
    for layout, extra in (("summaries", ()), ("flat", ("--flat",))):
        out = Path(args.cache) / f"report-{layout}.json"
        best = None
        for _ in range(args.repeat):
            if args.cold:
                drop_caches()
            code, wall, rss_mb, cpu, err = timed_report(args.forensics, job, out, extra)
            if code != 0 or wall is None:
                print(f"forensics report ({layout}) failed (exit {code}):\n{err[-2000:]}")
                return 1
            if best is None or wall < best[0]:
                best = (wall, rss_mb, cpu)
        results[layout] = best + (out,)

    rank_s, rank_bytes, rank_files = read_all(job, "ranks")
    node_s, node_bytes, node_files = read_all(job, "nodes")
    print(f"dump set:        {args.ranks} ranks, {rank_files} rank files ({rank_bytes / 1e9:.2f} GB), "
          f"{node_files} node summaries ({node_bytes / 1e9:.2f} GB) ({job})")
    print(f"page cache:      {'dropped before each report' if args.cold else 'warm'}")
    failed = False
    for layout in ("summaries", "flat"):
        wall, rss_mb, cpu, out = results[layout]
        report = json.loads(out.read_text())
        problems = check_verdict(report, expected)
        v = report.get("verdict", {})
        print(f"{layout + ':':<16} wall {wall:.2f} s, CPU {cpu:.2f} s user+sys on {os.cpu_count()} cores, "
              f"max RSS {rss_mb:.0f} MB; verdict {v.get('kind')} culprit_ranks={v.get('culprit_ranks')} "
              f"culprit_link={v.get('culprit_link')}{' WRONG: ' + '; '.join(problems) if problems else ''}")
        failed |= bool(problems)
    wall, rss_mb = results["summaries"][0], results["summaries"][1]
    print(f"targets:         wall {wall:.2f} s (<= {TARGET_WALL_S:.0f} s: {'ok' if wall <= TARGET_WALL_S else 'OVER'}), "
          f"RSS {rss_mb:.0f} MB (<= {TARGET_RSS_MB:.0f} MB: {'ok' if rss_mb <= TARGET_RSS_MB else 'OVER'})")
    print(f"flat/summaries:  wall {results['flat'][0] / wall:.1f}x, CPU {results['flat'][2] / results['summaries'][2]:.1f}x, "
          f"RSS {results['flat'][1] / rss_mb:.2f}x")
    same = results["summaries"][3].read_bytes() == results["flat"][3].read_bytes()
    print(f"reports:         {'the same bytes' if same else 'DIFFER'} (injected {expected['fault']})")
    return 1 if failed or not same else 0


if __name__ == "__main__":
    sys.exit(main())
