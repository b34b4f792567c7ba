"""The one-sided transfer core (C++ ``core/``) from Python.

A :class:`Context` per process owns registered memory and connects to peer
contexts as :class:`Endpoint` objects, through which this process reads and
writes the peers' registered memory without the peers' code taking part::

    server = ps.xfer.Context(name="server")
    params = server.allocate(4096, ps.xfer.READ | ps.xfer.WRITE)
    publish(server.address, params.descriptor)          # any channel

    worker = ps.xfer.Context(name="worker")
    ep = worker.connect(address)
    remote = ep.import_region(descriptor)
    ep.put(np.ones(16, np.float32), remote, offset=0)   # blocking
    ep.get(out, remote)
    ep.flush()

Buffers are C-contiguous NumPy arrays of any dtype (their ``nbytes`` are
transferred) or CPU torch tensors (used through ``tensor.numpy()``, which
shares their memory); destinations must be writable. Offsets and lengths are
in bytes. Atomics work on 8-byte aligned words; values are integers in
[-2**63, 2**64) (negative ones as two's complement: adding -1 subtracts one)
and previous words come back as unsigned ints.

Completion: a blocking call returns when its operation completed at the
target (a ``get`` has its data in place). A ``post_*`` call returns a
:class:`Request` at once; ``wait()`` blocks until it completed and returns the
atomic's previous value (else None), ``test()`` polls. The request keeps its
buffers alive until then. Without ``flush`` (or :meth:`Context.fence`) two
operations are not ordered, except that ``put_with_notify`` makes the notify
word visible only after its data. Every transfer, wait, flush and connect
releases the GIL.

Failures raise :mod:`ps.errors` classes with the C++ status message:
``OutOfRangeError``, ``AccessDeniedError``, ``PeerLostError``, ...; a buffer
of the wrong type raises ``TypeError``, a non-contiguous or read-only one
``InvalidArgumentError``.

Completion events: a region allocated with ``NOTIFY_EVENTS`` makes every
``put_with_notify`` whose notify word lies in it queue a
:class:`Notification` at the owner (after the data), which
:meth:`Context.wait_notification` returns; the waiting thread sleeps. A
:class:`Pool` is one registered region handed out in blocks that peers
address by (the pool's descriptor, the block's offset). ``write_fence`` and
``read_fence`` order writes and complete reads more cheaply than ``flush``.

Lifetimes: regions and endpoints keep their context alive. Dropping the
Python :class:`Context` therefore does not stop it while a region, endpoint,
remote region or request made from it is still referenced; it stops (closes
its listener, joins its threads) when the last of them goes. A registered
array stays referenced by its context until :meth:`Context.deregister` or
the context's end, since peers may write it until then.
"""

import collections
import enum

import numpy as np

from ps import _arrays, errors
from ps._native import xfer as _xfer

__all__ = [
    "Access", "NONE", "READ", "WRITE", "ATOMIC", "ALL", "NOTIFY_EVENTS",
    "Context", "Endpoint", "MemoryRegion", "RemoteRegion", "Request", "Batch",
    "Notification", "Pool", "Block",
]

MemoryRegion = _xfer.MemoryRegion
RemoteRegion = _xfer.RemoteRegion
Request = _xfer.Request


class Access(enum.IntFlag):
    """What a peer may do to a region (the owner always has full access)."""

    NONE = 0
    READ = 1  # get, readv
    WRITE = 2  # put, writev, put_with_notify
    ATOMIC = 4  # fetch_add, compare_swap
    ALL = 7
    # Grants nothing: put_with_notify into the region queues a Notification
    # at the owner (not over verbs yet).
    NOTIFY_EVENTS = 8


NONE, READ, WRITE, ATOMIC, ALL, NOTIFY_EVENTS = (
    Access.NONE, Access.READ, Access.WRITE, Access.ATOMIC, Access.ALL,
    Access.NOTIFY_EVENTS)

