"""Installed like real software (issues 14 and 30): `cmake --install` into a temporary
prefix, the prefix moved elsewhere, and a hung simgpu job run with the watchdog, collector
and gdb scripts from that prefix alone while the build tree's copies and the libraries of
the build machine that a node may lack are hidden in a mount namespace; the installed
library's dependencies and symbol versions; and the .deb that `cpack -G DEB` builds."""
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
# simgpu's drop-in libraries, built where the real CUDA libraries are (simgpu/dropin).
if (BUILD_DIR / "simgpu-dropin" / "libcudart.so.13").exists():
    INSTALLED += [f"lib/hangwatch/simgpu/{lib}"
                  for lib in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2")]

# All libhangwatch.so may need (README "Install"): the C library, at glibc 2.28's versions.
C_LIBRARY = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "ld-linux-x86-64.so.2"}
GLIBC_BASELINE = (2, 28)
# The build machine's libraries that a node may not have (or have in another version), hidden
# for the installed-prefix tests; the C++ runtime is hidden as well where nothing else needs it.
BUILD_MACHINE_LIBRARIES = ["libboost_*.so*", "libdw.so*", "libdw-*.so", "libelf.so*", "libelf-*.so",
                           "libsimdjson.so*", "libfmt.so*"]
CXX_RUNTIME = ["libstdc++.so*", "libgcc_s.so*"]
LIBRARY_DIRS = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/usr/lib",
                "/usr/local/lib"]

# Runs the rest of the command line in a private mount namespace in which the folders in
# HIDE_DIRS are empty and the files in HIDE_FILES are empty files (space-separated lists of
# paths without spaces: temporary folders, the build tree, the system's library folders).
HIDE_AND_RUN = r'''
for d in $HIDE_DIRS; do mount -t tmpfs -o size=1m hidden "$d" || exit 97; done
for f in $HIDE_FILES; do mount --bind "$EMPTY_FILE" "$f" || exit 98; done
unset HANGWATCH_FORENSICS HANGWATCH_GDB_SCRIPTS FORENSICS HIDE_DIRS HIDE_FILES EMPTY_FILE
exec "$@"
'''
NAMESPACE = ["unshare", "-m", "--propagation", "private", "sh", "-c", HIDE_AND_RUN, "sh"]


def run(cmd, timeout=300, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)


def library_files(patterns):
    """The real files (symlinks resolved) in the system's library folders that match."""
    files = set()
    for folder in LIBRARY_DIRS:
        for pattern in patterns:
            files.update(p.resolve() for p in Path(folder).glob(pattern) if p.resolve().is_file())
    return sorted(files)


def portable_build():
    cache = (BUILD_DIR / "CMakeCache.txt").read_text() if (BUILD_DIR / "CMakeCache.txt").exists() else ""
    return re.search(r"^HANGWATCH_PORTABLE:BOOL=ON$", cache, re.M) is not None


def glibc_version(name):
    m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def dynamic_symbols(binary):
    """objdump -T as (defined, weak, version, name) rows."""
    rows = []
    for line in run(["objdump", "-T", binary]).stdout.splitlines():
        m = re.match(r"^[0-9a-f]{16} (.{7}) (\S+)\s+[0-9a-f]+\s+(?:\((\S+)\)|(\S+))?\s+(\S+)$", line)
        if m:
            flags, section, hidden_version, version, name = m.groups()
            rows.append((section != "*UND*", "w" in flags, hidden_version or version or "", name))
    return rows


def pin_for(name):
    """The newest version at or below the baseline under which this machine's C library has `name`."""
    best = None
    for lib in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libm.so.6"):
        for defined, _, version, symbol in dynamic_symbols(lib):
            v = glibc_version(version)
            if defined and symbol == name and v and v <= GLIBC_BASELINE and (best is None or v > best[0]):
                best = (v, version)
    return f"pin it to {name}@{best[1]}" if best else "glibc 2.28 has no version of it: rebuild it"


