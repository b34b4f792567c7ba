"""Bad input raises a clear exception and never crashes the interpreter.

The in-process tests check the exception class and message; the
subprocess tests run the same calls (and a lost server) in a fresh
interpreter and require it to exit with 0 after printing every exception,
so a segfault or abort fails them."""

import ctypes
import os
import signal
import socket
import time

import numpy as np
import pytest
import torch

import ps
import ps.torch
from ps import errors
from conftest import table_text

DIM = 4
TABLES = (table_text(1, "emb", dim=DIM) +
          table_text(2, "dense", kind="DENSE", dim=DIM, capacity=8))
KEYS = np.arange(50, dtype=np.int64)  # both shards


@pytest.fixture
def cluster(servers):
    return servers(TABLES, num_shards=2, num_workers=1)


def grads(n=len(KEYS), dim=DIM, dtype=np.float32):
    return np.ones((n, dim), dtype=dtype)


def test_wrong_dtype_is_type_error(cluster):
    c = cluster.client()
    with pytest.raises(TypeError, match="grads must have dtype float32, "
                       "not float64"):
        c.push("emb", KEYS, grads(dtype=np.float64))
    with pytest.raises(TypeError, match="keys must have dtype int64 or "
                       "uint64, not float64"):
        c.pull("emb", KEYS.astype(np.float64))
    with pytest.raises(TypeError, match="int32"):
        c.pull("emb", KEYS.astype(np.int32))
    with pytest.raises(TypeError, match="out must have dtype float32"):
        c.pull("emb", KEYS, out=np.zeros((len(KEYS), DIM)))
    with pytest.raises(TypeError, match="float64"):
        c.push("emb", torch.from_numpy(KEYS),
               torch.ones(len(KEYS), DIM, dtype=torch.float64))
    with pytest.raises(TypeError, match="float"):
        c.pull("emb", torch.tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="float64"):
        c.push_dense("dense", np.zeros(8 * DIM))


def test_shape_mismatch_is_invalid_argument(cluster):
    c = cluster.client()
    for call, pattern in [
            (lambda: c.push("emb", KEYS, grads(dim=DIM - 1)),
             r"grads has shape \(50, 3\), but 50 keys of dim 4 need"),
            (lambda: c.push("emb", KEYS, np.zeros(17, np.float32)),
             "17 values for 50 keys of dim 4"),
            (lambda: c.push("emb", KEYS, np.zeros((50, 4, 1), np.float32)),
             "must be .* or flat"),
            (lambda: c.pull("emb", KEYS, out=np.zeros((5, DIM), np.float32)),
             r"out has shape \(5, 4\)"),
            (lambda: c.pull("emb", KEYS.reshape(5, 10)),
             "keys must be one-dimensional"),
            (lambda: c.push_dense("dense", np.zeros(3, np.float32)), ""),
            (lambda: c.pull_dense("emb"), "not DENSE")]:
        with pytest.raises(errors.InvalidArgumentError, match=pattern):
            call()
    # An InvalidArgumentError is a ValueError too.
    with pytest.raises(ValueError):
        c.push("emb", KEYS, grads(n=3))


def test_bad_buffers(cluster):
    c = cluster.client()
    wide = np.zeros((len(KEYS), 2 * DIM), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match="C-contiguous"):
        c.pull("emb", KEYS, out=wide[:, ::2])
    with pytest.raises(errors.InvalidArgumentError, match="C-contiguous"):
        c.pull("emb", np.arange(100, dtype=np.int64)[::2])
    with pytest.raises(errors.InvalidArgumentError, match="C-contiguous"):
        c.pull("emb", KEYS, out=torch.zeros(DIM, len(KEYS)).t())
    with pytest.raises(errors.InvalidArgumentError, match="C-contiguous"):
        c.push("emb", KEYS, np.ones((DIM, len(KEYS)), np.float32).T)
    ro = np.zeros((len(KEYS), DIM), np.float32)
    ro.flags.writeable = False
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        c.pull("emb", KEYS, out=ro)
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        c.pull_dense("dense", out=np.frombuffer(bytes(8 * DIM * 4),
                                                np.float32))
    # Nothing above wrote the rows; a good call still works.
    np.testing.assert_array_equal(c.pull("emb", KEYS),
                                  np.zeros((len(KEYS), DIM), np.float32))