Notification = collections.namedtuple(
    "Notification", ["sender", "region_id", "offset", "value"])
Notification.__doc__ = """A put_with_notify landed: the sending context's
``instance``, the notify word's region (its ``id`` here) and offset, and
the value stored."""

Block = collections.namedtuple("Block", ["offset", "size", "array"])
Block.__doc__ = """A block of a :class:`Pool`: its byte ``offset`` in the
pool's region (what peers address), ``size`` and its memory (uint8)."""


def _as_array(buffer):
    """``buffer`` as a NumPy array sharing its memory (tensors, bytes)."""
    shared = _arrays.shared_array(buffer, "a buffer")
    if shared is not None:
        return shared
    if isinstance(buffer, (bytes, bytearray, memoryview)):
        return np.frombuffer(buffer, dtype=np.uint8)
    raise TypeError("a buffer must be a numpy array or a CPU torch tensor, "
                    f"not {type(buffer).__name__}")


def _segments(segments):
    """``(buffer, offset)`` pairs with the buffers as arrays."""
    pairs = []
    for segment in segments:
        try:
            buffer, offset = segment
        except (TypeError, ValueError):
            raise errors.InvalidArgumentError(
                "each segment must be a (buffer, remote offset) pair, not "
                f"{segment!r}") from None
        pairs.append((_as_array(buffer), offset))
    return pairs


class Context:
    """This process's transfer context (one per process is typical).

    It listens at ``address`` ("host:port") for peers, from the moment it is
    made. ``transport`` is "auto" (shm on the same host, verbs with RDMA
    devices, else tcp), "shm", "tcp" or "verbs". ``secret`` (bytes, at least
    16) authenticates peers; empty takes $PS_CLUSTER_SECRET_FILE or
    $PS_CLUSTER_SECRET, and without any a context may listen on loopback
    only. An operation without an answer for ``peer_timeout_ms`` declares
    its peer lost. ``copy_threads`` (1 to 64) threads copy each same-host
    write of 512 KiB or more together, the caller's included.
    ``cpu_wakeup_latency_us`` >= 0 asks the kernel to wake every CPU within
    that bound while the context lives (0: idle CPUs poll; speeds up tcp
    round trips to idle peers; needs root); -1 leaves the machine alone.
    """

    def __init__(self, name="xfer", *, listen_host="127.0.0.1",
                 listen_port=0, advertise_host="", transport="auto",
                 peer_timeout_ms=10000, secret=b"",
                 notification_capacity=4096, copy_threads=1,
                 cpu_wakeup_latency_us=-1):
        self._ctx = _xfer.Context(
            name=name, listen_host=listen_host, listen_port=listen_port,
            advertise_host=advertise_host, transport=transport,
            peer_timeout_ms=peer_timeout_ms, secret=bytes(secret),
            notification_capacity=notification_capacity,
            copy_threads=copy_threads,
            cpu_wakeup_latency_us=cpu_wakeup_latency_us)

    def __repr__(self):
        return f"<ps.xfer.Context {self.name} at {self.address}>"

    @property
    def name(self):
        """The name peers and logs know this context by."""
        return self._ctx.name

    @property
    def address(self):
        """The "host:port" peers pass to :meth:`connect`."""
        return self._ctx.address

    @property
    def instance(self):
        """A random number per context: descriptors of another are stale."""
        return self._ctx.instance

    def allocate(self, nbytes, access=ALL):
        """A new zero-filled region of ``nbytes``; ``region.array`` is its
        memory (uint8; ``.view(dtype)`` for others)."""
        return self._ctx.allocate(int(nbytes), int(access))

    def register(self, buffer, access=ALL):
        """Makes ``buffer`` (an array or CPU tensor) reachable by peers.

        The context keeps it referenced until :meth:`deregister`; it must
        be writable when ``access`` includes WRITE or ATOMIC.
        """
        return self._ctx.register(_as_array(buffer), int(access))

    def deregister(self, region):
        """Peers can no longer reach ``region`` once this returns."""
        self._ctx.deregister(region)

    def connect(self, address):
        """An :class:`Endpoint` to the context listening at ``address``."""
        return Endpoint(self._ctx.connect(address))

    def fence(self):
        """Flushes every endpoint this context connected."""
        self._ctx.fence()

    def wait_notification(self, timeout=None):
        """The next :class:`Notification` to this context, sleeping up to
        ``timeout`` seconds (None: until one comes); None on timeout."""
        while True:
            step = 3600.0 if timeout is None else timeout
            got = self._ctx.wait_notification(int(step * 1e6))
            if got is not None:
                return Notification(*got)
            if timeout is not None:
                return None

    def poll_notification(self):
        """The next :class:`Notification` if one is queued, else None."""
        got = self._ctx.poll_notification()
        return None if got is None else Notification(*got)

    def pool(self, nbytes, access=ALL, alignment=64):
        """A :class:`Pool` of ``nbytes`` registered once with ``access``."""
        return Pool(self, nbytes, access, alignment)


