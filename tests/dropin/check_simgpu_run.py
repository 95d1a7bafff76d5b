#!/usr/bin/env python3
"""simgpu-run: it preloads the folder's libraries after the caller's LD_PRELOAD, and refuses,
with one line, a program built for another CUDA runtime: an executable that needs
libcudart.so.12, a Python whose torch is a CPU build or links CUDA 12."""
import argparse
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ARGS = None


def build(tmp, name, soname=None, needs=()):
    """A tiny ELF (an executable, or a library with `soname`) that needs the given libraries."""
    out = Path(tmp) / name
    cmd = [ARGS.cc, "-x", "c", "-", "-o", str(out), f"-L{tmp}", "-Wl,--no-as-needed"]
    if soname:
        cmd += ["-shared", "-fPIC", f"-Wl,-soname,{soname}"]
    cmd += [f"-l:{lib}" for lib in needs]
    subprocess.run(cmd, input="int main(void) { return 0; }\n" if not soname else "int f(void) { return 1; }\n",
                   text=True, check=True)
    return out


def run(argv, env=None):
    full = dict(os.environ)
    full.pop("LD_PRELOAD", None)
    full.update(env or {})
    return subprocess.run([str(Path(ARGS.dropin) / "simgpu-run"), *argv], env=full, capture_output=True, text=True,
                          timeout=60)


class SimgpuRun(unittest.TestCase):
    def test_the_callers_preload_stays_first_and_the_folder_comes_next(self):
        result = run(["sh", "-c", 'echo "$LD_PRELOAD"; echo "$LD_LIBRARY_PATH"'], {"LD_PRELOAD": "/opt/x/libhangwatch.so"})
        self.assertEqual(result.returncode, 0, result.stderr)
        preload, library_path = result.stdout.splitlines()
        dropin = str(Path(ARGS.dropin).resolve())
        self.assertEqual(preload.split(":"), ["/opt/x/libhangwatch.so"] + [
            f"{dropin}/{lib}" for lib in
            ("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13", "libnccl.so.2", "libcuda.so.1")])
        self.assertEqual(library_path.split(":")[0], dropin)

    def test_an_executable_built_for_cuda_12_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            build(tmp, "libcudart.so.12", soname="libcudart.so.12")
            program = build(tmp, "old_program", needs=["libcudart.so.12"])
            result = run([str(program)], {"LD_LIBRARY_PATH": tmp})
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr.strip().splitlines(),
                         [f"simgpu-run: {program} wants libcudart.so.12; simgpu has libcudart.so.13"])

    def test_a_torch_without_cuda_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "torch" / "lib").mkdir(parents=True)
            (Path(tmp) / "torch" / "__init__.py").write_text("raise SystemExit('imported')\n")
            result = run([sys.executable, "-c", "pass"], {"PYTHONPATH": tmp})
        self.assertEqual(result.returncode, 2)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("a build without CUDA", lines[0])
        self.assertIn("simgpu has libcudart.so.13", lines[0])

    def test_a_torch_linking_cuda_12_is_refused_through_a_launcher_script(self):
        with tempfile.TemporaryDirectory() as tmp:
            lib = Path(tmp) / "site" / "torch" / "lib"
            lib.mkdir(parents=True)
            (lib.parent / "__init__.py").write_text("")
            build(tmp, "libcudart.so.12", soname="libcudart.so.12")
            build(tmp, "libtorch_cuda.so", soname="libtorch_cuda.so", needs=["libcudart.so.12"]).rename(
                lib / "libtorch_cuda.so")
            launcher = Path(tmp) / "torchrun"  # a console script, as pip writes them
            launcher.write_text(f"#!{sys.executable}\nprint('launched')\n")
            launcher.chmod(0o755)
            result = run([str(launcher)], {"PYTHONPATH": str(lib.parent.parent)})
        self.assertEqual(result.returncode, 2)
        self.assertRegex(result.stderr.strip(), r"^simgpu-run: .*torchrun imports the torch in .*, whose "
                                                r"libtorch_cuda.so wants libcudart.so.12; simgpu has libcudart.so.13$")

    def test_a_python_without_torch_runs(self):
        result = run([sys.executable, "-c", "print('ran')"], {"PYTHONPATH": ""})
        self.assertEqual((result.returncode, result.stdout.strip()), (0, "ran"), result.stderr)

    def test_a_command_that_does_not_exist_is_named(self):
        result = run(["no-such-command-here"])
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr.strip(), "simgpu-run: no-such-command-here: command not found")

    def test_help(self):
        result = run(["--help"])
        self.assertEqual(result.returncode, 0)
        self.assertIn("simgpu-run CMD [ARGS...]", result.stdout)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--dropin", required=True)
    parser.add_argument("--cc", default="cc")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest])
