"""A one-machine Slurm cluster for the tests (Debian's slurmctld, slurmd, slurm-client and munge,
installed by scripts/install-deps.sh --tests): its own munge key and socket, state, spool, ports
and logs under a temporary folder, proctrack/linuxproc and task/none (no cgroups), twelve CPUs
declared whatever the machine has (SlurmdParameters=config_overrides), KillWait 25 s (Slurm's
default is 30: either way longer than the 20 s a rank holds a SIGTERM while it dumps), and a
requeued job eligible again after 11 s, not 121 (cred_expire) and scheduled within a second. Started
once for a test class, stopped at its end; clients find it through SLURM_CONF (`env`)."""
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmCluster:
    CPUS = 12

    def __init__(self, kill_wait_s=25):
        self.kill_wait_s = kill_wait_s
        self.root = None
        self.procs = []

    BINARIES = ("slurmctld", "slurmd", "srun", "sbatch", "scancel", "squeue", "munged")

    @classmethod
    def missing(cls):
        """Why this machine cannot run the cluster, or None."""
        if os.geteuid() != 0:
            return "slurmd runs the tasks as root here: the tests need root"
        absent = [b for b in cls.BINARIES if not shutil.which(b)]
        return f"not installed: {' '.join(absent)} (scripts/install-deps.sh --tests)" if absent else None

    def start(self):
        self.root = Path(tempfile.mkdtemp(prefix="hangwatch-slurm-"))
        r = self.root
        for d in ("state", "spool", "munge", "log"):
            (r / d).mkdir()
        key = r / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        sock = r / "munge" / "munge.sock"
        self.run_daemon(["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={sock}",
                         f"--pid-file={r / 'munge' / 'munged.pid'}", f"--log-file={r / 'log' / 'munged.log'}",
                         f"--seed-file={r / 'munge' / 'munged.seed'}"], "munged")
        self.wait_for(lambda: sock.exists(), "munged's socket")
        host = socket.gethostname()
        conf = r / "slurm.conf"
        conf.write_text(f"""ClusterName=hangwatch
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock},cred_expire=10
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
StateSaveLocation={r / 'state'}
SlurmdSpoolDir={r / 'spool'}
SlurmctldPidFile={r / 'slurmctld.pid'}
SlurmdPidFile={r / 'slurmd.pid'}
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmctldLogFile={r / 'log' / 'slurmctld.log'}
SlurmdLogFile={r / 'log' / 'slurmd.log'}
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
KillWait={self.kill_wait_s}
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName={host} CPUs={self.CPUS} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")
        self.env = dict(os.environ, SLURM_CONF=str(conf))
        self.run_daemon(["slurmctld", "-D", "-f", str(conf)], "slurmctld")
        self.run_daemon(["slurmd", "-D", "-f", str(conf)], "slurmd")
        self.wait_for(self.node_idle, "the node to come up idle", timeout=30)
        return self

    def run_daemon(self, argv, name):
        with open(self.root / "log" / f"{name}.out", "w") as log:
            p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                 env=dict(os.environ, SLURM_CONF=str(self.root / "slurm.conf")))
        self.procs.append(p)

    def node_idle(self):
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True)
        return out.returncode == 0 and "idle" in out.stdout

    def wait_for(self, cond, what, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cond():
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited ({p.returncode}) while waiting for {what}:\n{self.logs()}")
            time.sleep(0.1)
        raise RuntimeError(f"timed out waiting for {what}:\n{self.logs()}")

    def logs(self):
        out = []
        for f in sorted((self.root / "log").iterdir()):
            out.append(f"== {f.name}\n" + f.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def jobs(self, but=()):
        """The ids of the jobs queued or running, but those named in `but`."""
        out = subprocess.run(["squeue", "-h", "-o", "%i %j"], env=self.env, capture_output=True, text=True).stdout
        fields = [line.split(maxsplit=1) for line in out.splitlines() if line.strip()]
        return [f[0] for f in fields if (f[1] if len(f) > 1 else "") not in but]

    def cancel_all(self, but=()):
        """Cancels every job but those named in `but`, and waits for them to end."""
        for job in self.jobs(but):
            subprocess.run(["scancel", "--full", job], env=self.env, capture_output=True)
        self.wait_for(lambda: not self.jobs(but), "every job to end", timeout=60)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.root:
            shutil.rmtree(self.root, True)
