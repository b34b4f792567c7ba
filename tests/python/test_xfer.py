"""Tests of ps.xfer, the transfer core from Python: the operations between
two contexts in this process (tcp and auto, which picks shm here), a peer in
another process (its memory really written; its death reported), the
errors each bad input raises, and lifetimes under any garbage-collection
order."""

import gc
import os
import select
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import ps
from ps import errors, xfer

TRANSPORTS = ["tcp", "auto"]


class Pair:
    """An origin context connected to a target context's region."""

    def __init__(self, transport, peer_timeout_ms=10000):
        self.transport = transport
        self.target = xfer.Context(name="target", transport=transport,
                                   peer_timeout_ms=peer_timeout_ms)
        self.origin = xfer.Context(name="origin", transport=transport,
                                   peer_timeout_ms=peer_timeout_ms)
        self.region = self.target.allocate(4096, xfer.ALL)
        self.ep = self.origin.connect(self.target.address)
        self.remote = self.ep.import_region(self.region.descriptor)


@pytest.fixture(params=TRANSPORTS)
def pair(request):
    return Pair(request.param)


def test_context_properties_and_access_flags():
    ctx = xfer.Context(name="props")
    assert ctx.name == "props"
    assert ctx.address.startswith("127.0.0.1:")
    region = ctx.allocate(100, xfer.READ | xfer.WRITE)
    assert (region.size, region.access) == (100, xfer.READ | xfer.WRITE)
    assert region.memfd_backed and isinstance(region.descriptor, bytes)
    assert region.array.dtype == np.uint8 and region.array.size == 100
    assert xfer.ALL == xfer.READ | xfer.WRITE | xfer.ATOMIC
    assert "ps.xfer" in repr(region)


def test_put_get_round_trip(pair):
    assert pair.ep.peer_name == "target"
    assert pair.ep.transport == ("shm" if pair.transport == "auto" else "tcp")
    src = np.arange(32, dtype=np.float32)
    pair.ep.put(src, pair.remote, 64)
    # The target's own view of its memory has the data.
    np.testing.assert_array_equal(pair.region.array[64:192].view(np.float32),
                                  src)
    back = np.zeros((4, 8), np.float32)  # any shape: nbytes count
    pair.ep.get(back, pair.remote, 64)
    np.testing.assert_array_equal(back.ravel(), src)
    raw = bytearray(8)
    pair.ep.get(memoryview(raw), pair.remote, 64)
    assert bytes(raw) == src[:2].tobytes()


def test_registered_array_is_reached_in_place(pair):
    owned = np.zeros(16, np.int32)
    region = pair.target.register(owned, xfer.READ | xfer.WRITE)
    remote = pair.ep.import_region(region.descriptor)
    pair.ep.put(np.full(4, 7, np.int32), remote, 8)
    assert owned.tolist() == [0, 0, 7, 7, 7, 7] + [0] * 10
    assert region.array is owned
    pair.target.deregister(region)
    with pytest.raises(errors.NotRegisteredError):
        pair.target.deregister(region)


def test_torch_tensors_share_memory(pair):
    torch = pytest.importorskip("torch")
    pair.ep.put(torch.arange(8, dtype=torch.float32), pair.remote)
    out = torch.zeros(8, requires_grad=False)
    pair.ep.get(out, pair.remote)
    assert out.tolist() == list(range(8))


def test_writev_readv(pair):
    a, b = np.arange(4, dtype=np.int64), np.arange(10, 13, dtype=np.int64)
    pair.ep.writev([(a, 0), (b, 1024)], pair.remote)
    x, y = np.zeros(4, np.int64), np.zeros(3, np.int64)
    pair.ep.readv([(y, 1024), (x, 0)], pair.remote)
    assert x.tolist() == a.tolist() and y.tolist() == b.tolist()
    with pytest.raises(errors.InvalidArgumentError):
        pair.ep.readv([x], pair.remote)


def test_atomics(pair):
    assert pair.ep.fetch_add(pair.remote, 8, 5) == 0
    assert pair.ep.fetch_add(pair.remote, 8, -1) == 5  # modulo 2**64
    assert pair.ep.compare_swap(pair.remote, 8, 3, 9) == 4  # no swap
    assert pair.ep.compare_swap(pair.remote, 8, 4, 9) == 4  # swapped
    assert pair.region.array[8:16].view(np.uint64)[0] == 9
    assert pair.ep.fetch_add(pair.remote, 16, -1) == 0
    assert pair.ep.fetch_add(pair.remote, 16, 0) == 2**64 - 1
    with pytest.raises(errors.InvalidArgumentError, match="aligned"):
        pair.ep.fetch_add(pair.remote, 4, 1)
    assert pair.ep.fetch_add(pair.remote, 24, np.uint64(2**63)) == 0
    with pytest.raises(errors.OutOfRangeError, match="64-bit"):
        pair.ep.fetch_add(pair.remote, 24, 2**64)
    with pytest.raises(TypeError):
        pair.ep.fetch_add(pair.remote, 24, 1.5)


