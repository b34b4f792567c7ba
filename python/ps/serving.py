"""Lookups on serving replicas (ps_serve), which follow a training
cluster's checkpoints and answer from the newest complete one.

    import ps.serving
    client = ps.serving.Client(["127.0.0.1:7100", "127.0.0.1:7101"])
    found = client.lookup("emb", keys)     # keys: int64/uint64 array
    found.rows                             # (len(keys), dim) float32
    found.step                             # the checkpoint they come from

Every row of one lookup comes from the one checkpoint ``found.step`` names
(committed at ``found.created_unix_ms``). HASHED ids map to their row as
in training; a DENSE key is its row; an EXACT key without a row reads as
zeros and is counted in ``found.missing``. The lookup travels over the
one-sided core (shm to a replica on this host, else tcp); the replica
writes the rows back into this client's memory, so it must reach this
client's ``listen_host`` (loopback by default).

Several replicas: the client attaches to the first that answers and, when
it is lost, sends the lookup again to the next. A refusal (an unknown
table, a key of a shard the replica does not hold) raises the replica's
error. The GIL is released while a lookup waits; lookups from several
threads take turns.
"""

from dataclasses import dataclass

import numpy as np

from ps import _arrays, _native
from ps.client import Table
from ps.errors import NotFoundError


@dataclass(frozen=True)
class Lookup:
    """What a lookup returned."""

    rows: object           # (len(keys), dim) float32 (a tensor for tensor keys)
    step: int              # the checkpoint the rows come from
    created_unix_ms: int   # when that checkpoint was committed
    missing: int           # EXACT keys without a row (zeros)
    replica: str           # the replica that answered


class Client:
    """Attaches to the first of ``replicas`` (control addresses) that
    answers.

    Args:
      replicas: "host:port" of ps_serve's control listeners (its
        --port_file), in the order to try them.
      secret: the cluster secret (bytes or str); None: the file
        ``secret_file``, else $PS_CLUSTER_SECRET_FILE, else
        $PS_CLUSTER_SECRET, else none (replicas on loopback only).
      transport: "auto" (shm to a replica on this host, else tcp), "shm",
        "tcp".
      timeout_ms: a replica silent this long is lost (the lookup goes to
        the next).
      listen_host, advertise_host: where replicas reach this client.
    """

    def __init__(self, replicas, *, secret=None, secret_file="",
                 transport="auto", timeout_ms=10000, listen_host="127.0.0.1",
                 advertise_host=""):
        if isinstance(replicas, str):
            replicas = [replicas]
        if isinstance(secret, str):
            secret = secret.encode()
        self._c = _native.serving.ServingClient(
            list(replicas), transport, timeout_ms, secret, secret_file,
            listen_host, advertise_host)
        self._tables = {}

    def table(self, name):
        """The Table ``name`` the replica serves (NotFoundError if none)."""
        found = self._tables.get(name)
        if found is None:
            text = self._c.table_json(name)
            if text is None:
                raise NotFoundError(f"the replica serves no table {name!r}")
            found = self._tables[name] = Table._from_json(text)
        return found

    @property
    def max_keys(self):
        """The most keys one lookup may hold."""
        return self._c.max_keys

    @property
    def replica(self):
        """The control address of the replica attached to now."""
        return self._c.replica

    def lookup(self, table, keys, out=None):
        """The keys' rows (written into ``out`` when given) and the
        checkpoint they come from, as a Lookup."""
        t = self.table(table)
        k = _arrays.as_keys(keys)
        rows = _arrays.rows_out(out, len(k), t.dim, keys)
        step, created, missing, replica = self._c.lookup(
            t.name, k, _arrays.as_array(rows, "out", None))
        return Lookup(rows, step, created, missing, replica)


__all__ = ["Client", "Lookup"]
