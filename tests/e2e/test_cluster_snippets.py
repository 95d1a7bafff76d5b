"""README "On a cluster" (issue 14): the Slurm script, the torchrun command line and the
Kubernetes PyTorchJob must set only variables the library reads, preload the installed
library of the prefix whose `forensics` makes the report, dump to absolute (shared)
storage, and run the report on the folder the ranks dump into."""
import re
import shlex
import subprocess
import unittest
from pathlib import Path

from harness import SOURCE_DIR

README = SOURCE_DIR / "README.md"
# Where the library reads its environment: the watchdog and the job layout it shares.
LIBRARY_SOURCES = [*(SOURCE_DIR / "watchdog").rglob("*.cc"), *(SOURCE_DIR / "watchdog").rglob("*.h"),
                   SOURCE_DIR / "common" / "job_layout.cc", SOURCE_DIR / "common" / "rank_identity.cc"]
INSTALLED_LIBRARY = "lib/libhangwatch.so"  # packaging/install.cmake, relative to the prefix


def library_variables():
    """Every HANGWATCH_* name the library's sources look up as a string literal."""
    names = set()
    for f in LIBRARY_SOURCES:
        names |= set(re.findall(r'"(HANGWATCH_[A-Z0-9_]+)"', f.read_text()))
    return names


def launcher_job_id_variables():
    """The launcher variables the job id is taken from, in jobIdFromEnv's order."""
    text = (SOURCE_DIR / "common" / "job_layout.cc").read_text()
    body = text[text.index("std::string jobIdFromEnv"):]
    return re.findall(r'"([A-Z_]+)"', body[:body.index("}")])