def exported_patterns():
    text = (SOURCE_DIR / "watchdog" / "exports.map").read_text()
    return re.findall(r"^\s*([\w*]+);", text.split("local:")[0], re.M)


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

    def require_portable_and_namespace(self):
        if not portable_build():
            self.skipTest(f"{BUILD_DIR} is not a HANGWATCH_PORTABLE build")
        ok, why = can_hide_paths()
        if not ok:
            self.skipTest(f"cannot hide paths in a mount namespace (unshare -m: {why})")

    def hiding(self, dirs, files):
        """The environment that makes NAMESPACE hide `dirs` and `files`."""
        empty = self.tmp / "empty"
        empty.touch()
        for path in [*dirs, *files]:
            self.assertNotIn(" ", str(path), "HIDE_AND_RUN takes paths without spaces")
        return {"HIDE_DIRS": " ".join(map(str, dirs)), "HIDE_FILES": " ".join(map(str, files)),
                "EMPTY_FILE": str(empty)}

    def assert_hidden(self, env, files):
        """Inside the namespace every hidden library reads as empty."""
        r = run([*NAMESPACE, "sh", "-c", 'for f; do [ -s "$f" ] && echo "visible: $f"; done; true', "sh", *files],
                env={**os.environ, **env}, timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)

    def debugger_with_its_own_libraries(self, hidden):
        """A node's gdb comes with what it links (Debian's: libdw, libelf, Boost.Regex), as a
        debugger module or cuda-gdb's bundle does: copies of those on its own library path."""
        gdb = shutil.which("gdb")
        libs = self.tmp / "debugger" / "lib"
        libs.mkdir(parents=True)
        hidden = {str(p) for p in hidden}
        for name, path in re.findall(r"^\s*(\S+) => (/\S+)", run(["ldd", gdb]).stdout, re.M):
            if os.path.realpath(path) in hidden:
                shutil.copy(path, libs / name)
        wrapper = self.tmp / "debugger" / "bin" / "gdb"
        wrapper.parent.mkdir()
        wrapper.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH={libs} exec {gdb} "$@"\n')
        wrapper.chmod(0o755)
        return wrapper.parent

    def test_installed_library_needs_only_the_c_library_at_glibc_2_28(self):
        if not portable_build():
            self.skipTest(f"{BUILD_DIR} is not a HANGWATCH_PORTABLE build")
        lib = self.install() / "lib" / "libhangwatch.so"
        dynamic = run(["readelf", "-d", lib]).stdout
        needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic))
        self.assertTrue(needed, dynamic)
        self.assertEqual(needed - C_LIBRARY, set(), "libhangwatch.so needs more than the C library")
        self.assertNotRegex(dynamic, r"\((RPATH|RUNPATH)\)")

        symbols = dynamic_symbols(lib)
        self.assertTrue(symbols, "objdump -T read no symbols")
        imports = [(version, name) for defined, weak, version, name in symbols if not defined]
        too_new = [f"{name}@{version}: {pin_for(name)} in watchdog/glibc_compat.cc" for version, name in imports
                   if glibc_version(version) and glibc_version(version) > GLIBC_BASELINE]
        self.assertEqual(too_new, [], "imports newer than GLIBC_2.28")
        foreign = [f"{name}@{version}" for version, name in imports if not version.startswith("GLIBC_")
                   and not (version in ("", "Base") and name in ("__gmon_start__", "_ITM_registerTMCloneTable",
                                                       "_ITM_deregisterTMCloneTable"))]
        self.assertEqual(foreign, [], "imports from other than glibc (GLIBCXX, CXXABI, GCC_ or unversioned)")
        # Nothing of the preload's own C++ runtime can bind to the program's, or the other way.
        patterns = exported_patterns()
        stray = [name for defined, _, _, name in symbols if defined and name not in ("_init", "_fini")
                 and not any(re.fullmatch(p.replace("*", ".*"), name) for p in patterns)]
        self.assertEqual(stray, [], f"exported beyond watchdog/exports.map ({patterns})")

    def test_hung_job_run_from_the_installed_prefix_alone_names_the_dead_link(self):
        ok, why = can_hide_paths()
        if not ok:
            self.skipTest(f"cannot hide the build tree in a mount namespace (unshare -m: {why})")
        prefix = self.install()
        dumps = self.tmp / "dumps"
        job_dir = dumps / report_jobs.JOB_ID
        hidden_dirs = [BUILD_DIR / "forensics", BUILD_DIR / "watchdog", SOURCE_DIR / "gdb-scripts"]
        hidden_files = library_files(BUILD_MACHINE_LIBRARIES) if portable_build() else []
        env = {"LD_PRELOAD": str(prefix / "lib" / "libhangwatch.so"), "HANGWATCH_DUMP_DIR": str(dumps),
               "HANGWATCH_JOB_ID": report_jobs.JOB_ID, "HANGWATCH_TIMEOUT": "3", "HANGWATCH_COLLECT_WAIT": "60",
               "SIMGPU_FAULTS": FAULTS, **self.hiding(hidden_dirs, hidden_files)}
        if hidden_files:
            self.assertTrue([f for f in hidden_files if f.name.startswith("libdw")], "no libdw to hide")
            self.assert_hidden(env, hidden_files)
            env["PATH"] = f"{self.debugger_with_its_own_libraries(hidden_files)}:{os.environ['PATH']}"
        argv = report_jobs.job_argv("ring_train", [], 50)
        with MpiJob(NRANKS, argv, env=env, wrap=NAMESPACE) as job:
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
        self.assertTrue(report_jobs.dumps_complete(job_dir, NRANKS),
                        f"not every rank dumped:\n{output[-3000:]}\n{logs}")
        for r in range(NRANKS):
            dump = json.loads((ranks / f"r{r:05d}.forensics.json").read_text())
            self.assertTrue(dump.get("ring_progress"), f"rank {r}: no ring progress: {dump.get('errors')}")

        forensics = prefix / "bin" / "forensics"
        report = [*NAMESPACE, forensics, "report", job_dir]
        r = run([*report, "--format", "json"], timeout=120, env={**os.environ, **env})
        self.assertEqual(r.returncode, 0, r.stderr)
        verdict = json.loads(r.stdout)["verdict"]
        self.assertEqual(verdict["kind"], "communication-hang", json.dumps(verdict, indent=1))
        self.assertEqual(verdict["culprit_link"], {"from": 1, "to": 2}, json.dumps(verdict, indent=1))
        text = run(report, timeout=120, env={**os.environ, **env}).stdout
        self.assertIn("culprit link: rank 1 -> rank 2", text)
        print(f"\n--- forensics report from {prefix} ---\n{text}")

    def test_c_program_starts_with_the_preload_and_forensics_runs_without_a_cxx_runtime(self):
        self.require_portable_and_namespace()
        prefix = self.install()
        program = self.tmp / "plain_c"
        source = self.tmp / "plain_c.c"
        # Through the preload's interposer: the watchdog starts (its poller thread and all) and
        # finds no CUDA runtime behind it, which it answers with cudaErrorNotSupported (801).
        source.write_text('''#include <dlfcn.h>
#include <stdio.h>
int main(void) {
  int (*sync)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "cudaDeviceSynchronize");
  if (sync == NULL) { puts("cudaDeviceSynchronize is not defined: the preload is not loaded"); return 2; }
  printf("cudaDeviceSynchronize: %d\\n", sync());
  return 0;
}
''')
        r = run(["cc", "-O1", "-o", program, source, "-ldl"])
        self.assertEqual(r.returncode, 0, r.stderr)
        hidden = library_files(BUILD_MACHINE_LIBRARIES + CXX_RUNTIME)
        self.assertTrue([f for f in hidden if f.name.startswith("libstdc++")], "no libstdc++ to hide")
        env = {**os.environ, **self.hiding([BUILD_DIR / "forensics", BUILD_DIR / "watchdog"], hidden)}
        self.assert_hidden(env, hidden)
        cxx = run([*NAMESPACE, report_jobs.job_argv("ring_train", [], 1)[0], "--help"], env=env, timeout=30)
        self.assertIn("libstdc++.so.6", cxx.stderr, "a C++ program still starts: the runtime is not hidden")

        preload = {"LD_PRELOAD": str(prefix / "lib" / "libhangwatch.so"), "HANGWATCH_DUMP_DIR": str(self.tmp / "dumps")}
        started = run([*NAMESPACE, program], timeout=60, env={**env, **preload})
        self.assertEqual((started.returncode, started.stdout.strip()), (0, "cudaDeviceSynchronize: 801"),
                         started.stderr)
        self.assertNotIn("error while loading shared libraries", started.stderr)
        helped = run([*NAMESPACE, prefix / "bin" / "forensics", "--help"], timeout=30, env=env)
        self.assertEqual(helped.returncode, 0, helped.stderr)
        self.assertIn("usage: forensics", helped.stdout)


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
        dynamic_binaries = ["usr/lib/libhangwatch.so", "usr/bin/forensics"]
        if portable_build():
            # The static collector names no library; the C library's package is still a dependency.
            self.assertIn("no dynamic section", run(["readelf", "-d", root / "usr/bin/forensics"]).stdout)
            dynamic_binaries.remove("usr/bin/forensics")
            self.assertIn("libc6", depends)
        for binary in dynamic_binaries:
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
