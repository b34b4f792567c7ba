"""A worker's connection to the parameter servers.

    import ps
    client = ps.Client(["127.0.0.1:7000", "127.0.0.1:7001"],
                       worker_id=0, num_workers=2)
    rows = client.pull("emb", keys)          # (len(keys), dim) float32
    ... forward / backward ...
    client.push("emb", keys, grads)          # applied by the table's optimizer
    client.clock()                           # end of step (bsp: waits)

Keys are int64 or uint64 arrays (or tensors); rows and gradients float32,
(keys, dim) or flat. Where an argument is a torch tensor, results are
tensors too, and ``out=`` pulls straight into the caller's buffer (no copy).

When calls complete (the C++ PsClient, client/ps_client.h): a push returns
once its packets are in the servers' inboxes, not once they are applied;
``wait_applied()``, a bsp ``clock()`` or ``barrier()`` waits for that.
A pull returns once the rows are in ``out``. The ``*_async`` forms return a
handle at once; its ``wait()`` returns when the blocking call would have
(with the pulled rows), and the arrays must stay untouched until then.

The GIL is released while a call waits. Every failure raises a
``ps.errors.Error`` subclass with the server's or the library's message.
Thread-safety: pushes and pulls from several threads at once are fine;
``clock``, ``barrier`` and checkpoints belong to one thread per worker.
"""

import json
from dataclasses import dataclass

from ps import _arrays, _native
from ps.errors import InvalidArgumentError, NotFoundError, NotInitializedError


@dataclass(frozen=True)
class Table:
    """A table the servers serve (its configs/*.tables entry)."""

    id: int
    name: str
    kind: str       # "HASHED", "DENSE" or "EXACT"
    dim: int        # floats per row
    capacity: int   # rows (EXACT: rows per shard)
    optimizer: str  # e.g. "adagrad"

    @classmethod
    def _from_json(cls, text):
        spec = json.loads(text)
        return cls(id=int(spec["id"]), name=spec["name"], kind=spec["kind"],
                   dim=int(spec["dim"]), capacity=int(spec["capacity"]),
                   optimizer=spec.get("optimizer", {}).get("name", ""))


class Handle:
    """A push or pull in flight; ``wait()`` completes it (returns the pulled
    rows, or None for a push; raises the call's error)."""

    def __init__(self, pending, result=None):
        self._pending = pending
        self._result = result

    def wait(self):
        self._pending.wait()
        return self._result


def _ints(d):
    """JSON of a protobuf message: 64-bit counters arrive as strings."""
    for k, v in d.items():
        if isinstance(v, str) and v.isdigit() and k != "name":
            d[k] = int(v)
        elif isinstance(v, dict):
            _ints(v)
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, dict):
                    _ints(item)
    return d


