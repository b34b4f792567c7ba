#!/usr/bin/python3
"""deploy/slurm/ps_job.sbatch on a real one-node Slurm, set up here.

munged (its own key and socket), slurmctld and slurmd run from a temporary
folder with a small slurm.conf on free ports. The job (2 ps_server and 2
ps_worker tasks of one srun, LR on ps_datagen rows, BSP, a checkpoint every
40 steps) runs twice:
  1. to the end: it completes without a requeue and its eval AUC is near
     the planted model's;
  2. with one server killed (kill -9, its pid from scontrol listpids) after
     the first checkpoint: the job requeues itself, its second run restores
     the newest checkpoint on every shard, the workers resume at its step,
     and the job completes with the AUC of the first job.
Every daemon is stopped (by its pid file) and every process of the job is
gone afterwards, also when a check fails.

  slurm_job_test.py --server=BIN --worker=BIN --datagen=BIN --source_dir=DIR
  (PS_KEEP_TEST_DIR=1 keeps the temporary folder, logs and all.)

Needs root (slurmd runs jobs as their user) and Debian's slurm-wlm and munge
(scripts/setup.sh installs them); exits 77 (skipped) without them.
"""
import argparse
import ctypes
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

SKIP = 77
ARGS = None  # the command line (main)
LIVE = []  # MiniSlurm instances to stop however the run ends (main)

TABLES = """table {
  id: 1 name: "emb" kind: HASHED dim: 1 capacity: 65536
  push_value_type: FP32
  optimizer { name: "adagrad" learning_rate: 0.05 initial_accumulator: 0.1 }
  initializer { name: "zeros" }
}
"""
# 40k training rows, 12 epochs of 80 steps (500 rows each): about 2 s of
# training on 2 idle cores, long enough to kill a server mid-way.
ROWS, EPOCHS, BATCH = 40000, 12, 500
CHECKPOINT_EVERY = 40  # steps
SERVERS, WORKERS = 2, 2
DONE_STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL",
               "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}


def free_port():
    """A free port below the kernel's ephemeral range. Port 0's answer is in
    that range, where the other tests' outgoing connections (the release
    suite runs two at once, some with hundreds of connections) take their
    source ports: one could take it in the seconds before slurmctld or
    slurmd binds it, and the node would never register."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    rng = random.Random()
    for _ in range(1000):
        port = rng.randrange(10000, max(10001, ephemeral_low))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port below %d" % ephemeral_low)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def wait_for(predicate, timeout, what):
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("timed out after %d s waiting for %s"
                                 % (timeout, what))
        time.sleep(0.05)


def _die_with_parent():
    """In a daemon's child before exec: SIGTERM when this test dies (also by
    SIGKILL, e.g. a ctest timeout), so no daemon outlives it."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


