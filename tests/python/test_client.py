"""ps.Client against real ps_server processes: exact pulls after known pushes
in bsp with 2 workers (two clients driven by two threads) x 2 servers, key
and buffer types, async handles, DENSE and EXACT tables, barrier / clock,
ssp and async smoke runs, server stats, and the CPU clock of another process
(ps.cluster.process_cpu_seconds)."""

import time

import numpy as np
import pytest
import torch

import ps
from conftest import run_threads, table_text

DIM = 4
LR = 0.5  # sgd: rows += -0.5 * g, exact in float32 for these gradients
DENSE_ROWS = 6

TABLES = (table_text(1, "sum", dim=DIM) +
          table_text(2, "sgd", dim=DIM, optimizer="sgd", learning_rate=LR) +
          table_text(3, "dense", kind="DENSE", dim=DIM, capacity=DENSE_ROWS) +
          table_text(4, "exact", kind="EXACT", dim=DIM, capacity=1024,
                     extra="admit_after_pushes: 1 "))


@pytest.fixture
def bsp(servers):
    cluster = servers(TABLES, num_shards=2, num_workers=2, consistency="bsp")
    return cluster, cluster.client(0), cluster.client(1)


def grads_for(worker, keys):
    """A known gradient: row i of worker w is (w + 1) * (i + 1) + [0, .25,
    .5, .75] (exact in float32)."""
    base = (worker + 1) * (np.arange(len(keys), dtype=np.float32) + 1)
    return (base[:, None] + np.arange(DIM, dtype=np.float32) / 4).astype(
        np.float32)


def expected_sum(pushes, keys):
    """Rows of `keys` after the pushes [(keys, grads), ...] into a zeros
    table with the sum optimizer."""
    total = {}
    for ks, gs in pushes:
        for k, g in zip(ks.tolist(), gs):
            total[k] = total.get(k, 0) + g.astype(np.float64)
    return np.array([total.get(k, np.zeros(DIM)) for k in keys.tolist()],
                    dtype=np.float32)


def test_bsp_push_pull_exact(bsp):
    _, c0, c1 = bsp
    assert c0.num_servers == 2 and c0.num_workers == 2 and c1.worker_id == 1
    # Keys spread over both shards; 7 twice in worker 0 (summed), 11 in both.
    keys = [np.array([3, 7, 11, 7, 1 << 40], dtype=np.int64),
            np.array([11, 5, 2**63 + 9], dtype=np.uint64)]
    pushes = [(keys[w], grads_for(w, keys[w])) for w in range(2)]

    def step(w, client):
        k, g = pushes[w]
        client.push("sum", k, g)
        client.push("sgd", k, g)
        return client.clock()

    assert run_threads(lambda: step(0, c0), lambda: step(1, c1)) == [1, 1]
    assert c0.step == 1 and c1.step == 1

    every = np.array([3, 7, 11, 1 << 40, 5, 2**63 + 9], dtype=np.uint64)
    want = expected_sum(pushes, every)
    # 11: worker 0's third row (3 + ...) plus worker 1's first (2 + ...).
    assert want[2].tolist() == [5, 5.5, 6, 6.5]
    # 7: worker 0's second and fourth rows, summed (2 + ... and 4 + ...).
    assert want[1].tolist() == [6, 6.5, 7, 7.5]
    for client in (c0, c1):
        got = client.pull("sum", every)
        assert got.dtype == np.float32 and got.shape == (6, DIM)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(client.pull("sgd", every), -LR * want)
    # int64 keys with the same bits as the uint64 ones read the same rows.
    np.testing.assert_array_equal(c0.pull("sum", every.view(np.int64)), want)
    # A key nobody pushed reads the initializer's zeros.
    np.testing.assert_array_equal(
        c0.pull("sum", np.array([123456], dtype=np.int64)),
        np.zeros((1, DIM), np.float32))

    # A second step, torch tensors as keys and gradients; flat gradients.
    tkeys = torch.tensor([3, 5, 3], dtype=torch.int64)
    tgrad = torch.ones(3, DIM)

    def step2(client):
        client.push("sum", tkeys, tgrad)
        client.push("sum", np.array([5], np.int64),
                    np.full(DIM, 0.5, np.float32))  # flat (dim,) for one key
        return client.clock()

    assert run_threads(lambda: step2(c0), lambda: step2(c1)) == [2, 2]
    rows = c1.pull("sum", tkeys)
    assert isinstance(rows, torch.Tensor) and rows.dtype == torch.float32
    want3 = torch.from_numpy(want[0]) + 2 * 2  # 2 workers x (1 + 1)
    want5 = torch.from_numpy(want[4]) + 2 * (1 + 0.5)
    assert torch.equal(rows, torch.stack([want3, want5, want3]))


