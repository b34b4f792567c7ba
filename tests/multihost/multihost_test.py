#!/usr/bin/python3
"""Multi-host tests: 2 ps_server and 2 worker processes, each on its own
"host" (a network namespace), joined by a bridge in a namespace of its own,
so that every packet goes to an address inside the namespaces this test
made (the host's own interfaces and routes are never touched). Server 0
binds 0.0.0.0 and advertises its address by itself; server 1 binds its
IPv6 address, so the workers reach one shard over IPv4 and one over IPv6. Each case
runs the same job once on 127.0.0.1 in the root namespace as the reference:

  a  ps_worker trains LR on ps_datagen data (bsp): eval AUC within 0.002
  b  ps_test_worker, SGD with integer gradients (rows do not depend on the
     order pushes apply in): rows bit-identical, same server counters
  c  as b with 5 % random loss (nftables) on every host's link
  d  as b, a 5 s partition of a worker, then of a server, mid-push
  e  as b, TCP resets for 2 s in a worker's namespace mid-push: the run
     re-establishes its connections and finishes with the same rows
  f  ps_worker, a server partitioned past --timeout_ms: every worker exits
     3 with the recovery message within timeout + 1 s

Needs root (namespaces, veths, nftables); otherwise it prints "SKIPPED:
needs root and network namespaces" and exits 77 (CTest SKIP_RETURN_CODE).
Every namespace (with its links and nft tables) and every process is
removed when a case ends, also when it fails; a run killed outright leaves
namespaces named psmh-<pid>-..., which the next run deletes (their pid is
gone). PS_MULTIHOST_KEEP=1 keeps the temporary folder with the logs.

Usage (CTest passes the binaries; -k picks cases as in unittest):
  tests/multihost/multihost_test.py --server=B/server/ps_server \\
      --worker=B/worker/train/ps_worker --test_worker=B/tests/ps/ps_test_worker \\
      --datagen=B/worker/datagen/ps_datagen [-k test_b] [-v]
"""

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import sys
import tempfile
import time
import unittest

from netns import *  # noqa: F401,F403
from processes import *  # noqa: F401,F403

# The transport between namespaces: the default, "auto", which must pick tcp
# for a peer in another network namespace of the same kernel (shm's abstract
# socket is per namespace). PS_MULTIHOST_TRANSPORT overrides it.
NS_TRANSPORT = os.environ.get("PS_MULTIHOST_TRANSPORT", "auto")
# The loopback reference always runs tcp: the throughput figures compare
# tcp between namespaces with tcp over loopback.
REFERENCE_TRANSPORT = "tcp"

ROWS_TABLES = """
table { id: 1 name: "rows" kind: HASHED dim: 4 capacity: 4096
        push_value_type: FP32 optimizer { name: "sgd" learning_rate: 1 }
        initializer { name: "zeros" } }
table { id: 2 name: "ids" kind: EXACT dim: 4 capacity: 4096
        admit_after_pushes: 1 optimizer { name: "sgd" learning_rate: 1 } }
"""
ROWS_STEPS = 60
# Under 5 % loss a step takes ~1 s (most steps wait out a tcp
# retransmission timeout, 200 ms or more): that case runs fewer steps.
LOSS_STEPS = 20
# The same keys and gradients go into the EXACT table too (keyed packets in
# the inboxes): its rows must come out as bit-identical as the HASHED ones.
ROWS_JOB = ["--batch_keys=256", "--key_space=4096", "--integer_gradients",
            "--gradient_scale=4", "--report_every=1", "--exact_table=ids"]
STEP_LINE = r"^worker (\d+): step (\d+), clock (\d+)"

LR_TABLES = """
table { id: 1 name: "emb" kind: HASHED dim: 1 capacity: 262144
        push_value_type: FP32
        optimizer { name: "adagrad" learning_rate: 0.05
                    initial_accumulator: 0.1 }
        initializer { name: "zeros" } }
"""
TRAIN_ROWS = 200000  # 1-3 s of training on 2 busy cores
EVAL_ROWS = 20000
TRAIN_JOB = ["--model=lr", "--sparse_table=emb", "--batch_size=200",
             "--threads=1"]


