"""Embedding tables on the parameter servers, inside a PyTorch model.

    import ps, ps.torch
    client = ps.Client(servers, worker_id=rank, num_workers=world)
    emb = ps.torch.Embedding(client, "emb")              # (..., dim) rows
    bag = ps.torch.Embedding(client, "emb", mode="sum")  # like EmbeddingBag

    x = emb(ids)            # pulls the batch's rows from the servers
    loss = dense(x).sum()
    loss.backward()         # pushes the rows' gradient to the servers,
                            # whose optimizer (the table's) applies it
    client.clock()

Forward pulls each distinct id of the batch once; autograd sums the
gradient of repeated ids, and backward pushes one gradient row per distinct
id (the same rows ``nn.EmbeddingBag.weight.grad`` would hold). The module's
own parameter is an empty anchor that lets autograd reach it; the torch
optimizer has nothing of the table to update.

Prefetch: ``emb.prefetch(next_ids)`` starts pulling the next batch's rows
while the current one computes; the forward of those ids then uses them.
They were read before this step's push was applied, so they are one step
stale; leave prefetch out for exact training (the tests do).

Pushes return once the gradient is in the servers' inboxes (see
ps.client); in bsp, ``client.clock()`` waits until it is applied. Call the
module from one thread (one training step at a time).
"""

import numpy as np
import torch
import torch.nn.functional as F

from ps import _native
from ps.errors import InvalidArgumentError

_MODES = (None, "sum", "mean", "max")


class _GatheredRows(torch.autograd.Function):
    """rows[inverse] (one row per looked-up id); backward sums the gradient
    of each distinct key's rows in C++ and pushes it."""

    @staticmethod
    def forward(ctx, anchor, module, keys, inverse, rows):
        ctx.module, ctx.keys, ctx.inverse = module, keys, inverse
        ctx.count = rows.shape[0]
        return rows.index_select(0, inverse)

    @staticmethod
    def backward(ctx, grad):
        m = ctx.module
        summed = _native.client.sum_rows(
            ctx.inverse.numpy(), grad.contiguous().numpy(), ctx.count, m.dim)
        m._push(ctx.keys, summed)
        return torch.zeros_like(m.anchor), None, None, None, None


class _PooledRows(torch.autograd.Function):
    """The pulled rows themselves; backward pushes their gradient (which
    torch's embedding_bag backward computed)."""

    @staticmethod
    def forward(ctx, anchor, module, keys, rows):
        ctx.module, ctx.keys = module, keys
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx, grad_rows):
        ctx.module._push(ctx.keys, grad_rows.contiguous().numpy())
        return torch.zeros_like(ctx.module.anchor), None, None, None


class Embedding(torch.nn.Module):
    """The rows of server table ``table`` looked up by feature id.

    Args:
      client: a ps.Client connected to the servers.
      table: the table's name or id (HASHED or EXACT; its dim is the
        embedding width).
      mode: None: ``forward(ids)`` returns ``ids.shape + (dim,)``.
        "sum" / "mean" / "max": pooled like ``nn.EmbeddingBag``: a 2-D
        ``ids`` pools each row (one bag per row), a 1-D ``ids`` with
        ``offsets`` pools each bag; returns (bags, dim).
    """

    def __init__(self, client, table, mode=None):
        super().__init__()
        if mode not in _MODES:
            raise InvalidArgumentError(
                f"mode must be one of {_MODES}, not {mode!r}")
        self.client = client
        self.table = client.table(table)
        if self.table.kind == "DENSE":
            raise InvalidArgumentError(
                f"table {self.table.name!r} is DENSE: an embedding needs a "
                "HASHED or EXACT table")
        self.mode = mode
        self.anchor = torch.nn.Parameter(torch.empty(0))
        self._prefetched = None  # (ids, keys, inverse, handle)
        self.pushes = 0          # backward passes that pushed

    @property
    def dim(self):
        return self.table.dim

    def prefetch(self, ids):
        """Starts pulling the rows of ``ids`` (the next batch); a forward of
        the same ids uses them (one step stale, see the module's doc)."""
        keys, inverse = self._distinct(ids)
        handle = self.client.pull_async(self.table, keys)
        self._prefetched = (ids, keys, inverse, handle)

    def forward(self, ids, offsets=None, per_sample_weights=None):
        if ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"ids must be an integer tensor, not {ids.dtype}")
        if self.mode is None and offsets is not None:
            raise InvalidArgumentError("offsets need a pooling mode")
        keys, inverse, rows = self._rows(ids)
        learn = torch.is_grad_enabled() and self.training
        if self.mode is None:
            if learn:
                out = _GatheredRows.apply(self.anchor, self, keys, inverse,
                                          rows)
            else:
                out = rows.index_select(0, inverse)
            return out.reshape(*ids.shape, self.dim)
        if learn:
            rows = _PooledRows.apply(self.anchor, self, keys, rows)
        return F.embedding_bag(inverse.reshape(ids.shape), rows, offsets,
                               mode=self.mode,
                               per_sample_weights=per_sample_weights)

    def _distinct(self, ids):
        # Hashing in C++: O(n), where torch.unique sorts.
        flat = ids.reshape(-1).to(torch.int64).contiguous().numpy()
        keys, inverse = _native.client.distinct(flat)
        return torch.from_numpy(keys.view(np.int64)), torch.from_numpy(inverse)

    def _rows(self, ids):
        p = self._prefetched
        self._prefetched = None
        if p is not None and (p[0] is ids or torch.equal(p[0], ids)):
            return p[1], p[2], p[3].wait()
        if p is not None:
            p[3].wait()  # a prefetch of other ids: finished, dropped
        keys, inverse = self._distinct(ids)
        return keys, inverse, self.client.pull(self.table, keys)

    def _push(self, keys, grad_rows):
        self.client.push(self.table, keys, grad_rows)
        self.pushes += 1

    def extra_repr(self):
        return (f"table={self.table.name!r}, dim={self.dim}, "
                f"mode={self.mode!r}")


__all__ = ["Embedding"]