class Client:
    """Connects to every server (returns once each was checked against the
    shard map and this worker's clock was read back).

    Args:
      servers: control addresses "host:port", in shard order.
      worker_id, num_workers: this worker's place in the job.
      secret: the cluster secret (bytes or str); None: the file
        ``secret_file``, else $PS_CLUSTER_SECRET_FILE, else
        $PS_CLUSTER_SECRET, else none (servers on loopback only).
      transport: "auto" (shm to servers on this host, else tcp), "shm",
        "tcp".
      timeout_ms: a server silent this long is lost (PeerLostError).
    """

    def __init__(self, servers, worker_id=0, num_workers=1, *, secret=None,
                 secret_file="", transport="auto", timeout_ms=30000,
                 listen_host="127.0.0.1", advertise_host=""):
        if isinstance(servers, str):
            servers = [servers]
        if isinstance(secret, str):
            secret = secret.encode()
        self._native = _native.client.PsClient(
            list(servers), worker_id, num_workers, transport, timeout_ms,
            secret, secret_file, listen_host, advertise_host)
        self._tables = {}

    @property
    def _c(self):
        if self._native is None:
            raise NotInitializedError("the client was closed")
        return self._native

    # -- tables -----------------------------------------------------------

    def table(self, table):
        """The Table named ``table`` (a name or an id); NotFoundError for
        one the servers do not serve."""
        if isinstance(table, Table):
            return table
        found = self._tables.get(table)
        if found is not None:
            return found
        if not isinstance(table, (str, int)):
            raise InvalidArgumentError(
                f"a table is named by its name or id, not {table!r}")
        text = self._c.table_json(table)
        if text is None:
            raise NotFoundError(f"the servers serve no table {table!r}")
        found = Table._from_json(text)
        self._tables[table] = found
        return found

    @property
    def worker_id(self):
        return self._c.worker_id

    @property
    def num_workers(self):
        return self._c.num_workers

    @property
    def num_servers(self):
        return self._c.num_servers

    # -- sparse rows ------------------------------------------------------

    def pull(self, table, keys, out=None):
        """The keys' rows as a (len(keys), dim) float32 array (a tensor for
        tensor keys), or written into ``out``; returns once they are there.
        EXACT keys without a row read as zeros."""
        return self.pull_async(table, keys, out).wait()

    def pull_async(self, table, keys, out=None):
        """Starts a pull; the handle's ``wait()`` returns the rows."""
        t = self.table(table)
        k = _arrays.as_keys(keys)
        result = _arrays.rows_out(out, len(k), t.dim, keys)
        pending = self._c.pull_async(t.id, k,
                                     _arrays.as_array(result, "out", None))
        return Handle(pending, result)

    def push(self, table, keys, grads):
        """Adds ``grads`` ((len(keys), dim) or flat float32) to the keys'
        rows through the table's optimizer; duplicate keys are summed first.
        Returns once the gradient is in the servers' inboxes. Pushes from
        several threads run in parallel (one table's take turns)."""
        t = self.table(table)
        k = _arrays.as_keys(keys)
        g = _arrays.as_array(grads, "grads", "float32")
        _arrays.check_rows_shape(g, len(k), t.dim, "grads")
        self._c.push(t.id, k, g)

    def push_async(self, table, keys, grads):
        """Queues a push and returns; ``wait()`` returns when ``push`` would
        have. The client's push thread runs queued pushes in order, reading
        ``keys`` and ``grads`` then: do not change them before ``wait()``.
        A ``pull`` does not wait for queued pushes."""
        t = self.table(table)
        k = _arrays.as_keys(keys)
        g = _arrays.as_array(grads, "grads", "float32")
        _arrays.check_rows_shape(g, len(k), t.dim, "grads")
        return Handle(self._c.push_async(t.id, k, g))

    # -- dense tables -----------------------------------------------------

    def pull_dense(self, table, out=None):
        """A DENSE table whole (capacity x dim float32), into ``out`` if
        given; returns once it is there."""
        t = self.table(table)
        if out is None:
            import numpy as np
            out = np.empty(t.capacity * t.dim, dtype=np.float32)
        self._c.pull_dense(t.id, _arrays.as_array(out, "out", None))
        return out

    def push_dense(self, table, grads):
        """A gradient of the whole DENSE table; completes as ``push``."""
        t = self.table(table)
        self._c.push_dense(t.id, _arrays.as_array(grads, "grads", "float32"))

    def flush_residuals(self, table):
        """Sends what sparsification held back for the table; returns once
        it is in the inboxes."""
        self._c.flush_residuals(self.table(table).id)

    # -- steps ------------------------------------------------------------

    def wait_applied(self):
        """Returns once every gradient this worker pushed was applied."""
        self._c.wait_applied()

    def clock(self):
        """Ends this worker's step; returns the new clock. async: at once;
        bsp: once every worker ended the step and its pushes are applied;
        ssp: once the slowest worker is within the staleness bound."""
        return self._c.clock_step()

    @property
    def step(self):
        """This worker's clock: its clock() and barrier() calls so far."""
        return self._c.clock

    def min_clock(self):
        """The smallest clock of all workers, read now."""
        return self._c.min_clock()

    def barrier(self):
        """Returns once this worker's pushes are applied and every worker
        called barrier() as often (a barrier counts as a clock step)."""
        self._c.barrier()

    def stats(self, shard=0):
        """Counters of server ``shard`` (a dict)."""
        return _ints(json.loads(self._c.stats_json(shard)))

    def checkpoints(self):
        """The checkpoint participation of this worker (Checkpoints)."""
        return Checkpoints(self)

    def close(self):
        """Disconnects (pending handles must have been waited for); later
        calls raise NotInitializedError."""
        self._native = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Checkpoints:
    """Checkpoints at step boundaries and the resume point after a restore
    (the servers do the storage: ps_server --checkpoint_dir).

        cp = client.checkpoints()
        info = cp.info()               # once, before training
        if info["restored"]: resume after info["restored_step"], skipping
                             info["examples_consumed"] of info["epoch"]
        for step ...:
            ...; client.clock()
            if cp.due(step):           # the same answer on every worker
                cp.checkpoint(step, epoch, examples_consumed)

    Every worker calls checkpoint at the same steps; training pauses for two
    barriers and the servers' copy of their rows. One thread per worker.
    """

    def __init__(self, client):
        self._client = client
        self._sync = _native.client.CheckpointSync(client._c)

    def info(self):
        """The schedule (every_steps, every_secs) and, after a restore,
        restored, restored_step, epoch, examples_consumed, restored_from."""
        return _ints(json.loads(self._sync.info_json()))

    def due(self, step):
        """Whether every worker checkpoints after ``step``."""
        return self._sync.due(step)

    def checkpoint(self, step, epoch=0, examples_consumed=0):
        """Takes the cut after ``step`` (after clock() for it), recording
        this worker's data position; returns what shard 0 said about the
        checkpoint before (previous_step, previous_failed, ...)."""
        return self._sync.checkpoint(step, epoch, examples_consumed)