def test_unknown_table(cluster):
    c = cluster.client()
    with pytest.raises(errors.NotFoundError, match="no table 'nope'"):
        c.pull("nope", KEYS)
    with pytest.raises(errors.NotFoundError, match="no table 99"):
        c.push(99, KEYS, grads())
    with pytest.raises(LookupError):
        ps.torch.Embedding(c, "nope")
    with pytest.raises(errors.InvalidArgumentError):
        c.table(1.5)


def test_embedding_bad_arguments(cluster):
    c = cluster.client()
    with pytest.raises(errors.InvalidArgumentError, match="DENSE"):
        ps.torch.Embedding(c, "dense")
    with pytest.raises(errors.InvalidArgumentError, match="mode"):
        ps.torch.Embedding(c, "emb", mode="median")
    emb = ps.torch.Embedding(c, "emb")
    with pytest.raises(TypeError, match="integer tensor"):
        emb(torch.tensor([1.0, 2.0]))
    with pytest.raises(errors.InvalidArgumentError, match="offsets"):
        emb(torch.tensor([1, 2]), offsets=torch.tensor([0]))


def test_closed_client(cluster):
    c = cluster.client()
    c.close()
    for call in (lambda: c.pull("emb", KEYS), lambda: c.push(
            "emb", KEYS, grads()), c.clock, c.barrier, lambda: c.step,
            lambda: c.stats(0), lambda: c.table("emb")):
        with pytest.raises(errors.NotInitializedError, match="closed"):
            call()
    with ps.Client(cluster.addresses) as c2:
        assert c2.num_servers == 2
    with pytest.raises(errors.NotInitializedError):
        c2.pull("emb", KEYS)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connect_to_nobody():
    t0 = time.monotonic()
    with pytest.raises(errors.Error) as info:
        ps.Client([f"127.0.0.1:{free_port()}"], timeout_ms=1000)
    assert time.monotonic() - t0 < 5
    assert type(info.value) is not errors.Error  # a specific subclass
    assert "127.0.0.1" in str(info.value)


def test_wrong_cluster_secret(servers, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 32)
    os.chmod(secret, 0o600)
    cluster = servers(TABLES, num_shards=2, num_workers=1,
                      cluster_secret_file=secret)
    with pytest.raises(errors.UnauthenticatedError, match="cluster secret"):
        ps.Client(cluster.addresses, secret=b"x" * 32, timeout_ms=2000)
    with pytest.raises(errors.UnauthenticatedError, match="requires the "
                       "cluster secret"):
        ps.Client(cluster.addresses, timeout_ms=2000)
    with pytest.raises(errors.InvalidArgumentError, match="too short"):
        ps.Client(cluster.addresses, secret="short")
    # The right one, as bytes and as the file: both connect.
    with ps.Client(cluster.addresses, secret=b"s" * 32) as c:
        c.push("emb", KEYS, grads())
        c.wait_applied()
    with ps.Client(cluster.addresses, secret_file=str(secret)) as c:
        np.testing.assert_array_equal(c.pull("emb", KEYS), grads())


def test_secret_from_the_environment_stays_there(servers, tmp_path,
                                                 monkeypatch):
    """The programs wipe $PS_CLUSTER_SECRET from their environment; the
    package must not: the environment is its user's. Checked in os.environ
    and in the C library's environment, which the package reads."""
    secret = tmp_path / "secret"
    secret.write_bytes(b"e" * 32)
    os.chmod(secret, 0o600)
    cluster = servers(TABLES, num_shards=1, num_workers=1,
                      cluster_secret_file=secret)
    monkeypatch.setenv("PS_CLUSTER_SECRET", "e" * 32)
    with ps.Client(cluster.addresses, timeout_ms=5000) as c:
        c.push("emb", KEYS, grads())  # authenticated: the secret was read
    assert os.environ["PS_CLUSTER_SECRET"] == "e" * 32
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    assert libc.getenv(b"PS_CLUSTER_SECRET") == b"e" * 32


