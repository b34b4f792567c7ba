"""ps.torch.Embedding: the gradient it pushes equals nn.EmbeddingBag's /
nn.Embedding's weight.grad for the same rows; it trains inside an nn.Module
with a torch optimizer; eval() / no_grad push nothing; prefetched rows are
the ones read at prefetch time (one step stale).

The pushed gradient is read back from a "sum" table (rows += g) with a
"normal" initializer: pull R0, forward / backward, wait_applied, pull R1:
the pushed gradient is R1 - R0, and R0 is the reference module's weight."""

import pytest
import torch
from torch import nn

import ps
import ps.torch
from conftest import table_text

DIM = 8
TABLES = (table_text(1, "grad", dim=DIM, capacity=1 << 20,
                     initializer="normal", scale=0.5, seed=3) +
          table_text(2, "train", dim=DIM, capacity=1 << 20, optimizer="sgd",
                     learning_rate=1.0, initializer="normal", scale=0.1,
                     seed=5) +
          table_text(3, "exact", kind="EXACT", dim=DIM, capacity=4096,
                     extra="admit_after_pushes: 1 ") +
          # Rows idle for more than 2 steps are freed.
          table_text(4, "exact_age", kind="EXACT", dim=DIM, capacity=4096,
                     extra="admit_after_pushes: 1 evict_after_steps: 2 ") +
          # 8 rows a shard: new keys take the least recently updated rows.
          table_text(5, "exact_bound", kind="EXACT", dim=DIM, capacity=8,
                     extra="admit_after_pushes: 1 "))

# A batch of 4 bags of 5 ids with repeats inside and across bags.
IDS = torch.tensor([[5, 9, 5, 1 << 33, 17],
                    [9, 9, 2, 40, 5],
                    [123456789, 2, 17, 17, 17],
                    [40, 5, 8, 9, 2]], dtype=torch.int64)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    # One worker, async: wait_applied makes every push visible.
    path = tmp_path_factory.mktemp("tables") / "torch.tables"
    path.write_text(TABLES)
    with ps.LocalServers(path, num_shards=2, num_workers=1) as servers:
        c = ps.Client(servers.addresses, timeout_ms=10000)
        yield c
        c.close()


def nonlinear_loss(out):
    """A loss whose gradient differs per row and per column."""
    w = torch.linspace(-1.0, 1.0, out.shape[-1])
    return (torch.tanh(out) * w).sum() + (out ** 2).sum() * 0.3


def pushed_gradient(client, table, keys, run):
    """R1 - R0 of a "sum" table around ``run()`` (which pushes once)."""
    r0 = client.pull(table, keys)
    run()
    client.wait_applied()
    return client.pull(table, keys) - r0, r0


@pytest.mark.parametrize("mode", ["sum", "mean", "max", None])
def test_gradient_matches_torch(client, mode):
    emb = ps.torch.Embedding(client, "grad", mode=mode)
    keys, inverse = torch.unique(IDS.reshape(-1), return_inverse=True)
    inverse = inverse.reshape(IDS.shape)
    rows0 = client.pull("grad", keys)
    if mode is None:
        ref = nn.Embedding(len(keys), DIM)
    else:
        ref = nn.EmbeddingBag(len(keys), DIM, mode=mode)
    with torch.no_grad():
        ref.weight.copy_(rows0)

    want_out = ref(inverse)
    nonlinear_loss(want_out).backward()

    def run():
        out = emb(IDS)
        assert out.shape == want_out.shape
        torch.testing.assert_close(out, want_out, atol=1e-6, rtol=0)
        nonlinear_loss(out).backward()

    grad, r0 = pushed_gradient(client, "grad", keys, run)
    assert torch.equal(r0, rows0)  # nothing pushed in between
    assert emb.pushes == 1
    torch.testing.assert_close(grad, ref.weight.grad, atol=1e-5, rtol=0)
    # Repeated ids really were summed: id 17 is used 4 times, its gradient
    # is not that of one use.
    assert grad.abs().sum() > 0


def test_gradient_with_offsets(client):
    """1-D ids with offsets (bags of different lengths), as EmbeddingBag."""
    emb = ps.torch.Embedding(client, "grad", mode="sum")
    flat = torch.tensor([3, 4, 3, 3, 70, 4, 1 << 40], dtype=torch.int64)
    offsets = torch.tensor([0, 2, 3, 6], dtype=torch.int64)  # 2, 1, 3, 1
    keys, inverse = torch.unique(flat, return_inverse=True)
    rows0 = client.pull("grad", keys)
    ref = nn.EmbeddingBag(len(keys), DIM, mode="sum")
    with torch.no_grad():
        ref.weight.copy_(rows0)
    nonlinear_loss(ref(inverse, offsets)).backward()

    grad, _ = pushed_gradient(
        client, "grad", keys,
        lambda: nonlinear_loss(emb(flat, offsets)).backward())
    torch.testing.assert_close(grad, ref.weight.grad, atol=1e-5, rtol=0)


def test_exact_table_embedding(client):
    """An EXACT table: rows start at zero."""
    emb = ps.torch.Embedding(client, "exact", mode="sum")
    keys, inverse = torch.unique(IDS.reshape(-1), return_inverse=True)
    ref = nn.EmbeddingBag(len(keys), DIM, mode="sum")
    with torch.no_grad():
        ref.weight.copy_(client.pull("exact", keys))
    nonlinear_loss(ref(inverse.reshape(IDS.shape))).backward()
    grad, _ = pushed_gradient(client, "exact", keys,
                              lambda: nonlinear_loss(emb(IDS)).backward())
    torch.testing.assert_close(grad, ref.weight.grad, atol=1e-5, rtol=0)