def test_pull_into_out_is_zero_copy(bsp):
    _, c0, c1 = bsp
    keys = np.array([21, 22, 23], dtype=np.int64)
    g = grads_for(0, keys)
    run_threads(lambda: (c0.push("sum", keys, g), c0.clock()),
                lambda: c1.clock())

    out = np.full((3, DIM), np.nan, dtype=np.float32)
    got = c0.pull("sum", keys, out=out)
    assert got is out
    np.testing.assert_array_equal(out, g)
    flat = np.zeros(3 * DIM, dtype=np.float32)  # flat buffers are fine too
    assert c0.pull("sum", keys, out=flat) is flat
    np.testing.assert_array_equal(flat, g.reshape(-1))

    tout = torch.full((3, DIM), float("nan"))
    ptr = tout.data_ptr()
    got = c0.pull("sum", torch.from_numpy(keys), out=tout)
    assert got is tout and tout.data_ptr() == ptr
    assert torch.equal(tout, torch.from_numpy(g))
    # A view into a bigger tensor: exactly its rows are written.
    big = torch.zeros(5, DIM)
    c0.pull("sum", keys, out=big[1:4])
    assert torch.equal(big[1:4], torch.from_numpy(g))
    assert torch.equal(big[0], torch.zeros(DIM))
    assert torch.equal(big[4], torch.zeros(DIM))


def test_async_handles(bsp):
    _, c0, c1 = bsp
    keys = np.array([31, 32, 31], dtype=np.uint64)
    g = grads_for(1, keys)

    def worker0():
        handles = [c0.push_async("sum", keys, g),
                   c0.push_async("sgd", keys, g)]
        assert all(h.wait() is None for h in handles)
        return c0.clock()

    run_threads(worker0, c1.clock)
    want = expected_sum([(keys, g)], keys)
    out = np.empty((3, DIM), np.float32)
    h1 = c0.pull_async("sum", keys, out=out)
    h2 = c1.pull_async("sgd", keys)
    assert isinstance(h1, ps.Handle)
    assert h1.wait() is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(h2.wait(), -LR * want)
    np.testing.assert_array_equal(h1.wait(), want)  # waiting again: same


def test_dense_table(bsp):
    _, c0, c1 = bsp
    spec = c0.table("dense")
    assert (spec.kind, spec.dim, spec.capacity) == ("DENSE", DIM, DENSE_ROWS)
    g0 = np.arange(DENSE_ROWS * DIM, dtype=np.float32)
    g1 = np.full((DENSE_ROWS, DIM), 0.5, dtype=np.float32)

    run_threads(lambda: (c0.push_dense("dense", g0), c0.clock()),
                lambda: (c1.push_dense(spec.id, g1), c1.clock()))
    want = g0 + 0.5
    np.testing.assert_array_equal(c0.pull_dense("dense"), want)
    out = torch.empty(DENSE_ROWS, DIM)
    assert c1.pull_dense("dense", out=out) is out
    assert torch.equal(out.reshape(-1), torch.from_numpy(want))