class Pool:
    """One registered region handed out in blocks (core/registered_pool.h).

    Peers import ``descriptor`` once and address a block by its offset;
    ``allocate`` raises ResourceExhaustedError when no free range holds the
    block, ``free`` InvalidArgumentError for a block not live here.
    """

    __slots__ = ("_pool",)

    def __init__(self, context, nbytes, access=ALL, alignment=64):
        self._pool = _xfer.RegisteredPool(context._ctx, int(nbytes),
                                          int(access), int(alignment))

    def allocate(self, nbytes, alignment=0):
        """A :class:`Block` of ``nbytes`` (aligned to ``alignment``, 0: the
        pool's)."""
        return Block(*self._pool.allocate(int(nbytes), int(alignment)))

    def free(self, block):
        """Returns ``block`` to the pool."""
        self._pool.free(block.offset, block.size)

    @property
    def descriptor(self):
        """What peers pass to :meth:`Endpoint.import_region`."""
        return self._pool.descriptor

    @property
    def region_id(self):
        """The pool region's id, as notifications name it."""
        return self._pool.region_id

    @property
    def used(self):
        """Bytes in live blocks."""
        return self._pool.used

    @property
    def capacity(self):
        """The pool's size in bytes."""
        return self._pool.capacity


class Endpoint:
    """The connection to one peer context (made by :meth:`Context.connect`).

    Blocking calls return once the operation completed at the target;
    ``post_*`` calls return a :class:`Request` at once.
    """

    __slots__ = ("_ep",)

    def __init__(self, native):
        self._ep = native

    def __repr__(self):
        return (f"<ps.xfer.Endpoint to {self.peer_name} over "
                f"{self.transport}{' (lost)' if self.lost else ''}>")

    peer_name = property(lambda self: self._ep.peer_name,
                         doc="The peer context's name.")
    peer_instance = property(lambda self: self._ep.peer_instance,
                             doc="The peer context's instance number.")
    transport = property(lambda self: self._ep.transport,
                         doc='"shm", "tcp" or "verbs".')
    lost = property(lambda self: self._ep.lost,
                    doc="True once the peer was declared lost.")

    def import_region(self, descriptor):
        """The peer's region described by ``descriptor`` (bytes)."""
        return self._ep.import_region(bytes(descriptor))

    def put(self, src, remote, offset=0):
        """Writes ``src`` at byte ``offset`` of ``remote``."""
        self._ep.put(_as_array(src), remote, offset)

    def get(self, dst, remote, offset=0):
        """Reads ``dst.nbytes`` from byte ``offset`` of ``remote`` into
        ``dst``."""
        self._ep.get(_as_array(dst), remote, offset)

    def writev(self, segments, remote):
        """Writes each ``(src, offset)`` of ``segments`` into ``remote``."""
        self._ep.writev(_segments(segments), remote)

    def readv(self, segments, remote):
        """Reads each ``(dst, offset)`` of ``segments`` from ``remote``."""
        self._ep.readv(_segments(segments), remote)

    def fetch_add(self, remote, offset, value):
        """Adds ``value`` to the word at ``offset``; returns the old one."""
        return self._ep.fetch_add(remote, offset, value)

    def compare_swap(self, remote, offset, expected, desired):
        """Stores ``desired`` if the word equals ``expected``; returns the
        old word (``expected`` when it swapped)."""
        return self._ep.compare_swap(remote, offset, expected, desired)

    def put_with_notify(self, src, remote, offset, notify_remote,
                        notify_offset, notify_value):
        """Writes ``src``, then stores ``notify_value`` in the word at
        ``notify_offset`` of ``notify_remote``: whoever sees the word sees
        the data."""
        self._ep.put_with_notify(_as_array(src), remote, offset,
                                 notify_remote, notify_offset, notify_value)

    def post_put(self, src, remote, offset=0):
        """Non-blocking :meth:`put`."""
        return self._ep.post_put(_as_array(src), remote, offset)

    def post_get(self, dst, remote, offset=0):
        """Non-blocking :meth:`get`: ``dst`` is filled once it completed."""
        return self._ep.post_get(_as_array(dst), remote, offset)

    def post_writev(self, segments, remote):
        """Non-blocking :meth:`writev`."""
        return self._ep.post_writev(_segments(segments), remote)

    def post_readv(self, segments, remote):
        """Non-blocking :meth:`readv`."""
        return self._ep.post_readv(_segments(segments), remote)

    def post_fetch_add(self, remote, offset, value):
        """Non-blocking :meth:`fetch_add`; ``wait()`` returns the old
        word."""
        return self._ep.post_fetch_add(remote, offset, value)

    def post_compare_swap(self, remote, offset, expected, desired):
        """Non-blocking :meth:`compare_swap`; ``wait()`` returns the old
        word."""
        return self._ep.post_compare_swap(remote, offset, expected, desired)

    def post_put_with_notify(self, src, remote, offset, notify_remote,
                             notify_offset, notify_value):
        """Non-blocking :meth:`put_with_notify`."""
        return self._ep.post_put_with_notify(
            _as_array(src), remote, offset, notify_remote, notify_offset,
            notify_value)

    def post(self, batch):
        """Posts every operation of ``batch`` at once; the request completes
        when all have (with the first failure, if any)."""
        return self._ep.post(batch._batch)

    def flush(self):
        """Returns once every operation posted to this peer before it has
        completed and is visible; raises the first failure among them."""
        self._ep.flush()

    def write_fence(self):
        """Every write and atomic posted before takes effect at the target
        before any operation posted after (it orders; on tcp it does not
        wait)."""
        self._ep.write_fence()

    def read_fence(self):
        """Returns once every get, readv and atomic posted before has its
        data in place."""
        self._ep.read_fence()


class Batch:
    """Operations to one peer, posted together with :meth:`Endpoint.post`.

    It keeps its buffers and remote regions alive while it lives.
    """

    __slots__ = ("_batch",)

    def __init__(self):
        self._batch = _xfer.Batch()

    def put(self, src, remote, offset=0):
        """Adds a write of ``src`` at byte ``offset`` of ``remote``."""
        self._batch.put(_as_array(src), remote, offset)

    def get(self, dst, remote, offset=0):
        """Adds a read into ``dst`` from byte ``offset`` of ``remote``."""
        self._batch.get(_as_array(dst), remote, offset)

    def fetch_add(self, remote, offset, value):
        """Adds a fetch-add; returns its index in :attr:`results`."""
        return self._batch.fetch_add(remote, offset, value)

    @property
    def results(self):
        """The fetch-adds' previous words, once the posted batch
        completed."""
        return self._batch.results

    def __len__(self):
        return len(self._batch)
