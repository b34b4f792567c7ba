"""The workers' all-reduce of a dense gradient: ps.allreduce next to
torch.distributed's gloo, in the same processes and the same run.

Two ranks (processes of this host) sum a float32 tensor of DeepFM's MLP
gradient size (22,000 floats, 88 KB) `calls` times with each, alternating
by round; reported: the CPU microseconds per call of one rank (its
process CPU, the mean of the two ranks) and the wall microseconds per call,
medians over the rounds. Used by ctr_bench.py (scripts/bench_python.sh).
"""

import socket
import statistics
import time

FLOATS = 22_000  # DeepFM's MLP here: 39 x 8 -> 64 -> 32 -> 1


def _rank(rank, port, calls, rounds, out):
    import torch
    import torch.distributed as dist

    import ps.allreduce
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    ours = ps.allreduce.AllReduce(FLOATS * 4)
    tensor = torch.zeros(FLOATS)  # sums stay finite call after call
    ways = {"ps": ours, "gloo": dist.all_reduce}
    for reduce in ways.values():  # warm-up: connections, first touches
        for _ in range(50):
            reduce(tensor)
    samples = {name: [] for name in ways}
    for _ in range(rounds):
        for name, reduce in ways.items():
            dist.barrier()
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(calls):
                reduce(tensor)
            samples[name].append(((time.process_time() - cpu0) / calls * 1e6,
                                  (time.perf_counter() - wall0) / calls * 1e6))
    out[rank] = samples
    dist.destroy_process_group()


def measure(calls=1000, rounds=3):
    """{"ps": (cpu_us, wall_us), "gloo": (cpu_us, wall_us)} per call."""
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = mp.Manager().dict()
    mp.spawn(_rank, args=(port, calls, rounds, out), nprocs=2)
    result = {}
    for name in ("ps", "gloo"):
        per_round = [[out[r][name][k] for r in range(2)]
                     for k in range(rounds)]
        cpu = statistics.median(sum(c for c, _ in ranks) / 2
                                for ranks in per_round)
        wall = statistics.median(max(w for _, w in ranks)
                                 for ranks in per_round)
        result[name] = (cpu, wall)
    return result