def evicted(client):
    """Rows of EXACT tables freed so far, over both shards."""
    return sum(client.stats(s).get("exact_evicted", 0) for s in range(2))


def train_step(emb, ids):
    nonlinear_loss(emb(ids)).backward()


def test_exact_embedding_rows_evicted_by_age_read_as_zeros(client):
    """Rows an Embedding trained, left idle for more than
    evict_after_steps while other ids train on, are freed: they pull as
    zeros (a new id's row), the fresh ones keep their values."""
    emb = ps.torch.Embedding(client, "exact_age", mode="sum")
    idle = torch.tensor([[1001, 1002, 1003, 1004]], dtype=torch.int64)
    busy = torch.tensor([[2001, 2002, 2003, 2004]], dtype=torch.int64)
    before = evicted(client)
    train_step(emb, idle)
    for _ in range(4):
        train_step(emb, busy)
        client.wait_applied()
        client.clock()
    train_step(emb, busy)
    client.wait_applied()
    assert torch.count_nonzero(client.pull("exact_age", idle[0])) == 0
    assert torch.all(client.pull("exact_age", busy[0]).abs().sum(1) > 0)
    assert evicted(client) - before == 4


def test_exact_embedding_at_its_bound_keeps_the_latest_rows(client):
    """An Embedding trains 160 ids, 4 a step, into a table of 8 rows a
    shard: the last step's ids keep their rows (the least recently updated
    rows of the shard made room, whichever partition held them), the
    earliest were evicted, and no shard holds more than its bound."""
    emb = ps.torch.Embedding(client, "exact_bound", mode="sum")
    before = evicted(client)
    for first in range(0, 160, 4):
        ids = torch.arange(first, first + 4, dtype=torch.int64).reshape(1, 4)
        train_step(emb, ids + 5000)
        client.wait_applied()
        client.clock()
    latest = torch.arange(156, 160, dtype=torch.int64) + 5000
    earliest = torch.arange(0, 4, dtype=torch.int64) + 5000
    assert torch.all(client.pull("exact_bound", latest).abs().sum(1) > 0)
    assert torch.count_nonzero(client.pull("exact_bound", earliest)) == 0
    # 160 rows taken, at most 16 held: the rest were evicted.
    assert evicted(client) - before >= 160 - 16


class TinyCtr(nn.Module):
    """Server-side embedding bag + a local dense layer."""

    def __init__(self, client):
        super().__init__()
        self.embedding = ps.torch.Embedding(client, "train", mode="mean")
        self.dense = nn.Linear(DIM, 1)

    def forward(self, ids):
        return self.dense(self.embedding(ids)).squeeze(1)


def test_trains_inside_module(client):
    torch.manual_seed(0)
    model = TinyCtr(client)
    opt = torch.optim.Adam(model.dense.parameters(), lr=0.05)
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0])
    keys = torch.unique(IDS)
    rows0 = client.pull("train", keys)
    w0 = model.dense.weight.detach().clone()
    losses = []
    for _ in range(20):
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(IDS),
                                                              labels)
        loss.backward()
        opt.step()
        client.wait_applied()
        losses.append(loss.item())
    assert model.embedding.pushes == 20
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < losses[0] * 0.8, losses
    assert not torch.equal(model.dense.weight, w0)
    assert not torch.equal(client.pull("train", keys), rows0)
    # The anchor parameter is the module's only trace of the table.
    names = [n for n, _ in model.named_parameters()]
    assert names == ["embedding.anchor", "dense.weight", "dense.bias"]


def test_eval_and_no_grad_push_nothing(client):
    model = TinyCtr(client)
    keys = torch.unique(IDS)
    client.wait_applied()
    rows0 = client.pull("train", keys)
    model.eval()
    out = model(IDS)
    out.sum().backward()  # only the dense layer has a gradient
    model.train()
    with torch.no_grad():
        out2 = model(IDS)
    assert not out2.requires_grad
    torch.testing.assert_close(out, out2.detach())
    client.wait_applied()
    assert model.embedding.pushes == 0
    assert torch.equal(client.pull("train", keys), rows0)


def test_prefetch_returns_rows_read_at_prefetch(client):
    emb = ps.torch.Embedding(client, "grad", mode=None)
    ids = torch.tensor([[11, 12], [12, 13]], dtype=torch.int64)
    keys = torch.unique(ids)
    old = client.pull("grad", keys)
    step = torch.full((len(keys), DIM), 0.25)

    emb.prefetch(ids)
    # Let the prefetch's read finish before the push below is applied
    # (otherwise which rows it reads is a race; the module's own use has
    # the next batch's compute in between).
    emb._prefetched[3].wait()
    client.push("grad", keys, step)
    client.wait_applied()
    with torch.no_grad():
        stale = emb(ids)
        fresh = emb(ids)  # no prefetch: pulls now
    index = torch.searchsorted(keys, ids)
    assert torch.equal(stale, old[index])
    assert torch.equal(fresh, (old + step)[index])
    assert torch.equal(client.pull("grad", keys), old + step)

    # A prefetch of other ids is dropped: the forward pulls its own rows.
    emb.prefetch(torch.tensor([[99, 98]]))
    with torch.no_grad():
        assert torch.equal(emb(ids), (old + step)[index])
