"""All-reduce of dense tensors between the workers of a job, through the
one-sided core (:mod:`ps.xfer`) instead of torch.distributed's gloo.

A data-parallel dense network (the MLP of a DeepFM) sums its gradient
across workers every step. gloo does that over TCP with a ring of messages:
on one host, 88 KB took 393 us and ~245 us of each rank's CPU. Here every
worker puts its tensor straight into a slot of each peer's registered
memory (``put_with_notify``: shared memory between processes of one host,
tcp or verbs between hosts) and sums the slots it received; nothing but the
data and one notify word per peer crosses.

    dist.init_process_group("gloo", ...)         # the rendezvous only
    reduce = ps.allreduce.AllReduce(max_bytes=4 << 20)
    reduce(tensor)                                # in place: the sum
    ddp.register_comm_hook(reduce, ps.allreduce.ddp_comm_hook)

Every rank must call it with tensors of the same size and dtype in the same
order (as any collective); a size that differs from a peer's raises
InvalidArgumentError on both. After any error the AllReduce is spent: make
a new one (collectively) to go on. The sum is taken in rank order on every
rank, so all ranks get the same bits. Slots are double-buffered by the
parity of the call: a peer can be one call ahead, never two (it cannot
finish a call without this rank's tensor of that call).

Not thread-safe: one call at a time per object.
"""

import numpy as np
import torch
import torch.distributed as dist

from ps import errors, xfer

__all__ = ["AllReduce", "ddp_comm_hook"]

_WORD = 8  # bytes of one notify word
# A notify word holds the call number (low 32 bits) and the tensor's bytes
# (high 32 bits), so that a peer's size can be checked against this rank's.
_MAX_BYTES = 1 << 32


class AllReduce:
    """The all-reduce of the default torch.distributed group's ranks.

    ``max_bytes`` bounds the tensors it takes (each rank registers two slots
    of that size per peer). The constructor is itself collective: every
    rank makes its AllReduce at the same point, after
    ``dist.init_process_group``. ``timeout`` (seconds) bounds the wait for
    a peer's tensor; a lost peer raises ps.errors.PeerLostError or
    ps.errors.DeadlineError instead of hanging. ``context_options`` go to
    this rank's :class:`ps.xfer.Context` (``listen_host`` and
    ``advertise_host`` for ranks on several hosts, ``secret``, ...).
    """

    def __init__(self, max_bytes, *, timeout=60.0, **context_options):
        if not dist.is_initialized():
            raise errors.NotInitializedError(
                "ps.allreduce.AllReduce needs torch.distributed initialized "
                "(dist.init_process_group) for its rendezvous")
        if not 0 < max_bytes < _MAX_BYTES:
            raise errors.InvalidArgumentError(
                f"max_bytes must be in [1, {_MAX_BYTES}), got {max_bytes}")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.max_bytes = int(max_bytes)
        self.timeout = float(timeout)
        self._calls = 0
        self._early = {}  # (call, sender) -> bytes: notified ahead of time
        self._ctx = xfer.Context(name=f"allreduce-{self.rank}",
                                 **context_options)
        # Slot (parity, sender) at ((parity * world) + sender) * max_bytes;
        # its notify word at the same index * 8.
        self._slots = self._ctx.allocate(2 * self.world * self.max_bytes,
                                         xfer.WRITE)
        self._words = self._ctx.allocate(2 * self.world * _WORD,
                                         xfer.WRITE | xfer.NOTIFY_EVENTS)
        mine = (self._ctx.address, self._slots.descriptor,
                self._words.descriptor)
        everyone = [None] * self.world
        dist.all_gather_object(everyone, mine)
        self._peers = {}
        for r, (address, slots, words) in enumerate(everyone):
            if r == self.rank:
                continue
            ep = self._ctx.connect(address)
            self._peers[r] = (ep, ep.import_region(slots),
                              ep.import_region(words))
        dist.barrier()  # every rank connected before the first put

    def _index(self, parity, sender):
        return parity * self.world + sender

    def __call__(self, tensor):
        """Replaces ``tensor`` (a contiguous CPU tensor) by the sum of every
        rank's; returns it."""
        if not isinstance(tensor, torch.Tensor) or tensor.device.type != "cpu":
            raise TypeError("AllReduce takes a CPU torch.Tensor")
        if not tensor.is_contiguous():
            raise errors.InvalidArgumentError(
                "AllReduce takes a contiguous tensor")
        data = tensor.numpy()
        if data.nbytes > self.max_bytes:
            raise errors.InvalidArgumentError(
                f"a tensor of {data.nbytes} bytes is larger than this "
                f"AllReduce's max_bytes ({self.max_bytes})")
        if self.world == 1:
            return tensor
        self._calls += 1
        call, parity = self._calls, self._calls % 2
        flat = data.reshape(-1)
        mine = self._index(parity, self.rank)
        word = call | (flat.nbytes << 32)
        requests = [ep.post_put_with_notify(flat, slots, mine * self.max_bytes,
                                            words, mine * _WORD, word)
                    for ep, slots, words in self._peers.values()]
        self._await(call, parity, flat.nbytes)
        for request in requests:
            request.wait()
        # The sum in rank order, the same on every rank.
        slots = self._slots.array
        total = None
        for r in range(self.world):
            if r == self.rank:
                part = flat
            else:
                at = self._index(parity, r) * self.max_bytes
                part = slots[at:at + flat.nbytes].view(flat.dtype)
            total = part.copy() if total is None else np.add(total, part,
                                                               out=total)
        flat[:] = total
        return tensor

    def _await(self, call, parity, nbytes):
        """Waits until every peer's tensor of `call` (`nbytes` bytes, as
        this rank's) is in its slot."""
        missing = set(self._peers)
        arrived = {}  # sender -> the bytes its tensor had
        for sender in list(missing):
            if (call, sender) in self._early:
                arrived[sender] = self._early.pop((call, sender))
                missing.discard(sender)
        while missing:
            note = self._ctx.wait_notification(self.timeout)
            if note is None:
                raise errors.DeadlineError(
                    f"all-reduce call {call}: no tensor from rank(s) "
                    f"{sorted(missing)} within {self.timeout} s")
            index = note.offset // _WORD
            sender, note_parity = index % self.world, index // self.world
            note_call = note.value & (_MAX_BYTES - 1)
            note_bytes = note.value >> 32
            if note_call == call and note_parity == parity:
                arrived[sender] = note_bytes
                missing.discard(sender)
            else:  # a peer already at the next call
                self._early[(note_call, sender)] = note_bytes
        for sender, their_bytes in sorted(arrived.items()):
            if their_bytes != nbytes:
                raise errors.InvalidArgumentError(
                    f"all-reduce call {call}: rank {sender} sent a tensor of "
                    f"{their_bytes} bytes, rank {self.rank} one of {nbytes}")


def ddp_comm_hook(state, bucket):
    """A DistributedDataParallel comm hook (``register_comm_hook(state,
    ddp_comm_hook)`` with an :class:`AllReduce` as ``state``): averages the
    bucket's gradients over the ranks, as DDP's own all-reduce does."""
    tensor = bucket.buffer()
    state(tensor).div_(state.world)
    future = torch.futures.Future()
    future.set_result(tensor)
    return future
