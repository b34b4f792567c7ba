"""ps.allreduce: worker processes (torch.multiprocessing + gloo for the
rendezvous) sum tensors through ps.xfer. The sum equals every rank's
tensors added in rank order, bit for bit, on 2 and 3 ranks, over shm and
tcp; as a DDP comm hook it trains a model to the same parameters as DDP's
own gloo all-reduce; bad input, sizes that differ between ranks and a lost
rank raise clear errors."""

import pytest

pytest.importorskip("torch")

# Each scenario: spawns `world` ranks that run `body(rank, world, red)`
# (red: an AllReduce, or None for bodies that make their own) and print
# "ok <rank>" at the end (the ranks' lines may interleave: count them).
#
# The rendezvous is a file, not a port: a port picked free and then closed
# could be taken (as the local port of another test's connection) before
# rank 0 binds it again, and init_process_group then fails with "Address
# already in use" (seen in CI under a loaded suite).
HARNESS = """
import os, sys, tempfile, torch, torch.distributed as dist
import torch.multiprocessing as mp
import ps.allreduce
from ps import errors

def main(rank, world, store, transport, make):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}",
                            rank=rank, world_size=world)
    red = (ps.allreduce.AllReduce(1 << 20, timeout=5, transport=transport)
           if make else None)
    body(rank, world, red)
    print(f"ok {rank}", flush=True)

if __name__ == "__main__":
    world, transport, make = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
    with tempfile.TemporaryDirectory() as folder:
        store = os.path.join(folder, "rendezvous")
        mp.spawn(main, args=(world, store, transport, make), nprocs=world)
"""

EXACT = """
def body(rank, world, red):
    g = torch.Generator().manual_seed(rank)
    # Sizes around nothing special and around the slot size; enough calls
    # for both parities of the slots to be reused several times.
    for call in range(40):
        n = (1, 7, 22000, (1 << 20) // 4, 5)[call % 5]
        t = torch.randn(n, generator=g)
        parts = [torch.empty(n) for _ in range(world)]
        dist.all_gather(parts, t)
        want = parts[0].clone()
        for p in parts[1:]:
            want += p
        assert red(t) is t
        assert torch.equal(t, want), (rank, call, n)
"""


def scenario(run_python, body, world, transport="auto", make=True,
             timeout=120):
    return run_python(HARNESS.replace("def main", body + "\ndef main", 1),
                      world, transport, int(make), timeout=timeout)


@pytest.mark.parametrize("world,transport", [(2, "auto"), (3, "auto"),
                                             (2, "tcp")])
def test_sum_is_rank_order_sum(run_python, world, transport):
    r = scenario(run_python, EXACT, world, transport)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.count("ok") == world, r.stdout


DDP = """
def body(rank, world, red):
    def train(hook):
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(20, 16), torch.nn.ReLU(),
                                  torch.nn.Linear(16, 1))
        ddp = torch.nn.parallel.DistributedDataParallel(mlp)
        if hook:
            ddp.register_comm_hook(red, ps.allreduce.ddp_comm_hook)
        opt = torch.optim.Adam(ddp.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(100 + rank)
        for _ in range(30):
            x = torch.randn(64, 20, generator=g)
            y = torch.rand(64, 1, generator=g)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(
                ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return [p.detach().clone() for p in mlp.parameters()]
    ours, gloo = train(True), train(False)
    # Two ranks: a + b, halved, whichever adds first: the same bits.
    assert all(torch.equal(a, b) for a, b in zip(ours, gloo)), rank
"""


def test_ddp_hook_trains_as_gloo_does(run_python):
    r = scenario(run_python, DDP, 2)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.count("ok") == 2


BAD_INPUT = """
def body(rank, world, red):
    def raises(kind, fn, words):
        try:
            fn()
        except kind as e:
            assert words in str(e), str(e)
            return
        raise AssertionError(f"no {kind.__name__}")
    raises(errors.InvalidArgumentError, lambda: red(torch.zeros(300000)),
           "larger than")
    raises(errors.InvalidArgumentError, lambda: red(torch.zeros(8, 8).t()),
           "contiguous")
    raises(TypeError, lambda: red([1.0, 2.0]), "torch.Tensor")
    raises(errors.InvalidArgumentError,
           lambda: ps.allreduce.AllReduce(0), "max_bytes")
    # Nothing was sent: the next good call still sums correctly.
    t = torch.full((5,), float(rank + 1))
    red(t)
    assert torch.equal(t, torch.full((5,), 3.0)), t
"""


def test_bad_input_raises_and_loses_nothing(run_python):
    r = scenario(run_python, BAD_INPUT, 2)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.count("ok") == 2


def test_without_torch_distributed_is_a_clear_error(run_python):
    r = run_python("""
        import ps.allreduce
        from ps import errors
        try:
            ps.allreduce.AllReduce(1024)
        except errors.NotInitializedError as e:
            assert "init_process_group" in str(e)
            print("raised")
    """)
    assert r.returncode == 0 and r.stdout.strip() == "raised", r.stderr


SIZE_MISMATCH = """
def body(rank, world, red):
    try:
        red(torch.zeros(5 + rank))  # 20 bytes on rank 0, 24 on rank 1
    except errors.InvalidArgumentError as e:
        assert "sent a tensor of" in str(e), str(e)
        print(f"raised {rank}", flush=True)
        return
    raise AssertionError("tensors of different sizes were summed")
"""


def test_a_size_that_differs_between_ranks_raises_on_both(run_python):
    r = scenario(run_python, SIZE_MISMATCH, 2)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.count("raised") == 2, r.stdout


LOST_RANK = """
def body(rank, world, red):
    if rank == 1:
        return  # leaves without taking part in the call
    try:
        red(torch.ones(4))
    except (errors.DeadlineError, errors.PeerLostError) as e:
        print("raised", type(e).__name__, flush=True)
        return
    raise AssertionError("a call without its peer returned")
"""


def test_lost_rank_raises_instead_of_hanging(run_python):
    r = scenario(run_python, LOST_RANK, 2, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "raised" in r.stdout, r.stdout