class MiniSlurm:
    """munged, slurmctld and slurmd for one node "localhost", all under root.

    The daemons run in the foreground as children of this process (so that
    they are reaped); stop() ends them through their pid files.
    """

    DAEMONS = ("slurmd", "slurmctld", "munged")  # the order stop() ends them

    def __init__(self, root):
        self.root = root
        self.conf = os.path.join(root, "slurm.conf")
        self.socket = os.path.join(root, "munge.socket")
        self.procs = {}
        self.stopped = False
        LIVE.append(self)
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        for key in list(self.env):  # a Slurm job running this test
            if key.startswith(("SLURM_", "SBATCH_", "SRUN_")) and key != "SLURM_CONF":
                del self.env[key]

    def path(self, name):
        return os.path.join(self.root, name)

    def _spawn(self, name, argv):
        log = open(self.path(name + ".out"), "w")
        self.procs[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
            stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        log.close()

    def start(self):
        for d in ("state", "spool"):
            os.mkdir(self.path(d))
        key = self.path("munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o600), "wb") as f:
            f.write(secrets.token_bytes(1024))
        self._spawn("munged", [
            "munged", "--foreground", "--key-file=" + key,
            "--socket=" + self.socket, "--pid-file=" + self.path("munged.pid"),
            "--log-file=" + self.path("munged.log"),
            "--seed-file=" + self.path("munged.seed")])
        wait_for(lambda: os.path.exists(self.socket), 10, "munged's socket")
        with open(self.path("plugstack.conf"), "w"):
            pass  # no SPANK plugins (not /etc/slurm's)
        with open(self.conf, "w") as f:
            f.write(self._conf())
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", self.conf])
        self._spawn("slurmd", ["slurmd", "-D", "-N", "localhost", "-f", self.conf])
        # slurmd registers within seconds on an idle machine; the release
        # suite runs this beside the multihost tests on 2 cores, hence the
        # margin, and the daemons' last words if it is not enough.
        state = [""]

        def idle():
            state[0] = self.call("sinfo", "-h", "-o", "%t",
                                 check=False).strip()
            return state[0] == "idle"
        try:
            wait_for(idle, 90, "the node to be idle (sinfo)")
        except AssertionError as e:
            raise AssertionError(
                "%s; sinfo says %r\n--- slurmctld.log\n%s\n--- slurmd.log\n%s"
                % (e, state[0], read(self.path("slurmctld.log"))[-2000:],
                   read(self.path("slurmd.log"))[-2000:])) from None

    def _conf(self):
        # cred_expire: a requeued job may start again this many seconds
        # after the requeue (default 120). sched_interval: the scheduler
        # looks every second (default 60).
        return "\n".join([
            "ClusterName=pstest",
            "SlurmctldHost=localhost",
            "SlurmctldPort=%d" % free_port(),
            "SlurmdPort=%d" % free_port(),
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthInfo=socket=%s,cred_expire=5" % self.socket,
            "StateSaveLocation=" + self.path("state"),
            "SlurmdSpoolDir=" + self.path("spool"),
            "SlurmctldPidFile=" + self.path("slurmctld.pid"),
            "SlurmdPidFile=" + self.path("slurmd.pid"),
            "SlurmctldLogFile=" + self.path("slurmctld.log"),
            "SlurmdLogFile=" + self.path("slurmd.log"),
            "PlugStackConfig=" + self.path("plugstack.conf"),
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/builtin",
            "SchedulerParameters=sched_interval=1",
            "MpiDefault=none",
            "JobRequeue=1",
            "ReturnToService=2",
            "KillWait=5",
            "InactiveLimit=0",
            "MailProg=/bin/true",
            "JobCompType=jobcomp/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "NodeName=localhost NodeAddr=127.0.0.1 CPUs=%d State=UNKNOWN"
            % os.cpu_count(),
            "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
            ""])

    def call(self, *argv, check=True):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True,
                           timeout=30)
        if check and r.returncode != 0:
            raise AssertionError("%s failed (%d): %s" % (" ".join(argv),
                                                         r.returncode, r.stderr))
        return r.stdout

    def job(self, job_id):
        """scontrol show job as a dict (JobState, Restarts, ExitCode, ...)."""
        out = self.call("scontrol", "show", "job", "-o", str(job_id))
        return dict(f.split("=", 1) for f in out.split() if "=" in f)

    def wait_job(self, job_id, timeout):
        return wait_for(
            lambda: (lambda j: j if j["JobState"] in DONE_STATES else None)(
                self.job(job_id)), timeout, "job %s to end" % job_id)

    def stop(self):
        """Cancels every job, then ends the daemons; raises if any process
        of ours was left (after killing it)."""
        if self.stopped:
            return
        self.stopped = True
        problems = []
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self.call("scancel", "--user=root", check=False)
            try:
                wait_for(lambda: not self.call("squeue", "-h", check=False)
                         .strip(), 30, "the jobs to end")
            except AssertionError as e:
                problems.append(str(e))
        for name in self.DAEMONS:
            proc = self.procs.get(name)
            if proc is None:
                continue
            try:
                pid = int(read(self.path(name + ".pid")).strip() or proc.pid)
            except ValueError:
                pid = proc.pid
            if proc.poll() is None:
                os.kill(pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    problems.append(name + " ignored SIGTERM: killed")
                    proc.kill()
                    proc.wait()
        left = self.leftovers()
        for pid, cmd in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if left:
            problems.append("processes left behind (killed): %s" % left)
        if problems:
            raise AssertionError("; ".join(problems))

    def leftovers(self):
        """Live processes that name our folder in their command line or run
        with our SLURM_CONF (slurmstepd, the job's tasks)."""
        mine = []
        needle = self.root.encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/environ" % entry, "rb") as f:
                    env = f.read()
                with open("/proc/%s/stat" % entry) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
            except OSError:
                continue
            if needle in cmd or needle in env:
                mine.append((int(entry), cmd.replace(b"\0", b" ").decode(
                    errors="replace").strip()))
        return mine


class SlurmJobTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.t0 = time.monotonic()
        cls.work = tempfile.mkdtemp(prefix="ps-slurm-")
        os.chmod(cls.work, 0o755)  # munged wants its socket's path searchable
        cls.addClassCleanup(cls._remove_work)
        cls.slurm = MiniSlurm(os.path.join(cls.work, "slurm"))
        os.mkdir(cls.slurm.root)
        cls.addClassCleanup(cls.slurm.stop)
        cls.slurm.start()
        print("slurm up in %.1f s" % (time.monotonic() - cls.t0), flush=True)
        data = os.path.join(cls.work, "data")
        os.mkdir(data)
        cls.train = os.path.join(data, "train.tsv")
        cls.eval = os.path.join(data, "eval.tsv")
        out = subprocess.run(
            [ARGS.datagen, "--model=lr", "--rows=%d" % ROWS,
             "--eval_rows=10000", "--seed=1", "--output=" + cls.train,
             "--eval_output=" + cls.eval],
            capture_output=True, text=True, check=True).stdout
        cls.optimum = float(re.search(r"planted optimum AUC ([0-9.]+)", out)
                            .group(1))
        cls.tables = os.path.join(data, "lr.tables")
        with open(cls.tables, "w") as f:
            f.write(TABLES)
        cls.secret = os.path.join(data, "cluster.secret")
        with open(os.open(cls.secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(secrets.token_hex(32))
        cls.clean_auc = None

    @classmethod
    def _remove_work(cls):
        if os.environ.get("PS_KEEP_TEST_DIR"):
            print("kept " + cls.work)
        else:
            shutil.rmtree(cls.work, ignore_errors=True)

    def submit(self, name):
        """sbatches the job from a fresh folder; returns (id, its folder)."""
        cwd = os.path.join(self.work, name)
        os.mkdir(cwd)
        env = dict(
            self.slurm.env,
            PS_SERVER_BIN=ARGS.server, PS_WORKER_BIN=ARGS.worker,
            PS_TABLES=self.tables, PS_CLUSTER_SECRET_FILE=self.secret,
            PS_SERVERS=str(SERVERS), PS_LISTEN_HOST="127.0.0.1",  # traffic stays on loopback
            PS_MAX_REQUEUES="2",
            PS_SERVER_ARGS="--consistency=bsp --checkpoint_every_steps=%d"
            % CHECKPOINT_EVERY,
            PS_WORKER_ARGS="--model=lr --sparse_table=emb --epochs=%d "
            "--batch_size=%d --progress_secs=0 --train_data=%s --eval_data=%s"
            % (EPOCHS, BATCH, self.train, self.eval))
        script = os.path.join(ARGS.source_dir, "deploy/slurm/ps_job.sbatch")
        r = subprocess.run(
            ["sbatch", "--parsable", "-n", str(SERVERS + WORKERS),
             "--overcommit", "--chdir=" + cwd, script],
            env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, "sbatch: " + r.stderr)
        job_id = r.stdout.strip().split(";")[0]
        return job_id, os.path.join(cwd, "ps-job-" + job_id)

    def explain(self, job_id, job_dir):
        """The job's output and the tails of its logs, for a failure."""
        parts = ["== job output\n" + read(os.path.join(
            os.path.dirname(job_dir), "ps-job-%s.out" % job_id))]
        for run in sorted(os.listdir(job_dir)) if os.path.isdir(job_dir) else []:
            run_dir = os.path.join(job_dir, run)
            for log in sorted(os.listdir(run_dir)):
                if log.endswith(".log"):
                    text = read(os.path.join(run_dir, log))
                    parts.append("== %s/%s\n%s" % (run, log, text[-3000:]))
        parts.append("== slurmctld.log\n" + read(self.slurm.path("slurmctld.log"))[-2000:])
        return "\n".join(parts)

    def metrics(self, job_dir, run):
        with open(os.path.join(job_dir, "run-%d" % run, "worker-0.json")) as f:
            return json.load(f)

    def test_a_job_trains_to_the_end(self):
        t0 = time.monotonic()
        job_id, job_dir = self.submit("clean")
        job = self.slurm.wait_job(job_id, 90)
        why = self.explain(job_id, job_dir)
        self.assertEqual(job["JobState"], "COMPLETED", why)
        self.assertEqual(job["Restarts"], "0", why)
        m = self.metrics(job_dir, 0)
        self.assertEqual(m["train_examples"], EPOCHS * ROWS // WORKERS, why)
        self.assertGreater(m["eval_auc"], self.optimum - 0.03, why)
        type(self).clean_auc = m["eval_auc"]
        print("clean job: AUC %.4f (planted optimum %.4f) in %.1f s"
              % (m["eval_auc"], self.optimum, time.monotonic() - t0), flush=True)

    def test_b_killed_server_requeues_and_resumes(self):
        t0 = time.monotonic()
        job_id, job_dir = self.submit("killed")
        run0 = os.path.join(job_dir, "run-0")
        committed = re.compile(r"checkpoint \S*ckpt-0*(\d+) complete")

        def first_checkpoint():
            if committed.search(read(os.path.join(run0, "server-0.log"))):
                return "checkpoint"
            if self.slurm.job(job_id)["JobState"] in DONE_STATES:
                return "job ended"
            return None
        try:
            seen = wait_for(first_checkpoint, 60,
                            "the first checkpoint (run-0/server-0.log)")
        except AssertionError as e:
            self.fail("%s\n%s" % (e, self.explain(job_id, job_dir)))
        self.assertEqual(seen, "checkpoint",
                         "the job ended before its first checkpoint\n" +
                         self.explain(job_id, job_dir))

        def server_pid():
            # Rows: PID JOBID STEPID LOCALID GLOBALID. Task 1 of step 0 is
            # ps_task.sh of shard 1; its child ps_server is listed with
            # GLOBALID "-".
            rows = [line.split() for line in self.slurm.call(
                "scontrol", "listpids", job_id, "localhost").splitlines()[1:]]
            step = [r for r in rows if len(r) == 5 and r[2] == "0"]
            task = [r[0] for r in step if r[4] == "1"]
            for r in step:
                stat = read("/proc/%s/stat" % r[0])
                if task and stat.startswith(r[0] + " (ps_server) ") and \
                        stat.rsplit(")", 1)[1].split()[1] == task[0]:
                    return int(r[0])
            return None
        pid = wait_for(server_pid, 10, "ps_server of task 1 in scontrol listpids")
        os.kill(pid, signal.SIGKILL)
        killed_at = time.monotonic()

        job = self.slurm.wait_job(job_id, 90)
        why = self.explain(job_id, job_dir)
        self.assertEqual(job["JobState"], "COMPLETED", why)
        self.assertEqual(job["Restarts"], "1", why)
        out = read(os.path.join(os.path.dirname(job_dir), "ps-job-%s.out" % job_id))
        self.assertIn("requeueing the job", out, why)
        # The run killed did not finish; the next one restored on every shard
        # the same checkpoint, and the workers resumed at its step.
        self.assertFalse(os.path.exists(os.path.join(run0, "worker-0.json")),
                         "the job ended before the kill took effect\n" + why)
        run1 = os.path.join(job_dir, "run-1")
        steps = set()
        for k in range(SERVERS):
            m = re.search(r"restored shard %d of %d from \S+ \(step (\d+)" % (k, SERVERS),
                          read(os.path.join(run1, "server-%d.log" % k)))
            self.assertIsNotNone(m, "shard %d did not restore\n%s" % (k, why))
            steps.add(int(m.group(1)))
        self.assertEqual(len(steps), 1, why)
        step = steps.pop()
        self.assertGreater(step, 0)
        self.assertEqual(step % CHECKPOINT_EVERY, 0)
        for w in range(WORKERS):
            self.assertIn("resumed from step %d," % step,
                          read(os.path.join(run1, "worker-%d.log" % w)), why)
        m = self.metrics(job_dir, 1)
        # Only the rest of the data: a step is BATCH rows over the workers.
        self.assertEqual(m["train_examples"], EPOCHS * ROWS // WORKERS - step * BATCH // WORKERS, why)
        self.assertGreater(m["eval_auc"], self.optimum - 0.03, why)
        if self.clean_auc is not None:
            self.assertAlmostEqual(m["eval_auc"], self.clean_auc, delta=0.01)
        print("killed job: shard 1 killed %.1f s in, requeued, restored step %d, "
              "AUC %.4f, done %.1f s after the kill (%.1f s in all)"
              % (killed_at - t0, step, m["eval_auc"], time.monotonic() - killed_at,
                 time.monotonic() - t0), flush=True)


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag in ("server", "worker", "datagen", "source_dir"):
        p.add_argument("--" + flag, required=True)
    ARGS, rest = p.parse_known_args()
    if os.geteuid() != 0:
        print("SKIPPED: the Slurm test needs root (slurmd runs jobs as their "
              "user; run scripts/test.sh as root)")
        return SKIP
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch", "srun",
                           "scontrol") if shutil.which(b) is None]
    if missing:
        print("SKIPPED: no %s (apt-get install slurm-wlm munge, or "
              "scripts/setup.sh)" % ", ".join(missing))
        return SKIP
    def interrupted(sig, frame):
        raise KeyboardInterrupt("signal %d" % sig)
    signal.signal(signal.SIGTERM, interrupted)
    t0 = time.monotonic()
    try:
        result = unittest.main(argv=[sys.argv[0]] + rest, exit=False,
                               verbosity=2).result
    finally:
        for slurm in LIVE:  # already stopped unless the run was cut short
            slurm.stop()
    print("slurm test: %.1f s" % (time.monotonic() - t0))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