def test_put_with_notify(pair):
    data = np.arange(16, dtype=np.float32)
    pair.ep.put_with_notify(data, pair.remote, 128, pair.remote, 0, 42)
    words = pair.region.array.view(np.uint64)
    assert words[0] == 42
    np.testing.assert_array_equal(pair.region.array[128:192].view(np.float32),
                                  data)
    req = pair.ep.post_put_with_notify(data * 2, pair.remote, 128, pair.remote,
                                       0, 43)
    assert req.wait() is None and req.done
    assert words[0] == 43


def test_batch(pair):
    batch = xfer.Batch()
    batch.put(np.full(8, 3, np.uint8), pair.remote, 0)
    first = batch.fetch_add(pair.remote, 64, 2)
    second = batch.fetch_add(pair.remote, 64, 2)
    out = np.zeros(8, np.uint8)
    batch.get(out, pair.remote, 256)
    assert len(batch) == 4
    pair.region.array[256:264] = 5
    req = pair.ep.post(batch)
    del batch  # the request keeps the batch's buffers and regions alive
    gc.collect()
    assert req.wait() is None
    assert out.tolist() == [5] * 8
    assert pair.region.array[:8].tolist() == [3] * 8
    assert pair.region.array[64:72].view(np.uint64)[0] == 4
    assert (first, second) == (0, 1)


def test_batch_results_after_completion(pair):
    batch = xfer.Batch()
    for _ in range(3):
        batch.fetch_add(pair.remote, 0, 10)
    pair.ep.post(batch).wait()
    assert sorted(batch.results) == [0, 10, 20]


def test_post_forms_and_wait(pair):
    src = np.arange(64, dtype=np.float64)
    reqs = [pair.ep.post_put(src[i:i + 8], pair.remote, i * 8)
            for i in range(0, 64, 8)]
    for r in reqs:
        r.wait()
    del reqs, src
    out = np.zeros(64, np.float64)
    get = pair.ep.post_get(out, pair.remote)
    while not get.test():
        pass
    assert get.wait() is None  # again: the stored outcome
    np.testing.assert_array_equal(out, np.arange(64, dtype=np.float64))
    assert pair.ep.post_fetch_add(pair.remote, 1024, 3).wait() == 0
    assert pair.ep.post_compare_swap(pair.remote, 1024, 3, 1).wait() == 3
    a, b = np.zeros(2, np.float64), np.zeros(2, np.float64)
    pair.ep.post_writev([(np.ones(2), 2048), (np.ones(2) * 2, 2064)],
                        pair.remote).wait()
    pair.ep.post_readv([(a, 2048), (b, 2064)], pair.remote).wait()
    assert a.tolist() == [1, 1] and b.tolist() == [2, 2]


def test_unfinished_request_dropped_and_buffers_kept():
    pair = Pair("tcp")
    for _ in range(20):
        out = np.zeros(1024, np.uint8)
        pair.ep.post_get(out, pair.remote)  # dropped at once: waits
        pair.ep.post_put(np.ones(1024, np.uint8), pair.remote)  # temp source
    pair.ep.flush()
    assert pair.region.array[:1024].tolist() == [1] * 1024


def test_flush_and_fence(pair):
    for i in range(16):
        pair.ep.post_put(np.full(8, i, np.uint8), pair.remote, i * 8)
    pair.ep.flush()
    other = pair.origin.connect(pair.target.address)
    remote = other.import_region(pair.region.descriptor)
    other.post_put(np.full(8, 99, np.uint8), remote, 512)
    pair.origin.fence()
    assert pair.region.array[:128].reshape(16, 8)[:, 0].tolist() == list(
        range(16))
    assert pair.region.array[512] == 99


def test_write_and_read_fences(pair):
    pair.ep.post_put(np.full(64, 7, np.uint8), pair.remote, 256)
    pair.ep.write_fence()
    out = np.zeros(64, np.uint8)
    req = pair.ep.post_get(out, pair.remote, 256)
    pair.ep.read_fence()
    assert req.test() and out.tolist() == [7] * 64


