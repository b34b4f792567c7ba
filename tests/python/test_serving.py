"""Serving replicas following a training job (issue 41's acceptance test):
a 2-server, 2-worker bsp job checkpoints every second while two ps_serve
replicas follow its folder and a ps.serving client looks keys up
throughout. Every lookup must return rows byte-identical to the checkpoint
its reply names (checked against ps_ckpt export of that checkpoint, which
applies its chain as a restore does); every checkpoint must be served
within 2 s plus one checkpoint interval of its commit; one replica is
killed with SIGKILL mid-run (the client fails over to the other), then
restarted, and serves a complete checkpoint again."""

import json
import re
import signal
import subprocess
import threading
import time
import urllib.request

import numpy as np
import pytest

import ps
import ps.serving
from conftest import BUILD, hashed_rows, run_threads, table_text

SERVE_BIN = BUILD / "serving" / "ps_serve"
CKPT_BIN = BUILD / "checkpoint" / "ps_ckpt"
DIM = 4
TABLES = (table_text(1, "emb", dim=DIM, capacity=4099, optimizer="sgd",
                     learning_rate=0.5) +
          table_text(2, "ids", kind="EXACT", dim=DIM, capacity=8192,
                     optimizer="sgd", learning_rate=0.5,
                     extra="admit_after_pushes: 1 "))


class Replica:
    """A ps_serve process on `root`; address() waits for its port file."""

    def __init__(self, root, folder, name, *flags):
        self.port_file = folder / f"{name}.port"
        self.log_path = folder / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(SERVE_BIN), f"--checkpoint_dir={root}", "--poll_ms=50",
             f"--port_file={self.port_file}", *flags],
            stdout=self.log, stderr=subprocess.STDOUT)

    def address(self, timeout=30):
        deadline = time.monotonic() + timeout
        while not self.port_file.exists():
            assert self.proc.poll() is None, "ps_serve exited"
            assert time.monotonic() < deadline, "ps_serve never got ready"
            time.sleep(0.02)
        return self.port_file.read_text().strip()

    def metric(self, line_start):
        """The value of the metrics line (--metrics_port) that starts with
        `line_start`, scraped now."""
        url = re.search(r"metrics: (http://\S+)",
                        self.log_path.read_text()).group(1)
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith(line_start):
                return float(line.split()[-1])
        raise AssertionError(f"no {line_start} in\n{text}")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@pytest.fixture
def replicas(tmp_path):
    made = []

    def start(root, name, *flags):
        r = Replica(root, tmp_path, name, *flags)
        made.append(r)
        return r

    yield start
    for r in made:
        r.stop()