def cluster_snippets():
    text = README.read_text()
    start = text.index("\n## On a cluster\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end >= 0 else len(text)]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, re.S | re.M)


def shell_settings(script):
    """NAME -> value for every assignment in a shell snippet: exports, prefix assignments
    and srun's --export list; quotes removed, variables left as written."""
    settings = {}
    for line in script.splitlines():
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        for word in shlex.split(code.rstrip("\\"), comments=False) if code.strip() else []:
            for part in word.split(","):
                m = re.fullmatch(r"(?:--export=)?([A-Za-z_][A-Za-z0-9_]*)=(.*)", part)
                if m:
                    settings[m[1]] = m[2]
    return settings


def yaml_env(text):
    """name -> value (or the fieldRef path) of every `env:` entry of a manifest."""
    env = {}
    for m in re.finditer(r"- name: (\S+)\n\s+(value: (.*)|valueFrom:\n\s+fieldRef:\n\s+fieldPath: (.*))", text):
        env[m[1]] = (m[3] or m[4]).strip().strip('"')
    return env


def report_commands(text):
    """(forensics binary, job folder) of every `forensics report <folder>` in a snippet."""
    return [(m[1], m[2].strip('"')) for m in re.finditer(r'("?[^\s"]*forensics"?) report ("[^"]+"|\S+)', text)]


class ClusterSnippets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.snippets = cluster_snippets()
        cls.known = library_variables()

    def snippet(self, lang, marker):
        found = [body for l, body in self.snippets if l == lang and marker in body]
        self.assertEqual(len(found), 1, f"README 'On a cluster' needs one {lang} block with {marker!r}")
        return found[0]

    def assert_settings(self, settings, text, job_dir_suffixes):
        unknown = sorted(n for n in settings if n.startswith("HANGWATCH_") and n not in self.known)
        self.assertEqual(unknown, [], f"set but never read by libhangwatch.so (it reads {sorted(self.known)})")
        self.assertIn("LD_PRELOAD", settings)
        preload = settings["LD_PRELOAD"]
        self.assertTrue(preload.endswith("/" + INSTALLED_LIBRARY), preload)
        prefix = preload[:-len("/" + INSTALLED_LIBRARY)]
        dump_dir = settings.get("HANGWATCH_DUMP_DIR", "")
        self.assertTrue(dump_dir.startswith("/"), f"HANGWATCH_DUMP_DIR must be shared storage, not {dump_dir!r}")
        reports = report_commands(text)
        self.assertTrue(reports, "no `forensics report` command")
        for binary, folder in reports:
            installed = f"{prefix}/bin/forensics"
            self.assertIn(binary.strip('"'), {installed} | ({"forensics"} if prefix == "/usr" else set()),
                          f"the report must come from the preloaded library's prefix {prefix}")
            self.assertIn(folder, {f"{root}/{suffix}" for root in (dump_dir, "$HANGWATCH_DUMP_DIR")
                                   for suffix in job_dir_suffixes},
                          f"the report must read the job's dump folder under {dump_dir}")
        return prefix

    def test_the_library_variables_are_found_in_its_sources(self):
        # Guards the check below against an extraction that silently finds nothing.
        for name in ("HANGWATCH_DUMP_DIR", "HANGWATCH_JOB_ID", "HANGWATCH_TIMEOUT", "HANGWATCH_ON_HANG",
                     "HANGWATCH_PROMETHEUS_DIR", "HANGWATCH_METRICS_INTERVAL"):
            self.assertIn(name, self.known)
        self.assertNotIn("HANGWATCH_GDB_SCRIPTS", self.known, "a collector variable, not the library's")
        self.assertEqual(launcher_job_id_variables()[:3], ["HANGWATCH_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"])

    def test_slurm_batch_script(self):
        text = self.snippet("bash", "#SBATCH")
        self.assertEqual(subprocess.run(["bash", "-n"], input=text, text=True).returncode, 0)
        settings = shell_settings(text)
        self.assertIn("SLURM_JOB_ID", launcher_job_id_variables())
        self.assertNotIn("HANGWATCH_JOB_ID", settings, "Slurm's job id names the folder")
        srun = next(l for l in text.splitlines() if l.startswith("srun "))
        self.assertIn("LD_PRELOAD=", srun, "the preload goes to the ranks, not to the batch shell")
        prefix_var = re.match(r"\$(\w+)/", settings["LD_PRELOAD"])
        if prefix_var:  # the prefix is a variable of the script: compare its value
            settings["LD_PRELOAD"] = settings["LD_PRELOAD"].replace(prefix_var[0][:-1], settings[prefix_var[1]])
            text = text.replace("$" + prefix_var[1], settings[prefix_var[1]])
        self.assert_settings(settings, text, ["$SLURM_JOB_ID"])

    def test_torchrun_command_line(self):
        text = self.snippet("bash", "torchrun")
        self.assertNotIn("#SBATCH", text)
        self.assertEqual(subprocess.run(["bash", "-n"], input=text, text=True).returncode, 0)
        settings = shell_settings(text)
        rdzv_id = settings.get("--rdzv-id") or re.search(r"--rdzv-id=(\S+)", text)[1].strip('"')
        self.assertIn("TORCHELASTIC_RUN_ID", launcher_job_id_variables(), "torchrun's --rdzv-id names the folder")
        self.assert_settings(settings, text, [rdzv_id])

    def test_kubernetes_pytorchjob(self):
        text = self.snippet("yaml", "kind: PyTorchJob")
        env = yaml_env(text)
        name = re.search(r"^metadata:\n  name: (\S+)", text, re.M)[1]
        self.assertEqual(env.get("HANGWATCH_JOB_ID"), "metadata.labels['training.kubeflow.org/job-name']",
                         "a PyTorchJob has no launcher job id: the job's name must be passed down")
        mounts = re.findall(r"mountPath: (\S+)", text)
        self.assertTrue(any(env["HANGWATCH_DUMP_DIR"].startswith(m + "/") for m in mounts),
                        f"HANGWATCH_DUMP_DIR {env['HANGWATCH_DUMP_DIR']} is on no mounted volume {mounts}")
        self.assertIn("persistentVolumeClaim", text)
        # Master and Worker pods share one template, so both preload the library.
        self.assertEqual(text.count("template: &rank"), 1)
        self.assertEqual(text.count("template: *rank"), 1)
        self.assert_settings(env, text, [name])


if __name__ == "__main__":
    unittest.main()
