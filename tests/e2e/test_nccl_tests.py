"""NVIDIA's nccl-tests, unmodified, on simgpu (issue 43): all_reduce_perf with 2 processes under
mpirun, each driving 2 GPUs (-t 2: a thread per GPU; -g 2: one thread and a group), so 4
communicator ranks. A dead link and a GPU that stops must be named in GPU ranks, each on its
process, with the communicator's world size; never "did not dump".

nccl-tests is not in this repository (nor reachable from CI): build it once and name the
binary, e.g.
    git clone https://github.com/NVIDIA/nccl-tests && cd nccl-tests/src &&
    make MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NCCL_HOME=/usr/local/cuda \\
         NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 BUILDDIR=$PWD/../build os.build \\
         $PWD/../build/all_reduce_perf
    NCCL_TESTS_ALL_REDUCE=$PWD/../build/all_reduce_perf python3 -m unittest -v test_nccl_tests
Skipped without it."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness import MpiJob, ring_train_binary


def build_dir():
    return Path(ring_train_binary()).resolve().parents[2]


ALL_REDUCE = os.environ.get("NCCL_TESTS_ALL_REDUCE", "")
SIZES = ["-b", "1M", "-e", "4M", "-f", "2", "-n", "5", "-w", "1", "-c", "0"]


@unittest.skipUnless(ALL_REDUCE and Path(ALL_REDUCE).exists(), "NCCL_TESTS_ALL_REDUCE names no built all_reduce_perf")
class NcclTestsOfSeveralGpusPerProcess(unittest.TestCase):
    def setUp(self):
        self.dump_root = tempfile.mkdtemp(prefix="hangwatch-nccl-tests-")
        self.addCleanup(shutil.rmtree, self.dump_root, True)

    def report(self, shape, faults):
        job_id = f"{shape[0].strip('-')}-{faults.split('=')[0]}"
        env = {"LD_PRELOAD": str(build_dir() / "watchdog" / "libhangwatch.so"), "HANGWATCH_DUMP_DIR": self.dump_root,
               "HANGWATCH_JOB_ID": job_id, "HANGWATCH_TIMEOUT": "6", "HANGWATCH_ON_HANG": "abort",
               "HANGWATCH_FORENSICS": str(build_dir() / "forensics" / "forensics"), "SIMGPU_FAULTS": faults,
               "NCCL_ALGO": "Ring"}
        argv = [str(build_dir() / "simgpu-dropin" / "simgpu-run"), ALL_REDUCE, *shape, *SIZES]
        with MpiJob(2, argv, env=env, program="all_reduce_perf") as job:
            code = job.wait_exit(180)
            out = job.output()
        self.assertNotEqual(code, 0, out[-3000:])  # abort mode ends the hung job
        self.assertIn("nccl-tests version", out)
        r = subprocess.run([str(build_dir() / "forensics" / "forensics"), "report", str(Path(self.dump_root) / job_id),
                            "--format", "json", "--wait", "0"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        context = json.dumps(report["verdict"], indent=1)
        self.assertEqual((report["ranks_are"], report["world_size"], report["processes"]), ("gpu", 4, 2), context)
        self.assertEqual(sorted((g["rank"], g["process"]) for g in report["gpu_ranks"]),
                         [(0, 0), (1, 0), (2, 1), (3, 1)])
        self.assertEqual(report["ranks_missing"], [])
        self.assertNotIn("no dump", json.dumps(report["verdict"]))
        return report["verdict"], context

    def check_shape(self, shape):
        verdict, context = self.report(shape, "dead-link=3->0@op=4")
        self.assertEqual((verdict["kind"], verdict["confident"]), ("communication-hang", True), context)
        self.assertEqual(verdict["culprit_link"], {"from": 3, "to": 0}, context)
        verdict, context = self.report(shape, "dead-rank=3@op=4")
        self.assertEqual((verdict["kind"], verdict["confident"]), ("communication-hang", True), context)
        self.assertEqual(verdict["culprit_ranks"], [3], context)
        self.assertIn("GPU 3", verdict["headline"])

    def test_a_thread_per_gpu(self):
        self.check_shape(["-t", "2"])

    def test_one_thread_and_a_group_of_gpus(self):
        self.check_shape(["-g", "2"])


if __name__ == "__main__":
    unittest.main()