def exported(ckpt, step, folder):
    """Table name -> (rows, keys or None, spec) of checkpoint `step`."""
    out = folder / f"export-{step}"
    if not out.exists():
        r = subprocess.run(
            [str(CKPT_BIN), "export",
             f"--checkpoint={ckpt}/ckpt-{step:012d}", f"--out={out}"],
            capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    index = json.loads((out / "tables.json").read_text())
    tables = {}
    for t in index["tables"]:
        keys = np.load(out / t["keys_file"]) if "keys_file" in t else None
        tables[t["name"]] = (np.load(out / t["rows_file"]), keys, t)
    return tables, index["created_unix_ms"]


def expected_rows(table, ids):
    """The rows of `ids` in an exported table (zeros for EXACT keys
    without a row)."""
    rows, keys, spec = table
    if keys is None:
        return rows[hashed_rows(spec["hash"], ids)]
    where = {k: i for i, k in enumerate(keys.tolist())}
    out = np.zeros((len(ids), rows.shape[1]), np.float32)
    for i, k in enumerate(ids.view(np.uint64).tolist()):
        if k in where:
            out[i] = rows[where[k]]
    return out


def assert_as_exported(found, table, ids, ckpt, folder):
    """`found`, a lookup of `ids` in `table`, is byte-identical to the
    checkpoint under `ckpt` it names."""
    want = expected_rows(exported(ckpt, found.step, folder)[0][table], ids)
    assert found.rows.tobytes() == want.tobytes()


def test_replicas_follow_a_training_job(servers, replicas, tmp_path):
    ckpt = tmp_path / "ckpt"
    cluster = servers(TABLES, num_shards=2, num_workers=2, consistency="bsp",
                      checkpoint_dir=str(ckpt), checkpoint_every_secs=1,
                      checkpoint_keep=40)
    workers = [cluster.client(0), cluster.client(1)]
    checkpoints = [w.checkpoints() for w in workers]
    rng = np.random.default_rng(3)
    hashed_ids = rng.integers(-2**63, 2**63 - 1, 600, dtype=np.int64)
    exact_keys = rng.integers(0, 2**63 - 1, 600, dtype=np.int64)
    # bsp: both workers must stop after the same step.
    steps, stop_at = [0, 0], [None]

    def stop():
        stop_at[0] = max(steps) + 3

    def train(w):
        client, cp = workers[w], checkpoints[w]
        local = np.random.default_rng(10 + w)
        step = 0
        while stop_at[0] is None or step < stop_at[0]:
            step += 1
            steps[w] = step
            h = hashed_ids[local.integers(0, 600, 64)]
            e = exact_keys[local.integers(0, 600, 64)]
            client.push("emb", h, local.integers(-4, 4, (64, DIM)).astype(
                np.float32))
            client.push("ids", e, local.integers(-4, 4, (64, DIM)).astype(
                np.float32))
            client.clock()
            if cp.due(step):
                cp.checkpoint(step)
            time.sleep(0.01)

    def trainers():
        run_threads(lambda: train(0), lambda: train(1), timeout=120)

    training = threading.Thread(target=trainers)
    training.start()
    try:
        # The first checkpoint, then the replicas.
        deadline = time.monotonic() + 30
        while not any((d / "MANIFEST").exists() for d in ckpt.glob("ckpt-*")):
            assert time.monotonic() < deadline, "no checkpoint committed"
            time.sleep(0.05)
        a = replicas(ckpt, "a")
        b = replicas(ckpt, "b")
        client = ps.serving.Client([a.address(), b.address()])
        seen = []  # (time ms, table, ids, rows, step)
        t_end = time.monotonic() + 8
        killed = False
        while time.monotonic() < t_end:
            for table, ids in (("emb", hashed_ids), ("ids", exact_keys)):
                found = client.lookup(table, ids)
                seen.append((time.time() * 1000, table, ids, found.rows,
                             found.step, found.replica))
            if not killed and time.monotonic() > t_end - 5:
                a.kill()  # the client's replica: it fails over to b
                killed = True
            time.sleep(0.02)
    finally:
        stop()
        training.join()
    assert killed and seen[-1][5] != seen[0][5], "no failover happened"

    # Every lookup: byte-identical to the checkpoint it names.
    steps = sorted({s[4] for s in seen})
    assert len(steps) >= 4, f"the replica served only {steps}"
    exports = {s: exported(ckpt, s, tmp_path) for s in steps}
    for when, table, ids, rows, step, _ in seen:
        want = expected_rows(exports[step][0][table], ids)
        assert rows.tobytes() == want.tobytes(), (
            f"a lookup of {table} named checkpoint {step} but differs")

    # Freshness: each checkpoint committed while the client looked was
    # served within 2 s + one interval (1 s) of its commit.
    listing = sorted(int(d.name[5:]) for d in ckpt.glob("ckpt-*")
                     if (d / "MANIFEST").exists())
    first_look, last_look = seen[0][0], seen[-1][0]
    for step in listing:
        _, created = exported(ckpt, step, tmp_path)
        if not (first_look <= created <= last_look - 3000):
            continue
        served_at = min((s[0] for s in seen if s[4] >= step), default=None)
        assert served_at is not None and served_at - created <= 3000, (
            f"checkpoint {step} committed at {created} was served at "
            f"{served_at}")

    # The killed replica, restarted, serves a complete checkpoint again.
    again = replicas(ckpt, "a-again")
    fresh = ps.serving.Client([again.address()])
    found = fresh.lookup("ids", exact_keys)
    assert_as_exported(found, "ids", exact_keys, ckpt, tmp_path)


def one_checkpoint(servers, tmp_path, table, rows):
    """A one-server job whose `table` got ones at keys 0..rows-1,
    checkpointed at step 1: (the cluster, its checkpoint folder)."""
    ckpt = tmp_path / "ckpt"
    cluster = servers(TABLES, num_shards=1, num_workers=1,
                      checkpoint_dir=str(ckpt), checkpoint_every_steps=1)
    client = cluster.client()
    client.push(table, np.arange(rows, dtype=np.int64),
                np.ones((rows, DIM), np.float32))
    client.clock()
    client.checkpoints().checkpoint(1)
    return cluster, ckpt


def test_lookup_refusals(servers, replicas, tmp_path):
    cluster, ckpt = one_checkpoint(servers, tmp_path, "emb", 4)
    replica = replicas(ckpt, "r")
    lookups = ps.serving.Client(replica.address())
    with pytest.raises(ps.errors.NotFoundError):
        lookups.table("nope")
    with pytest.raises(ps.errors.InvalidArgumentError):
        lookups.lookup("emb", np.arange(4, dtype=np.int64),
                       out=np.empty((3, DIM), np.float32))
    with pytest.raises(ps.errors.InvalidArgumentError):
        lookups.lookup("emb", np.arange(lookups.max_keys + 1, dtype=np.int64))
    found = lookups.lookup("emb", np.arange(4, dtype=np.int64))
    assert found.rows.shape == (4, DIM) and found.step >= 1
    with pytest.raises(ps.errors.Error):
        ps.serving.Client(cluster.addresses[0])  # a training server


def test_replica_metrics(servers, replicas, tmp_path):
    _, ckpt = one_checkpoint(servers, tmp_path, "ids", 5)
    replica = replicas(ckpt, "m", "--metrics_port=0")
    lookups = ps.serving.Client([replica.address()])
    lookups.lookup("ids", np.arange(10, dtype=np.int64))  # 5 without a row
    value = replica.metric
    assert value("ps_serve_checkpoint_step ") >= 1
    assert value("ps_serve_checkpoint_commit_time_seconds ") > 1.6e9
    assert value("ps_serve_seconds_behind_newest ") >= 0
    assert value('ps_serve_lookups_total{table="ids"}') == 1
    assert value('ps_serve_lookup_keys_total{table="ids"}') == 10
    assert value('ps_serve_lookup_missing_keys_total{table="ids"}') == 5
    assert value("ps_serve_lookup_seconds_count ") == 1
    assert value('ps_serve_switches_total{how="loaded"}') == 1


def test_replica_serves_a_table_larger_than_its_memory(servers, replicas,
                                                       tmp_path):
    """A tiered EXACT table (64 rows a shard in memory, the rest on disk,
    as the training servers keep it): the replica keeps the same bound,
    reads the other rows from its own disk tier, byte-identical to the
    checkpoint, and brings in the rows lookups read."""
    ckpt = tmp_path / "ckpt"
    tiered = table_text(3, "big", kind="EXACT", dim=DIM, capacity=64,
                        optimizer="sgd", learning_rate=0.5,
                        extra="admit_after_pushes: 1 "
                              "when_full: WHEN_FULL_MOVE_TO_DISK ")
    cluster = servers(tiered, num_shards=1, num_workers=1,
                      checkpoint_dir=str(ckpt), checkpoint_every_steps=1,
                      disk_tier_dir=str(tmp_path / "server-tier"))
    client = cluster.client()
    keys = np.arange(1, 601, dtype=np.int64) * 7919
    rng = np.random.default_rng(5)
    client.push("big", keys, rng.integers(-4, 4, (600, DIM)).astype(np.float32))
    client.clock()
    client.checkpoints().checkpoint(1)

    # Without a folder for the disk tier, the replica says so and exits 2.
    bad = replicas(ckpt, "no-tier")
    assert bad.proc.wait(timeout=30) == 2
    assert "--disk_tier_dir" in bad.log_path.read_text()

    tier = tmp_path / "replica-tier"
    replica = replicas(ckpt, "tiered", f"--disk_tier_dir={tier}",
                       "--metrics_port=0")
    lookups = ps.serving.Client([replica.address()])

    def metric(name):
        return replica.metric(name + '{table="big"}')

    found = lookups.lookup("big", keys)
    assert_as_exported(found, "big", keys, ckpt, tmp_path)
    assert metric("ps_serve_tier_memory_bound_rows") == 64
    assert metric("ps_serve_tier_memory_rows") <= 64
    assert metric("ps_serve_tier_disk_reads_total") >= 600 - 64
    assert any(tier.rglob("*.sst")) or any(tier.rglob("*.log"))

    # A hot set read again and again moves in: its reads stop reaching disk.
    hot = keys[-32:]
    deadline = time.monotonic() + 20
    while True:
        lookups.lookup("big", hot)
        before = metric("ps_serve_tier_disk_reads_total")
        lookups.lookup("big", hot)
        if metric("ps_serve_tier_disk_reads_total") == before:
            break
        assert time.monotonic() < deadline, "the hot rows never moved in"
        time.sleep(0.1)
    assert metric("ps_serve_tier_promoted_rows_total") >= 32

    # The next checkpoint changes rows in both tiers; lookups follow it.
    client.push("big", keys, np.ones((600, DIM), np.float32))
    client.clock()
    client.checkpoints().checkpoint(2)
    deadline = time.monotonic() + 20
    while (found := lookups.lookup("big", keys)).step < 2:
        assert time.monotonic() < deadline, "checkpoint 2 never served"
        time.sleep(0.05)
    assert_as_exported(found, "big", keys, ckpt, tmp_path)

    # kill -9, then a restart on the same folder: what the killed replica
    # left there is removed, and a complete checkpoint is served again.
    replica.kill()
    again = replicas(ckpt, "tiered-again", f"--disk_tier_dir={tier}")
    found = ps.serving.Client([again.address()]).lookup("big", keys)
    assert_as_exported(found, "big", keys, ckpt, tmp_path)
    assert sorted(p.name for p in tier.iterdir()) == ["tables-0"]