def test_notifications_follow_their_data(pair):
    bell = pair.target.allocate(64, xfer.WRITE | xfer.NOTIFY_EVENTS)
    remote_bell = pair.ep.import_region(bell.descriptor)
    start = time.monotonic()
    assert pair.target.wait_notification(timeout=0.2) is None
    assert time.monotonic() - start >= 0.2
    assert pair.target.poll_notification() is None
    for value in range(1, 6):
        pair.ep.put_with_notify(np.full(32, value, np.uint8), pair.remote,
                                value * 32, remote_bell, 8, value)
    for value in range(1, 6):
        n = pair.target.wait_notification(timeout=10)
        assert n == xfer.Notification(pair.origin.instance, bell.id, 8, value)
        assert pair.region.array[value * 32:(value + 1) * 32].tolist() == (
            [value] * 32)
    # A plain region queues nothing.
    pair.ep.put_with_notify(np.ones(8, np.uint8), pair.remote, 0, pair.remote,
                            8, 1)
    assert pair.target.poll_notification() is None


def test_pool_blocks_reached_by_offset(pair):
    pool = pair.target.pool(1 << 16, xfer.WRITE)
    assert (pool.capacity, pool.used) == (1 << 16, 0)
    blocks = [pool.allocate(1 << 14) for _ in range(4)]
    with pytest.raises(errors.ResourceExhaustedError, match="no room"):
        pool.allocate(1)
    remote = pair.ep.import_region(pool.descriptor)
    for i, block in enumerate(blocks):
        pair.ep.put(np.full(block.size, i + 1, np.uint8), remote, block.offset)
    pair.ep.flush()
    for i, block in enumerate(blocks):
        assert (block.array == i + 1).all()
    pool.free(blocks[2])
    with pytest.raises(errors.InvalidArgumentError, match="no live block"):
        pool.free(blocks[2])
    again = pool.allocate(100, alignment=256)
    assert again.offset == blocks[2].offset and again.offset % 256 == 0
    with pytest.raises(errors.InvalidArgumentError, match="alignment"):
        pool.allocate(8, alignment=3)
    with pytest.raises(errors.InvalidArgumentError):
        pair.target.pool(4096, access=1 << 6)


def test_threads_share_an_endpoint(pair):
    def run(i):
        mine = np.full(128, i, np.uint8)
        for _ in range(50):
            pair.ep.put(mine, pair.remote, i * 128)
            out = np.zeros(128, np.uint8)
            pair.ep.get(out, pair.remote, i * 128)
            assert (out == i).all()
            pair.ep.fetch_add(pair.remote, 2048, 1)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pair.region.array[2048:2056].view(np.uint64)[0] == 200


def test_batch_grows_after_post(pair):
    batch = xfer.Batch()
    batch.put(np.ones(8, np.uint8), pair.remote, 0)
    req = pair.ep.post(batch)
    batch.put(np.full(8, 2, np.uint8), pair.remote, 8)  # not in the request
    req.wait()
    pair.ep.post(batch).wait()
    assert pair.region.array[:16].tolist() == [1] * 8 + [2] * 8


# --- bad input: an exception, never a crash -------------------------------


def test_out_of_range(pair):
    with pytest.raises(errors.OutOfRangeError, match="past its end"):
        pair.ep.put(np.zeros(16, np.uint8), pair.remote, 4090)
    with pytest.raises(errors.OutOfRangeError):
        pair.ep.get(np.zeros(8, np.uint8), pair.remote, 1 << 40)
    with pytest.raises(errors.OutOfRangeError, match="negative"):
        pair.ep.get(np.zeros(8, np.uint8), pair.remote, -8)
    with pytest.raises(IndexError):  # the built-in class too
        pair.ep.fetch_add(pair.remote, 4096, 1)


def test_access_denied(pair):
    read_only = pair.target.allocate(64, xfer.READ)
    remote = pair.ep.import_region(read_only.descriptor)
    pair.ep.get(np.zeros(8, np.uint8), remote)
    with pytest.raises(errors.AccessDeniedError, match="allows read"):
        pair.ep.put(np.zeros(8, np.uint8), remote)
    with pytest.raises(errors.AccessDeniedError):
        pair.ep.fetch_add(remote, 0, 1)
    local = pair.target.allocate(64, xfer.NONE)
    with pytest.raises(errors.AccessDeniedError):
        pair.ep.get(np.zeros(8, np.uint8),
                    pair.ep.import_region(local.descriptor))