def test_exact_table(bsp):
    _, c0, c1 = bsp
    assert c0.table("exact").kind == "EXACT"
    keys = np.array([10**12, 77, 10**12], dtype=np.int64)
    g = grads_for(0, keys)
    c0.push("exact", keys, g)  # in the inboxes, as for the other kinds
    c0.wait_applied()
    want = expected_sum([(keys, g)], keys)
    np.testing.assert_array_equal(c1.pull("exact", keys), want)
    # A key without a row reads as zeros.
    np.testing.assert_array_equal(c0.pull("exact", np.array([5], np.int64)),
                                  np.zeros((1, DIM), np.float32))
    stats = [c0.stats(s) for s in range(2)]
    assert sum(s["exact_rows"] for s in stats) == 2


def test_barrier_min_clock_step(bsp):
    _, c0, c1 = bsp
    assert c0.step == 0 and c0.min_clock() == 0
    keys = np.array([41, 42], dtype=np.int64)
    g = grads_for(0, keys)

    def worker0():
        c0.push("sum", keys, g)
        c0.barrier()  # returns once this worker's push is applied
        return c0.step, c0.pull("sum", keys)

    (step0, rows), step1 = run_threads(
        worker0, lambda: (c1.barrier(), c1.step)[1])
    assert step0 == 1 and step1 == 1  # a barrier counts as a clock step
    np.testing.assert_array_equal(rows, g)
    assert c0.min_clock() == 1

    def two_steps(client):
        return [client.clock(), client.clock()]

    assert run_threads(lambda: two_steps(c0),
                       lambda: two_steps(c1)) == [[2, 3], [2, 3]]
    assert c0.step == 3 and c1.min_clock() == 3


def test_stats_count_pushes(bsp):
    _, c0, c1 = bsp
    before = [c0.stats(s) for s in range(2)]
    assert set(before[0]) >= {"packets_applied", "rows_applied",
                              "packets_rejected"}
    keys = np.arange(100, 140, dtype=np.int64)  # 40 keys: both shards
    run_threads(lambda: (c0.push("sum", keys, grads_for(0, keys)),
                         c0.clock()),
                lambda: c1.clock())
    after = [c1.stats(s) for s in range(2)]
    for s in range(2):
        assert after[s]["packets_applied"] > before[s]["packets_applied"]
        assert after[s]["packets_rejected"] == 0
    assert sum(a["rows_applied"] - b["rows_applied"]
               for a, b in zip(after, before)) == 40


@pytest.mark.parametrize("consistency", ["ssp", "async"])
def test_ssp_and_async_smoke(servers, consistency):
    cluster = servers(table_text(1, "sum", dim=DIM), num_shards=2,
                      num_workers=2, consistency=consistency, staleness=1)
    c0, c1 = cluster.client(0), cluster.client(1)
    keys = np.array([1, 2, 3, 2], dtype=np.int64)
    steps = 5

    def train(client):
        clocks = []
        for _ in range(steps):
            client.push("sum", keys, np.ones((4, DIM), np.float32))
            clocks.append(client.clock())
        client.barrier()
        return clocks, client.step

    results = run_threads(lambda: train(c0), lambda: train(c1))
    for clocks, step in results:
        assert clocks == list(range(1, steps + 1))
        assert step == steps + 1  # the barrier counts as a step
    assert c0.min_clock() == steps + 1
    want = np.array([[1], [2], [1]], np.float32) * 2 * steps
    np.testing.assert_array_equal(c0.pull("sum", keys[:3]),
                                  np.repeat(want, DIM, axis=1))


def test_process_cpu_seconds_counts_another_process():
    # What train_ctr reports as the servers' CPU: a child that spins for
    # ~0.2 s of CPU, to the nanosecond, and 0 once it is gone.
    import subprocess
    import sys
    from ps.cluster import process_cpu_seconds
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import time\n"
         "t = time.process_time()\n"
         "while time.process_time() - t < 0.2: pass\n"
         "input()"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while process_cpu_seconds([child.pid]) < 0.2:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        first = process_cpu_seconds([child.pid])
        assert 0.2 <= first < 5.0
        assert process_cpu_seconds([child.pid, child.pid]) >= 2 * first
    finally:
        child.communicate(b"\n", timeout=30)
    assert process_cpu_seconds([child.pid]) == 0.0