def test_servers_stop_when_the_script_fails(run_python, tmp_path):
    # No with-block and no stop(): an uncaught exception ends the script.
    (tmp_path / "t.tables").write_text(table_text(1, "emb"))
    out = run_python("""
        import ps
        servers = ps.LocalServers("t.tables", num_shards=2).start()
        print("pids", *servers.pids, flush=True)
        raise RuntimeError("the script fails")
        """)
    assert out.returncode != 0 and "the script fails" in out.stderr
    pids = [int(p) for p in out.stdout.split("pids", 1)[1].split()]
    running = [pid for pid in pids if os.path.exists(f"/proc/{pid}")]
    for pid in running:  # leave nothing behind, also when this fails
        os.kill(pid, signal.SIGKILL)
    assert not running, f"servers {running} outlived the script"


def test_malformed_and_missing_data(tmp_path):
    good = "\t".join(["1"] + ["3"] * 13 + ["a1b2c3d4"] * 26)
    bad = "\t".join(["0"] + ["x"] + ["3"] * 12 + ["a1b2c3d4"] * 26)
    short = "\t".join(["0", "1", "2"])
    path = tmp_path / "bad.tsv"
    path.write_text("\n".join([good, bad, good, short, good]) + "\n")

    strict = ps.data.Reader(path, strict=True)
    with pytest.raises(errors.InvalidArgumentError, match="line 2") as info:
        strict.read(10)
    assert "I1 'x' is not an integer" in str(info.value)

    lenient = ps.data.Reader(path)
    batch = lenient.read(10)
    assert len(batch) == 3 and batch.ids.shape == (3, 39)
    stats = lenient.stats
    assert stats["lines"] == 5 and stats["examples"] == 3
    assert stats["malformed"] == 2
    assert stats["first_malformed"][0] == (
        f"{path} line 2: I1 'x' is not an integer")
    assert stats["first_malformed"][1].startswith(f"{path} line 4: ")
    assert "columns" in stats["first_malformed"][1]

    with pytest.raises(errors.NotFoundError, match="does not exist"):
        ps.data.Reader(tmp_path / "missing.tsv")
    with pytest.raises(errors.InvalidArgumentError, match="unknown data "
                       "format 'parquet'"):
        ps.data.Reader(path, format="parquet")
    with pytest.raises(errors.InvalidArgumentError, match="needs a column "
                       "spec"):
        ps.data.Reader(path, format="csv")
    with pytest.raises(errors.InvalidArgumentError, match="3 scores for 2"):
        ps.data.auc(np.zeros(3, np.float32), np.zeros(2, np.float32))
    with pytest.raises(TypeError):
        ps.data.auc(np.zeros(3), np.zeros(3, np.float32))


# --- the same, in a fresh interpreter --------------------------------------

BATTERY = r"""
import sys
import numpy as np
import torch
import ps, ps.torch

c = ps.Client(sys.argv[1].split(","), timeout_ms=2000)
keys = np.arange(50, dtype=np.int64)
ro = np.zeros((50, 4), np.float32)
ro.flags.writeable = False
wide = np.zeros((50, 8), np.float32)
cases = {
    "f64 grads": lambda: c.push("emb", keys, np.ones((50, 4))),
    "float keys": lambda: c.pull("emb", keys.astype(np.float32)),
    "f64 tensor": lambda: c.push("emb", torch.from_numpy(keys),
                                 torch.ones(50, 4, dtype=torch.float64)),
    "shape": lambda: c.push("emb", keys, np.ones((50, 3), np.float32)),
    "flat size": lambda: c.push("emb", keys, np.ones(7, np.float32)),
    "small out": lambda: c.pull("emb", keys, out=np.zeros(7, np.float32)),
    "2-d keys": lambda: c.pull("emb", keys.reshape(5, 10)),
    "strided out": lambda: c.pull("emb", keys, out=wide[:, ::2]),
    "strided tensor": lambda: c.pull("emb", keys,
                                     out=torch.zeros(4, 50).t()),
    "read-only out": lambda: c.pull("emb", keys, out=ro),
    "unknown table": lambda: c.pull("nope", keys),
    "async bad": lambda: c.pull_async("emb", keys,
                                      out=np.zeros(3, np.float32)).wait(),
    "dense small": lambda: c.push_dense("dense", np.zeros(3, np.float32)),
    "missing file": lambda: ps.data.Reader("/nonexistent/ps/x.tsv"),
    "closed": lambda: (c.close(), c.pull("emb", keys)),
}
for name, call in cases.items():
    try:
        call()
    except Exception as e:
        print(f"{name}: {type(e).__name__}: {e}", flush=True)
    else:
        print(f"{name}: no exception", flush=True)
print("END", flush=True)
"""