def test_garbage_and_foreign_descriptors(pair):
    with pytest.raises(errors.InvalidArgumentError, match="not a region"):
        pair.ep.import_region(b"\x00garbage\xff" * 5)
    with pytest.raises(errors.InvalidArgumentError):
        pair.ep.import_region(b"")
    # A region of another context: not this endpoint's peer.
    mine = pair.origin.allocate(64, xfer.ALL)
    with pytest.raises(errors.InvalidArgumentError, match="does not belong"):
        pair.ep.import_region(mine.descriptor)
    # A remote region used with another endpoint.
    other = xfer.Context(name="other")
    ep = other.connect(pair.target.address)
    with pytest.raises(errors.InvalidArgumentError, match="another endpoint"):
        ep.put(np.zeros(8, np.uint8), pair.remote)


def test_bad_buffers(pair):
    strided = np.zeros(16, np.float32)[::2]
    with pytest.raises(errors.InvalidArgumentError, match="C-contiguous"):
        pair.ep.put(strided, pair.remote)
    with pytest.raises(errors.InvalidArgumentError, match="C-contiguous"):
        pair.ep.get(np.zeros((4, 4), np.float32).T, pair.remote)
    frozen = np.zeros(8, np.uint8)
    frozen.flags.writeable = False
    pair.ep.put(frozen, pair.remote)  # a read-only source is fine
    pair.target.register(frozen, xfer.READ)  # and so is a read-only region
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        pair.ep.get(frozen, pair.remote)
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        pair.ep.post_get(b"immutable", pair.remote)
    with pytest.raises(errors.InvalidArgumentError, match="read-only"):
        pair.target.register(frozen, xfer.WRITE)
    with pytest.raises(TypeError):
        pair.ep.put([1, 2, 3], pair.remote)
    with pytest.raises(TypeError):
        pair.ep.put(np.zeros(8), "not a region")
    batch = xfer.Batch()
    with pytest.raises(errors.InvalidArgumentError):
        batch.get(frozen, pair.remote)
    with pytest.raises(errors.InvalidArgumentError):
        pair.target.allocate(0)
    with pytest.raises(errors.InvalidArgumentError, match="access"):
        pair.target.allocate(64, 16)


def test_bad_context_options():
    with pytest.raises(errors.InvalidArgumentError, match="auto, shm, tcp"):
        xfer.Context(transport="udp")
    with pytest.raises(errors.InvalidArgumentError, match="too short"):
        xfer.Context(secret=b"short")
    with pytest.raises(errors.InvalidArgumentError, match="secret"):
        xfer.Context(listen_host="0.0.0.0")
    with pytest.raises(errors.InvalidArgumentError):
        xfer.Context(listen_port=70000)
    with pytest.raises(errors.InvalidArgumentError):
        xfer.Context(name="")
    with pytest.raises(errors.InvalidArgumentError, match="copy_threads"):
        xfer.Context(copy_threads=0)
    with pytest.raises(errors.InvalidArgumentError,
                       match="cpu_wakeup_latency_us"):
        xfer.Context(cpu_wakeup_latency_us=-2)


def test_secret_authenticates_peers():
    key = b"0123456789abcdef0123"
    target = xfer.Context(name="t", secret=key)
    xfer.Context(name="o", secret=key).connect(target.address)
    with pytest.raises(errors.UnauthenticatedError):
        xfer.Context(name="o", secret=b"another secret of 21").connect(
            target.address)


def test_connect_to_closed_port():
    closed = xfer.Context(name="gone")
    address = closed.address
    del closed
    gc.collect()
    with pytest.raises((errors.NetworkError, errors.PeerLostError)):
        xfer.Context(name="c").connect(address)
    with pytest.raises(errors.InvalidArgumentError):
        xfer.Context(name="c").connect("no port here")


# --- lifetimes ------------------------------------------------------------


def test_context_dropped_first_keeps_everything_working():
    pair = Pair("tcp")
    ep, remote, region = pair.ep, pair.remote, pair.region
    view = region.array
    del pair
    gc.collect()  # both Python contexts gone; the C++ ones live on
    ep.put(np.full(8, 6, np.uint8), remote)
    assert view[:8].tolist() == [6] * 8
    del ep, region
    gc.collect()
    view[0] = 1  # the view alone keeps its region's memory
    del remote
    gc.collect()
    assert view[0] == 1


def test_any_collection_order():
    for order in range(6):
        pair = Pair("auto" if order % 2 else "tcp")
        objs = [pair.origin, pair.target, pair.ep, pair.remote, pair.region,
                pair.ep.post_get(np.zeros(64, np.uint8), pair.remote)]
        del pair
        rng = np.random.default_rng(order)
        for i in rng.permutation(len(objs)):
            objs[i] = None  # freed at once: nothing here is in a cycle


