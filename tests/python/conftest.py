"""Fixtures of the Python package's tests: real ps_server processes, no mocks.

The package is imported from the build tree: <build>/python, where <build>
is $PS_BUILD_DIR (ctest sets it) or <repo>/build. Run by hand with

    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python

Fixtures:
  servers   a factory: servers(tables_text, num_shards=2, num_workers=2,
            **ps_server_flags) writes the tables file into tmp_path, starts
            ps.LocalServers and returns a Cluster (addresses, client(),
            kill(), log()). Every cluster and client it made is stopped in
            teardown, also when the test failed.
  datagen   a factory: datagen(rows, eval_rows, model="fm") -> (train, eval)
            paths of ps_datagen files (made once per session and arguments).
  run_python  runs a Python snippet in a fresh interpreter with the package
            importable (scenarios whose crash must not take pytest down).
"""

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PS_BUILD_DIR", REPO / "build")).resolve()
PACKAGE_DIR = BUILD / "python"
SERVER_BIN = BUILD / "server" / "ps_server"
DATAGEN_BIN = BUILD / "worker" / "datagen" / "ps_datagen"

if str(PACKAGE_DIR) not in sys.path:
    sys.path.insert(0, str(PACKAGE_DIR))
os.environ.setdefault("PS_SERVER_BIN", str(SERVER_BIN))
# Loopback servers without a secret: a secret in the caller's environment
# would make the clients (not the servers) use one.
for _name in ("PS_CLUSTER_SECRET", "PS_CLUSTER_SECRET_FILE"):
    os.environ.pop(_name, None)

import ps  # noqa: E402  (after the sys.path insertion)


def hashed_rows(hash_spec, ids):
    """The row of each id (int64) of a HASHED table exported by ps_ckpt
    export, computed from its tables.json "hash" alone: its steps
    ("x ^= x >> N", "x *= 0x...") in uint64 arithmetic modulo 2**64, then
    modulo its capacity."""
    x = ids.astype(np.int64).view(np.uint64) ^ np.uint64(hash_spec["seed"])
    with np.errstate(over="ignore"):
        for step in hash_spec["steps"]:
            shift = re.fullmatch(r"x \^= x >> (\d+)", step)
            if shift:
                x = x ^ (x >> np.uint64(int(shift.group(1))))
                continue
            factor = re.fullmatch(r"x \*= (0x[0-9a-f]+)", step)
            assert factor, step
            x = x * np.uint64(int(factor.group(1), 16))
    return x % np.uint64(hash_spec["capacity"])


def table_text(id, name, kind="HASHED", dim=4, capacity=65536,
               optimizer="sum", learning_rate=None, initializer="zeros",
               scale=None, seed=None, extra=""):
    """One `table { ... }` entry of a configs/*.tables file."""
    opt = f'name: "{optimizer}"'
    if learning_rate is not None:
        opt += f" learning_rate: {learning_rate}"
    init = f'name: "{initializer}"'
    if scale is not None:
        init += f" scale: {scale}"
    if seed is not None:
        init += f" seed: {seed}"
    return (f'table {{ id: {id} name: "{name}" kind: {kind} dim: {dim} '
            f"capacity: {capacity} push_value_type: FP32 "
            f"optimizer {{ {opt} }} initializer {{ {init} }} {extra}}}\n")


class Cluster:
    """Started ps.LocalServers plus the clients made for them."""

    def __init__(self, local):
        self.local = local
        self.clients = []

    @property
    def addresses(self):
        return self.local.addresses

    def client(self, worker_id=0, **kwargs):
        kwargs.setdefault("num_workers", self.local.num_workers)
        kwargs.setdefault("timeout_ms", 10000)
        c = ps.Client(self.addresses, worker_id=worker_id, **kwargs)
        self.clients.append(c)
        return c

    def kill(self, shard):
        self.local.kill(shard)

    def log(self, shard):
        return self.local.log(shard)

    def stop(self):
        for c in self.clients:
            c.close()
        self.clients = []
        return self.local.stop()


@pytest.fixture
def servers(tmp_path, request):
    started = []

    def start(tables, num_shards=2, num_workers=2, **flags):
        n = len(started)
        path = tmp_path / f"cluster-{n}.tables"
        path.write_text(tables)
        local = ps.LocalServers(path, num_shards=num_shards,
                                num_workers=num_workers,
                                run_dir=tmp_path / f"cluster-{n}",
                                server_binary=str(SERVER_BIN), **flags)
        cluster = Cluster(local)
        started.append(cluster)
        local.start()
        return cluster

    yield start
    failed = getattr(request.node, "rep_call", None)
    for cluster in started:
        if failed is not None and failed.failed:
            for shard in range(cluster.local.num_shards):
                tail = "\n".join(cluster.log(shard).splitlines()[-20:])
                print(f"--- server {shard} log tail:\n{tail}")
        cluster.stop()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture(scope="session")
def datagen(tmp_path_factory):
    made = {}

    def make(rows, eval_rows, model="fm", seed=1):
        key = (rows, eval_rows, model, seed)
        if key not in made:
            d = tmp_path_factory.mktemp("data")
            train, held = d / "train.tsv", d / "eval.tsv"
            subprocess.run(
                [str(DATAGEN_BIN), f"--rows={rows}",
                 f"--eval_rows={eval_rows}", f"--output={train}",
                 f"--eval_output={held}", f"--model={model}",
                 f"--seed={seed}"],
                check=True, capture_output=True, timeout=60)
            made[key] = (train, held)
        return made[key]

    return make


def python_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(PACKAGE_DIR)] + [p for p in env.get("PYTHONPATH", "").split(
            os.pathsep) if p])
    env["PS_SERVER_BIN"] = str(SERVER_BIN)
    return env


def run_group(cmd, timeout, **kwargs):
    """subprocess.run(cmd, capture_output=True, text=True) in a process
    group of its own: on timeout the whole group (the servers and workers
    it started too) is killed before TimeoutExpired is raised."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.fixture
def run_python(tmp_path):
    """run_python(code, *args, timeout=60) -> CompletedProcess (text) of
    sys.executable running the dedented ``code`` with ``args`` in argv."""

    def run(code, *args, timeout=60):
        script = tmp_path / f"scenario-{len(list(tmp_path.glob('scenario-*')))}.py"
        script.write_text(textwrap.dedent(code))
        return run_group([sys.executable, str(script), *map(str, args)],
                         timeout=timeout, env=python_env(), cwd=tmp_path)

    return run


def run_threads(*fns, timeout=30):
    """Runs each fn in its own thread (a bsp step needs every worker);
    returns their results in order and re-raises the first exception."""
    results = [None] * len(fns)
    errors = [None] * len(fns)

    def body(i, fn):
        try:
            results[i] = fn()
        except BaseException as e:  # noqa: BLE001  (re-raised below)
            errors[i] = e

    threads = [threading.Thread(target=body, args=(i, fn), daemon=True)
               for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        if t.is_alive():
            raise TimeoutError(f"a worker thread is still running after "
                               f"{timeout} s")
    for e in errors:
        if e is not None:
            raise e
    return results
