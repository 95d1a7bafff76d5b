"""Makes the job dirs of the e2e report and analyze scenarios once (about 10 minutes), so
that compare.sh can hold two builds' `forensics report` / `analyze` output against each
other over the same dumps (a refactor must not change a byte).
    python3 tests/e2e/golden/make_jobs.py OUT_DIR      (RING_TRAIN picks the build, default build/)"""
import sys, os
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("RING_TRAIN", str(HERE.parents[2] / "build" / "examples" / "ring_train" / "ring_train"))
import report_jobs
from harness import MpiJob, ring_train_binary
root = Path(sys.argv[1])
for name in report_jobs.SCENARIOS:
    if name == "healthy":
        d = report_jobs.run_healthy_job(root / name)[0]
    else:
        d, out, code = report_jobs.run_hung_job(name, root / name)
    print(name, d, flush=True)
for name, rpn in (("dead-link-8-3to4", 4), ("dead-rank-8", 4)):
    d, out, code = report_jobs.run_hung_job(name, root / (name + "-nodes"), ranks_per_node=rpn)
    print(name + "-nodes", d, flush=True)
SIM = {"SIMGPU_TFLOPS": "0.002", "SIMGPU_GEMM_COMPUTE_LIMIT": "0", "SIMGPU_LINK_GBPS": "0.5", "SIMGPU_RANKS_PER_NODE": "1"}
lib = str(Path(ring_train_binary()).resolve().parents[2] / "watchdog" / "libhangwatch.so")
def run(job_id, args=(), faults="", steps=60, **sim):
    dump = root / "analyze"
    env = {"LD_PRELOAD": lib, "HANGWATCH_DUMP_DIR": str(dump), "HANGWATCH_JOB_ID": job_id, "HANGWATCH_TIMEOUT": "120",
           "HANGWATCH_COLLECT": "0", "HANGWATCH_METRICS_INTERVAL": "1", "SIMGPU_FAULTS": faults, **SIM, **sim}
    with MpiJob(4, [ring_train_binary(), "--steps", str(steps), "--log-every", "1000", *args], env=env) as job:
        job.wait_exit(120)
    print(job_id, flush=True)
run("healthy"); run("slowgpu", faults="slow-rank=2:0.6"); run("slowlink", faults="slow-link=1->2:0.3")
run("slowlink-off", faults="slow-link=1->2:0.1", HANGWATCH_LINK_PROFILER="0")
run("sync1", args=["--sync-every-layer", "--sync-rank", "1"]); run("syncall", args=["--sync-every-layer"])
run("gc", args=["--gc-pause-ms", "50", "--gc-every", "5", "--gc-rank", "3"])
run("dataloader", args=["--slow-dataloader-rank", "2", "--slow-dataloader-ms", "300"], steps=30)
import shutil
for fixture in (HERE.parents[1] / "fixtures").iterdir():
    if (fixture / "ranks").is_dir():
        shutil.copytree(fixture, root / "fixtures" / fixture.name, dirs_exist_ok=True)
print("fixtures", flush=True)