EXPECTED = {
    "f64 grads": "TypeError", "float keys": "TypeError",
    "f64 tensor": "TypeError", "shape": "InvalidArgumentError",
    "flat size": "InvalidArgumentError", "small out": "InvalidArgumentError",
    "2-d keys": "InvalidArgumentError", "strided out": "InvalidArgumentError",
    "strided tensor": "InvalidArgumentError",
    "read-only out": "InvalidArgumentError", "unknown table": "NotFoundError",
    "async bad": "InvalidArgumentError", "dense small": "InvalidArgumentError",
    "missing file": "NotFoundError", "closed": "NotInitializedError",
}


def outcomes(stdout):
    lines = dict(line.split(": ", 1) for line in stdout.splitlines()
                 if ": " in line)
    return {k: v.split(":", 1)[0] for k, v in lines.items()}


def test_bad_calls_never_crash(cluster, run_python):
    r = run_python(BATTERY, ",".join(cluster.addresses))
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.rstrip().endswith("END")
    assert outcomes(r.stdout) == EXPECTED, r.stdout


LOST = r"""
import os, signal, sys, threading, time
import numpy as np
import ps

addresses, pid = sys.argv[1].split(","), int(sys.argv[2])
c0 = ps.Client(addresses, 0, 2, timeout_ms=2000)
c1 = ps.Client(addresses, 1, 2, timeout_ms=2000)
keys = np.arange(50, dtype=np.int64)
g = np.ones((50, 4), np.float32)
c0.push("emb", keys, g)
c0.wait_applied()
assert (c0.pull("emb", keys) == g).all()

# Worker 0 waits in a bsp clock (worker 1 never comes) while shard 1 dies.
clock = []
def step():
    t = time.monotonic()
    try:
        c0.clock()
        clock.append("no exception")
    except ps.errors.Error as e:
        clock.append(f"{type(e).__name__} after {time.monotonic() - t:.1f} s")
waiter = threading.Thread(target=step)
waiter.start()
time.sleep(0.2)
os.kill(pid, signal.SIGKILL)
waiter.join(10)
print("clock:", clock[0] if clock else "still waiting", flush=True)

def timed(name, call):
    t = time.monotonic()
    try:
        call()
        print(f"{name}: no exception", flush=True)
    except ps.errors.Error as e:
        print(f"{name}: {type(e).__name__}: {time.monotonic() - t:.2f} s: "
              f"{e}", flush=True)

timed("push", lambda: (c1.push("emb", keys, g), c1.wait_applied()))
timed("pull", lambda: c1.pull("emb", keys))
timed("pull again", lambda: c1.pull("emb", keys))
timed("push_async", lambda: c1.push_async("emb", keys, g).wait())
timed("stats", lambda: c1.stats(1))
timed("barrier", c1.barrier)
# Shard 0 still answers for its own rows' server.
print("stats 0:", c1.stats(0)["packets_applied"], flush=True)
print("END", flush=True)
"""


def test_lost_server(servers, run_python):
    cluster = servers(TABLES, num_shards=2, num_workers=2,
                      consistency="bsp")
    t0 = time.monotonic()
    r = run_python(LOST, ",".join(cluster.addresses),
                   cluster.local.procs[1].pid, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.rstrip().endswith("END"), r.stdout
    assert cluster.local.procs[1].poll() is not None  # it was killed
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines()
                 if ": " in line)
    assert lines["clock"].split()[0] in ("PeerLostError", "DeadlineError")
    for name in ("push", "pull", "pull again", "push_async", "stats",
                 "barrier"):
        kind, seconds, message = lines[name].split(": ", 2)
        assert kind in ("PeerLostError", "DeadlineError"), lines[name]
        assert float(seconds.split()[0]) < 5, lines[name]
        assert "server 1" in message or "server-1" in message or \
            cluster.addresses[1] in message, lines[name]
    assert int(lines["stats 0"]) >= 1
    assert time.monotonic() - t0 < 30
