"""Installed like real software (issue 14): `cmake --install` into a temporary prefix,
the prefix moved elsewhere, and a hung simgpu job run with the watchdog, collector and
gdb scripts from that prefix alone while the build tree's copies are hidden behind empty
mounts; and the .deb that `cpack -G DEB` builds."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import report_jobs
from e2e_case import E2ECase
from harness import MpiJob, SOURCE_DIR

BUILD_DIR = Path(os.environ.get("HANGWATCH_BUILD_DIR", report_jobs.build_dir()))
NRANKS = 4
FAULTS = "dead-link=1->2@op=10"

# What an install holds, relative to the prefix (the .deb holds the same under usr/).
INSTALLED = [
    "lib/libhangwatch.so",
    "bin/forensics",
    "share/hangwatch/gdb-scripts/collector_probe.py",
    "share/hangwatch/gdb-scripts/hangwatch_gdb/probe.py",
    "share/hangwatch/gdb-scripts/hangwatch_gdb/sim_ring_reader.py",
    "share/hangwatch/prometheus/hangwatch.rules.yml",
    "share/doc/hangwatch/README.md",
    "share/doc/hangwatch/watchdog.md",
    "share/doc/hangwatch/forensics.md",
]

# Runs the rest of the command line in a private mount namespace in which the build
# tree's watchdog and collector and the source tree's gdb scripts are empty folders.
HIDE_AND_RUN = r'''
for d in "$HIDE_1" "$HIDE_2" "$HIDE_3"; do mount -t tmpfs -o size=1m hidden "$d" || exit 97; done
unset HANGWATCH_FORENSICS HANGWATCH_GDB_SCRIPTS FORENSICS
exec "$@"
'''


def run(cmd, timeout=300, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)


def can_hide_paths():
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                        "mount -t tmpfs -o size=1m probe /mnt"], capture_output=True, text=True, timeout=30)
    return r.returncode == 0, (r.stderr or r.stdout).strip()


class InstalledPrefix(E2ECase):
    def setUp(self):
        for built in (BUILD_DIR / "watchdog" / "libhangwatch.so", BUILD_DIR / "forensics" / "forensics"):
            if not built.exists():
                self.skipTest(f"{built} is not built")
        self.tmp = Path(tempfile.mkdtemp(prefix="hangwatch-install-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def install(self):
        staged = self.tmp / "staged"
        r = run(["cmake", "--install", BUILD_DIR, "--prefix", staged])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # Moved after installing: nothing may depend on where it was installed.
        prefix = self.tmp / "moved" / "hangwatch"
        prefix.parent.mkdir()
        staged.rename(prefix)
        missing = [p for p in INSTALLED if not (prefix / p).is_file()]
        self.assertEqual(missing, [], f"not installed: {missing}")
        self.assertFalse(list(prefix.rglob("tests")), "gdb-scripts/tests must not be installed")
        return prefix

    def test_hung_job_run_from_the_installed_prefix_alone_names_the_dead_link(self):
        ok, why = can_hide_paths()
        if not ok:
            self.skipTest(f"cannot hide the build tree in a mount namespace (unshare -m: {why})")
        prefix = self.install()
        dumps = self.tmp / "dumps"
        job_dir = dumps / report_jobs.JOB_ID
        hidden = [BUILD_DIR / "forensics", BUILD_DIR / "watchdog", SOURCE_DIR / "gdb-scripts"]
        env = {"LD_PRELOAD": str(prefix / "lib" / "libhangwatch.so"), "HANGWATCH_DUMP_DIR": str(dumps),
               "HANGWATCH_JOB_ID": report_jobs.JOB_ID, "HANGWATCH_TIMEOUT": "3", "HANGWATCH_COLLECT_WAIT": "60",
               "SIMGPU_FAULTS": FAULTS, **{f"HIDE_{i + 1}": str(p) for i, p in enumerate(hidden)}}
        wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c", HIDE_AND_RUN, "sh"]
        argv = report_jobs.job_argv("ring_train", [], 50)
        with MpiJob(NRANKS, argv, env=env, wrap=wrap) as job:
            self.assertTrue(job.wait_for(lambda out: len(job.pids()) == NRANKS, 60), job.output()[-3000:])
            for rank, pid in job.pids().items():
                maps = Path(f"/proc/{pid}/maps").read_text()
                self.assertIn(str(prefix / "lib" / "libhangwatch.so"), maps, f"rank {rank} preloads another library")
                self.assertNotIn(str(BUILD_DIR / "watchdog"), maps)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not report_jobs.dumps_complete(job_dir, NRANKS):
                self.assertIsNone(job.proc.poll(), f"the job ended instead of hanging:\n{job.output()[-3000:]}")
                time.sleep(0.5)
            output = job.output()
        ranks = job_dir / "ranks"
        logs = "\n".join(p.read_text(errors="replace") for p in ranks.glob("*.collect.log")) if ranks.exists() else ""
        if "Operation not permitted" in logs:
            self.skipTest("ptrace not permitted here: the collector cannot take stacks")
        self.assertTrue(report_jobs.dumps_complete(job_dir, NRANKS), f"not every rank dumped:\n{output[-3000:]}\n{logs}")
        for r in range(NRANKS):
            dump = json.loads((ranks / f"r{r:05d}.forensics.json").read_text())
            self.assertTrue(dump.get("ring_progress"), f"rank {r}: no ring progress: {dump.get('errors')}")

        forensics = prefix / "bin" / "forensics"
        r = run([forensics, "report", job_dir, "--format", "json"], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        verdict = json.loads(r.stdout)["verdict"]
        self.assertEqual(verdict["kind"], "communication-hang", json.dumps(verdict, indent=1))
        self.assertEqual(verdict["culprit_link"], {"from": 1, "to": 2}, json.dumps(verdict, indent=1))
        text = run([forensics, "report", job_dir], timeout=120).stdout
        self.assertIn("culprit link: rank 1 -> rank 2", text)
        print(f"\n--- forensics report from {prefix} ---\n{text}")


class DebianPackage(unittest.TestCase):
    def setUp(self):
        if not (BUILD_DIR / "CPackConfig.cmake").exists():
            self.skipTest(f"{BUILD_DIR} has no CPackConfig.cmake")
        for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps"):
            if not shutil.which(tool):
                self.skipTest(f"{tool} is not installed")
        self.tmp = Path(tempfile.mkdtemp(prefix="hangwatch-deb-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_deb_holds_the_install_under_usr_and_depends_on_its_libraries_and_gdb(self):
        r = run(["cpack", "-G", "DEB", "--config", BUILD_DIR / "CPackConfig.cmake", "-B", self.tmp])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        debs = list(self.tmp.glob("*.deb"))
        self.assertEqual(len(debs), 1, r.stdout)
        listing = run(["dpkg-deb", "-c", debs[0]]).stdout
        print(f"\n--- dpkg-deb -c {debs[0].name} ---\n{listing}")
        files = {line.split()[-1].removeprefix("./") for line in listing.splitlines() if not line.startswith("d")}
        self.assertEqual([p for p in INSTALLED if f"usr/{p}" not in files], [], listing)
        for stray in ("ring_train", "libsimcuda", "libsimnccl", "/tests/", "CMake"):
            self.assertFalse([f for f in files if stray in f], f"{stray} does not belong in the package")

        fields = {f: run(["dpkg-deb", "-f", debs[0], f]).stdout.strip() for f in ("Package", "Depends")}
        self.assertEqual(fields["Package"], "hangwatch")
        depends = {d.strip().split(" ")[0] for d in fields["Depends"].split(",")}
        self.assertIn("gdb", depends, "the collector's debugger")

        root = self.tmp / "root"
        self.assertEqual(run(["dpkg-deb", "-x", debs[0], root]).returncode, 0)
        for binary in ("usr/lib/libhangwatch.so", "usr/bin/forensics"):
            dynamic = run(["readelf", "-d", root / binary]).stdout
            self.assertNotRegex(dynamic, r"\((RPATH|RUNPATH)\)", f"{binary} must not point into the build tree")
            # Every library the binary names itself comes from a package the .deb depends on.
            needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic)
            self.assertTrue(needed, dynamic)
            ldd = run(["ldd", root / binary]).stdout
            resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
            resolved.update({os.path.basename(p): p for p in re.findall(r"^\s*(/\S+) \(", ldd, re.M)})
            for name in needed:
                self.assertIn(name, resolved, f"{binary}: {name} not found by ldd")
                owner = run(["dpkg", "-S", resolved[name]])
                if owner.returncode != 0:  # /lib is /usr/lib on Debian 12; dpkg knows one of the two
                    owner = run(["dpkg", "-S", os.path.realpath(resolved[name])])
                self.assertEqual(owner.returncode, 0, f"{binary} loads {resolved[name]}, which no package owns")
                package = owner.stdout.split(":")[0]
                self.assertIn(package, depends, f"{binary} needs {name} from {package}: {fields['Depends']}")


if __name__ == "__main__":
    unittest.main()