class MultiHostTest(unittest.TestCase):
    """Each test makes its own fabric and processes, and removes them in
    tearDown (also when the test failed)."""

    _reference_rows = {}  # steps -> the loopback run of ROWS_JOB
    _train_data = None

    def setUp(self):
        self.t0 = time.monotonic()

    def tearDown(self):
        result = self._outcome.result  # the test's outcome is recorded
        failed = any(t is self for t, _ in result.errors + result.failures)
        errors = run_cleanups()
        if failed:
            self._print_logs()
        log(f"{self.id().split('.')[-1]}: {time.monotonic() - self.t0:.1f} s "
            "wall (with its reference run)")
        if errors:
            raise errors[0]

    def _print_logs(self):
        """The logs this test wrote (not an earlier test's reference)."""
        since = time.time() - (time.monotonic() - self.t0) - 1
        for name in sorted(os.listdir(RUN['tmp'])):
            path = os.path.join(RUN['tmp'], name)
            if name.endswith(".log") and os.path.getmtime(path) >= since:
                with open(path, errors="replace") as f:
                    lines = f.readlines()
                print(f"==== {name} (last 30 lines)")
                print("".join(lines[-30:]), end="", flush=True)

    def path(self, name):
        return os.path.join(RUN['tmp'], name)

    def write(self, name, text):
        p = self.path(name)
        with open(p, "w") as f:
            f.write(text)
        return p

    def fabric(self):
        f = Fabric(HOSTS)
        at_cleanup(f.close)
        return f

    # --- the rows job (ps_test_worker) ---

    def rows_job(self, fabric, transport, name, steps=ROWS_STEPS,
                 timeout_ms=15000, step_sleep_ms=0, during=None):
        """Runs ROWS_JOB for `steps` steps; `during(cluster)` runs while the
        workers step. The pause after each step (step_sleep_ms) makes a
        longer run, with the same rows. Returns (rows file text of worker 0,
        of worker 1, steps/s of the slower worker, cluster)."""
        tables = self.write("rows.tables", ROWS_TABLES)
        c = Cluster(self, fabric, name, tables, transport, timeout_ms)
        outs = [self.path(f"{name}-rows-{w}.txt") for w in range(2)]
        for w in range(2):
            c.start_worker("test_worker", w, ROWS_JOB + [
                f"--steps={steps}", f"--rows_out={outs[w]}",
                f"--step_sleep_ms={step_sleep_ms}"])
        if during is not None:
            during(c)
        c.finish(timeout=120)
        self.check_clock_sequence(c, steps)
        # From the arrival times of the step lines (the program's own
        # figure has 10 ms resolution).
        rates = []
        for w in c.workers:
            t = [t for t, line in w.lines if re.search(STEP_LINE, line)]
            rates.append((len(t) - 1) / max(t[-1] - t[0], 1e-9))
        rows = []
        for o in outs:
            with open(o) as f:
                rows.append(f.read())
        return rows[0], rows[1], min(rates), c

    def check_clock_sequence(self, cluster, steps):
        """Every worker printed steps 1..steps once each, in order, with
        clock == step: no step (hence no clock tick) repeated or missing."""
        for w in cluster.workers:
            seen = [(int(m.group(2)), int(m.group(3)))
                    for m in re.finditer(STEP_LINE, w.text(), re.M)]
            self.assertEqual(seen, [(s, s) for s in range(1, steps + 1)],
                             w.name)

    def reference_rows(self, steps=ROWS_STEPS):
        """(rows file, steps/s) of ROWS_JOB on loopback; once per process."""
        cls = MultiHostTest
        if steps not in cls._reference_rows:
            r0, r1, rate, _ = self.rows_job(Loopback(), REFERENCE_TRANSPORT,
                                            f"loopback{steps}", steps)
            self.assertEqual(r0, r1, "the loopback run's two workers pulled "
                             "different rows")
            figure(f"rows job ({steps} steps) over loopback "
                   f"{REFERENCE_TRANSPORT}: {rate:.1f} steps/s per worker")
            cls._reference_rows[steps] = (r0, rate)
        return cls._reference_rows[steps]

    def assert_same_rows(self, rows, reference, what):
        if rows == reference:
            return
        got, want = rows.splitlines(), reference.splitlines()
        diff = [f"  {a}  !=  {b}" for a, b in zip(got, want) if a != b]
        self.fail(f"{what}: {len(diff)} lines differ from the loopback run "
                  f"(of {len(want)}), e.g.\n" + "\n".join(diff[:10]))

    # --- the training job (ps_worker) ---

    def train_data(self):
        cls = MultiHostTest
        if cls._train_data is None:
            train, ev = self.path("train.tsv"), self.path("eval.tsv")
            run([BIN["datagen"], "--model=lr", f"--rows={TRAIN_ROWS}",
                 f"--eval_rows={EVAL_ROWS}", "--seed=1", f"--output={train}",
                 f"--eval_output={ev}"])
            cls._train_data = (train, ev)
        return cls._train_data

    def train_job(self, fabric, transport, name, timeout_ms=15000, extra=()):
        train, ev = self.train_data()
        tables = self.write("lr.tables", LR_TABLES)
        c = Cluster(self, fabric, name, tables, transport, timeout_ms)
        for w in range(2):
            c.start_worker("worker", w, TRAIN_JOB + [
                f"--train_data={train}", f"--eval_data={ev}",
                f"--metrics_json={self.path(f'{name}-metrics-{w}.json')}"] +
                list(extra))
        return c

    def trained(self, c, name):
        """(AUC of worker 0, samples/s of the two workers) of a finished
        train_job."""
        c.finish(timeout=120)
        _, m = c.workers[0].wait_line(r"^eval AUC ([\d.]+)", 1)
        rate = 0
        for w in range(2):
            with open(self.path(f"{name}-metrics-{w}.json")) as f:
                rate += json.load(f)["samples_per_sec"]
        return float(m.group(1)), rate

    # --- the cases ---

    def test_a_train_auc_matches_loopback(self):
        ref_auc, ref_rate = self.trained(
            self.train_job(Loopback(), REFERENCE_TRANSPORT, "loopback"),
            "loopback")
        auc, rate = self.trained(
            self.train_job(self.fabric(), NS_TRANSPORT, "ns"), "ns")
        figure(f"training (lr, 2 workers, bsp): {rate:.0f} samples/s over "
               f"{NS_TRANSPORT} between namespaces, {ref_rate:.0f} samples/s "
               f"over loopback {REFERENCE_TRANSPORT}")
        log(f"eval AUC {auc:.4f} across namespaces, {ref_auc:.4f} loopback")
        self.assertLessEqual(abs(auc - ref_auc), 0.002)

    def test_b_rows_bit_identical(self):
        ref, ref_rate = self.reference_rows()
        r0, r1, rate, _ = self.rows_job(self.fabric(), NS_TRANSPORT, "ns")
        figure(f"rows job over {NS_TRANSPORT} between namespaces: "
               f"{rate:.1f} steps/s per worker (loopback {ref_rate:.1f})")
        self.assert_same_rows(r0, ref, "worker 0")
        self.assert_same_rows(r1, ref, "worker 1")

    def test_c_rows_with_5_percent_loss(self):
        ref, ref_rate = self.reference_rows(LOSS_STEPS)
        fabric = self.fabric()
        for h in HOSTS:
            fabric.nft(h, """
table inet psmh_loss {
  chain input { type filter hook input priority 0; policy accept;
    iifname "eth0" numgen random mod 100 < 5 drop; }
  chain output { type filter hook output priority 0; policy accept;
    oifname "eth0" numgen random mod 100 < 5 drop; }
}""")
        r0, r1, rate, _ = self.rows_job(fabric, NS_TRANSPORT, "loss",
                                        LOSS_STEPS)
        figure(f"rows job with 5% loss on every link: {rate:.1f} steps/s "
               f"per worker (loopback {ref_rate:.1f})")
        self.assert_same_rows(r0, ref, "worker 0")
        self.assert_same_rows(r1, ref, "worker 1")

    def partition_for(self, c, fabric, host, at, seconds, after_step):
        """Partitions `host` (Fabric.partition `at`) once worker 0 passed
        `after_step`, heals it `seconds` later; returns (heal time, seconds
        to the next step line of any worker after the heal)."""
        w0 = c.workers[0]
        w0.wait_line(rf"^worker 0: step {after_step},", 60)
        for w in c.workers:
            self.assertTrue(w.running(), f"{w.name} finished before the "
                            "partition: make the job longer")
        fabric.partition(host, at)
        down = time.monotonic()
        log(f"partitioned {host} ({at} side link down) after step "
            f"{after_step}")
        time.sleep(seconds)
        fabric.heal(host, at)
        up = time.monotonic()
        log(f"healed {host} after {up - down:.2f} s")
        nxt = min(w.wait_line(STEP_LINE, 30, after=up)[0] for w in c.workers)
        # bsp: no step ends without every worker's and server's part, so
        # nobody stepped while the partition lasted (the step under way
        # when it began may still end during its first second).
        for w in c.workers:
            stalled = w.lines_between(STEP_LINE, down + 1, up)
            self.assertEqual(stalled, [], f"{w.name} stepped while {host} "
                             "was cut off: the partition did not hold")
        return up, nxt - up

    def test_d_partition_of_a_worker_and_a_server(self):
        ref, _ = self.reference_rows()
        fabric = self.fabric()
        resumed = {}

        def during(c):
            # 100 ms per step: 60 steps take longer than both partitions.
            # The worker's own link goes down, the server's switch port.
            _, resumed["w1 (its eth0 down)"] = self.partition_for(
                c, fabric, "w1", "host", 5, 8)
            _, m = c.workers[0].wait_line(STEP_LINE, 30,
                                          after=time.monotonic())
            _, resumed["s1 (its switch port down)"] = self.partition_for(
                c, fabric, "s1", "switch", 5, int(m.group(2)) + 3)

        r0, r1, _, _ = self.rows_job(fabric, NS_TRANSPORT, "partition",
                                     timeout_ms=15000, step_sleep_ms=100,
                                     during=during)
        for host, secs in resumed.items():
            figure(f"time to resume after a 5 s partition of {host}: "
                   f"{secs:.2f} s from the heal to the next step")
        self.assert_same_rows(r0, ref, "worker 0")
        self.assert_same_rows(r1, ref, "worker 1")

    def test_e_tcp_resets_reconnect(self):
        ref, _ = self.reference_rows()
        fabric = self.fabric()
        ref_stats = [line for line in ref.splitlines()
                     if line.startswith("shard")]

        def during(c):
            c.workers[0].wait_line(r"^worker 0: step 8,", 60)
            fabric.nft("w1", """
table inet psmh_reset {
  chain input { type filter hook input priority 0; policy accept;
    iifname "eth0" meta l4proto tcp reject with tcp reset; }
  chain output { type filter hook output priority 0; policy accept;
    oifname "eth0" meta l4proto tcp reject with tcp reset; }
}""")
            log("tcp resets on in w1")
            time.sleep(2)
            run(fabric.exec_prefix("w1") +
                ["nft", "delete", "table", "inet", "psmh_reset"])
            up = time.monotonic()
            log("tcp resets off in w1")
            t, _ = c.workers[1].wait_line(STEP_LINE, 30, after=up)
            figure(f"time to resume after 2 s of tcp resets: {t - up:.2f} s")

        r0, r1, _, _ = self.rows_job(fabric, NS_TRANSPORT, "reset",
                                     step_sleep_ms=100, during=during)
        # The server counters (packets and rows applied, rejected) are in
        # the rows files: equal files also mean no packet applied twice or
        # lost (the inbox sequence has no duplicate or gap).
        stats = [line for line in r0.splitlines() if line.startswith("shard")]
        self.assertEqual(stats, ref_stats)
        self.assert_same_rows(r0, ref, "worker 0")
        self.assert_same_rows(r1, ref, "worker 1")

    def test_f_partition_past_timeout_exits_3(self):
        timeout_ms = 3000
        fabric = self.fabric()
        # Many epochs: still training when the partition starts.
        c = self.train_job(fabric, NS_TRANSPORT, "lost", timeout_ms,
                           extra=["--epochs=50", "--progress_secs=0.2"])
        for w in c.workers:
            w.wait_line(r"^epoch \d+/\d+ ", 60)
            self.assertTrue(w.running())
        fabric.partition("s1")
        down = time.monotonic()
        log("partitioned s1 (for good)")
        bound = timeout_ms / 1000 + 1 + SLACK_S
        for w in c.workers:
            rc = w.wait(bound + 10)
            took = w.exit_time - down
            figure(f"time to detect a lost peer (--timeout_ms={timeout_ms}): "
                   f"{w.name} exited {rc} {took:.2f} s after the partition "
                   "started")
            self.assertEqual(rc, 3, w.tail())
            self.assertIn("ps_worker: recovery: restart every server with "
                          "--restore_from=latest", w.text())
            self.assertLessEqual(took, bound, w.tail())
        c.stop_servers(must_succeed=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name in ("server", "worker", "test_worker", "datagen"):
        parser.add_argument(f"--{name}", required=True)
    args, rest = parser.parse_known_args()
    for name in ("server", "worker", "test_worker", "datagen"):
        BIN[name] = os.path.abspath(getattr(args, name))
    why = can_use_namespaces()
    if why:
        print(f"SKIPPED: needs root and network namespaces ({why})",
              flush=True)
        return SKIP_RETURN_CODE
    sweep_stale_runs()

    # ctest's SIGTERM, Ctrl-C: unittest lets KeyboardInterrupt through (it
    # would record SystemExit as an error and go on); the finally below
    # cleans up.
    def interrupt(sig, _):
        raise KeyboardInterrupt(f"signal {sig}")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, interrupt)
    os.environ.pop("XFER_TRANSPORT", None)  # the flags say the transport
    RUN['tmp'] = tempfile.mkdtemp(prefix=f"{NS_PREFIX}{os.getpid()}-")
    RUN['secret'] = os.path.join(RUN['tmp'], "cluster.secret")
    fd = os.open(RUN['secret'], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, secrets.token_hex(32).encode())
    os.close(fd)
    t0 = time.monotonic()
    try:
        prog = unittest.main(argv=[sys.argv[0]] + rest, exit=False,
                             verbosity=2)
    finally:
        for e in run_cleanups():
            print(f"cleanup: {e}", flush=True)
        if os.environ.get("PS_MULTIHOST_KEEP") == "1":
            log(f"logs kept in {RUN['tmp']}")
        else:
            shutil.rmtree(RUN['tmp'], ignore_errors=True)
    log(f"total {time.monotonic() - t0:.1f} s wall")
    left = [ns for ns in list_namespaces()
            if ns.startswith(f"{NS_PREFIX}{os.getpid()}-")]
    if left:
        print(f"FAILED: namespaces left behind: {left}", flush=True)
        return 1
    result = prog.result
    if not result.wasSuccessful():
        return 1
    if result.testsRun > 0 and len(result.skipped) == result.testsRun:
        for test, why in result.skipped:
            print(f"SKIPPED: {test.id().split('.')[-1]}: {why}", flush=True)
        return SKIP_RETURN_CODE
    return 0


if __name__ == "__main__":
    sys.exit(main())