def test_registered_array_outlives_its_python_names():
    pair = Pair("tcp")
    region = pair.target.register(np.zeros(1 << 16, np.uint8), xfer.ALL)
    remote = pair.ep.import_region(region.descriptor)
    del region
    gc.collect()  # the context still pins the array the peer writes
    pair.ep.put(np.full(1 << 16, 2, np.uint8), remote)
    out = np.zeros(1 << 16, np.uint8)
    pair.ep.get(out, remote)
    assert out.min() == 2


# --- a peer in another process --------------------------------------------

PEER = r"""
import sys
import numpy as np
from ps import xfer
ctx = xfer.Context(name="peer", transport=sys.argv[1], peer_timeout_ms=1500)
region = ctx.allocate(4096, xfer.ALL)
owned = np.zeros(8, np.float64)
mine = ctx.register(owned, xfer.READ | xfer.WRITE)
print(ctx.address, region.descriptor.hex(), mine.descriptor.hex(), flush=True)
for line in sys.stdin:  # "show": print what peers wrote; EOF: exit
    print(region.array[:64].view(np.float32).sum(), owned.sum(), flush=True)
"""


def _readline(proc, timeout=10.0):
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "peer process did not answer"
    line = proc.stdout.readline()
    assert line, "peer process exited"
    return line.split()


def _stop(proc, timeout=10.0):
    """SIGSTOP, then waits until every thread of ``proc`` is stopped: kill()
    returns before the signal has stopped a thread running on another
    core, which may still answer a request meanwhile."""
    proc.send_signal(signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    tasks = f"/proc/{proc.pid}/task"
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir(tasks):
            with open(f"{tasks}/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(state in "tT" for state in states):
            return
        time.sleep(0.001)
    raise AssertionError(f"peer {proc.pid} did not stop")


@pytest.fixture
def peer():
    """Starts peer processes (transport -> (proc, address, region, owned
    descriptors)); kills whatever is left at the end."""
    procs = []
    env = dict(os.environ,
               PYTHONPATH=os.path.dirname(os.path.dirname(ps.__file__)))

    def start(transport):
        proc = subprocess.Popen([sys.executable, "-c", PEER, transport],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
        procs.append(proc)
        address, region, owned = _readline(proc)
        return proc, address, bytes.fromhex(region), bytes.fromhex(owned)

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_peer_process_memory_and_its_death(peer, transport):
    proc, address, region_d, owned_d = peer(transport)
    ctx = xfer.Context(name="origin", transport=transport,
                       peer_timeout_ms=1500)
    ep = ctx.connect(address)
    assert ep.peer_name == "peer"
    region, owned = ep.import_region(region_d), ep.import_region(owned_d)
    ep.put(np.arange(16, dtype=np.float32), region)
    ep.put(np.full(8, 0.5), owned)
    assert ep.fetch_add(region, 1024, 7) == 0
    proc.stdin.write("show\n")
    proc.stdin.flush()
    assert [float(x) for x in _readline(proc)] == [120.0, 4.0]

    proc.kill()
    proc.wait()
    start = time.monotonic()
    with pytest.raises((errors.PeerLostError, errors.NetworkError)) as lost:
        for _ in range(10000):  # the first may still find its way
            ep.put(np.zeros(8), owned)
            ep.flush()
    assert time.monotonic() - start < 5
    assert ep.lost
    with pytest.raises(errors.PeerLostError):
        ep.get(np.zeros(8), owned)
    with pytest.raises(ConnectionError):  # the built-in class too
        ctx.connect(address)


def test_gil_released_while_waiting_on_a_stopped_peer(peer):
    proc, address, _, owned_d = peer("tcp")
    ctx = xfer.Context(name="origin", transport="tcp", peer_timeout_ms=1500)
    ep = ctx.connect(address)
    owned = ep.import_region(owned_d)
    ep.get(np.zeros(8), owned)
    _stop(proc)
    outcome = []

    def blocked_get():
        try:
            ep.get(np.zeros(8), owned)
            outcome.append(None)
        except errors.Error as e:
            outcome.append(e)

    thread = threading.Thread(target=blocked_get)
    start = time.monotonic()
    thread.start()
    ticks = 0
    while thread.is_alive() and time.monotonic() - start < 0.3:
        ticks += 1  # this thread runs: the waiting one let go of the GIL
        time.sleep(0.001)
    assert thread.is_alive() and ticks > 50
    thread.join(10)
    proc.kill()
    assert isinstance(outcome[0], (errors.PeerLostError, errors.DeadlineError))
