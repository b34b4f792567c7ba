#!/usr/bin/env python3
"""DeepFM (or FM) in PyTorch on Criteo-format files, the embedding table on
parameter servers: N worker processes (the MLP replicated, its gradient
all-reduced through the one-sided core, ps.allreduce, or torch.distributed's
gloo) against M ps_server processes.

    python3 examples/python/train_ctr.py --train train.tsv --eval eval.tsv \\
        --workers 2 --servers 2 --checkpoint-dir /tmp/ckpt \\
        --checkpoint-every 50
    # stopped or crashed? the same command with --resume continues from the
    # newest complete checkpoint

The servers (ps.LocalServers, configs/fm.tables: rows [w, v_1 .. v_8],
Adagrad) hold and checkpoint the embeddings; worker 0 saves the MLP and its
Adam state next to each checkpoint (<checkpoint-dir>/dense-<step>.pt). A
resumed run restores both and skips the examples the checkpoint consumed.
``--servers-at host:port,...`` uses running servers instead. Prints one JSON
line per worker at the end (steps, samples/s, CPU seconds of the training
loop; on worker 0 also the started servers' CPU seconds over it, and the
eval AUC).
"""

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ps
import ps.allreduce
import ps.torch
from ps.cluster import process_cpu_seconds
from ctr_models import (CRITEO_FIELDS, batch_keys, evaluate, loss_of,
                        make_model)

ROOT = Path(__file__).resolve().parents[2]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", required=True, help="Criteo TSV training file")
    p.add_argument("--eval", help="Criteo TSV evaluation file (worker 0)")
    p.add_argument("--model", default="deepfm", choices=["fm", "deepfm"])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--servers", type=int, default=2,
                   help="ps_server processes to start on this machine")
    p.add_argument("--servers-at", default="",
                   help="control addresses of running servers, in shard order "
                   "(then --servers is ignored)")
    p.add_argument("--tables", default=str(ROOT / "configs" / "fm.tables"))
    p.add_argument("--table", default="emb")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--split", default="auto",
                   choices=["auto", "bytes", "lines"],
                   help="how the workers share --train (ps.data.Reader): "
                   "bytes: each reads a contiguous part of a plain file; "
                   "lines: worker w every line i with i %% workers == w "
                   "(each reads the whole file); auto: bytes, or lines for "
                   "gzip or a pipe. A resumed run must use the same split")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per worker")
    p.add_argument("--prefetch", action="store_true",
                   help="pull the next batch's rows during this step (one "
                   "step stale)")
    p.add_argument("--checkpoint-dir", default="",
                   help="the servers' checkpoint folder (empty: none)")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="checkpoint every N steps (the started servers' "
                   "--checkpoint_every_steps)")
    p.add_argument("--resume", action="store_true",
                   help="restore the newest complete checkpoint first")
    p.add_argument("--stop-after-steps", type=int, default=0,
                   help="stop every worker after this step, as if the job "
                   "were killed (to try --resume)")
    p.add_argument("--consistency", default="async",
                   choices=["async", "bsp", "ssp"],
                   help="the started servers' --consistency (bsp: a step "
                   "sees every push of the step before)")
    p.add_argument("--apply-threads", type=int, default=1,
                   help="apply threads of each started server")
    p.add_argument("--allreduce", default="ps", choices=["ps", "gloo"],
                   help="how the workers sum the MLP's gradient: ps "
                   "(ps.allreduce: one-sided puts into the peers' memory) "
                   "or gloo (torch.distributed's own)")
    args = p.parse_args(argv)
    if args.resume and not args.checkpoint_dir:
        p.error("--resume needs --checkpoint-dir")
    return args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


AGREE_EVERY = 16  # steps between the workers' checks that all have data


def step_batches(args, rank, world, skip, reduce):
    """This worker's batches of its share of the file (ps.data.Reader, split
    as --split says; the last one may be short), then empty ones while
    another worker still has data, so that every worker takes as many steps
    and no line is left out. The workers read AGREE_EVERY batches ahead and
    agree on the most any of them has (``reduce``, a ps.allreduce.AllReduce,
    sums every worker's count into a vector; None for one worker). Yields
    (keys, labels, lines of this worker consumed after it)."""
    reader = ps.data.Reader(args.train, worker_id=rank, num_workers=world,
                            split=args.split)
    reader.skip(skip)
    no_keys = torch.empty((0, CRITEO_FIELDS + 1), dtype=torch.int64)
    no_labels = torch.empty(0)
    while True:
        ahead = []
        while len(ahead) < AGREE_EVERY:
            batch = reader.read(args.batch_size)
            if len(batch) == 0:
                break
            ahead.append((batch_keys(batch.ids),
                          torch.from_numpy(batch.labels), reader.consumed))
        counts = torch.zeros(world, dtype=torch.int64)
        counts[rank] = len(ahead)
        if reduce is not None:
            reduce(counts)
        most = int(counts.max())
        yield from ahead
        for _ in range(most - len(ahead)):
            yield no_keys, no_labels, reader.consumed
        if most < AGREE_EVERY:
            return


def dense_path(args, step):
    return Path(args.checkpoint_dir) / f"dense-{step}.pt"


def worker(rank, world, addresses, args, results):
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=args.dist_url, rank=rank,
                            world_size=world)
    client = ps.Client(addresses, worker_id=rank, num_workers=world)
    model = make_model(args.model, ps.torch.Embedding(client, args.table))
    dense = [p for p in model.parameters() if p is not model.embedding.anchor]
    # The workers' all-reduce through the one-sided core: the step
    # agreement's counts and (--allreduce ps) the MLP's gradient, one call
    # at a time and in the same order on every worker. Collective: every
    # worker makes its AllReduce here.
    mlp_hook = args.model == "deepfm" and args.allreduce == "ps"
    reduce = None
    if world > 1:
        mlp_bytes = sum(p.numel() * p.element_size()
                        for p in model.mlp.parameters()) if mlp_hook else 0
        reduce = ps.allreduce.AllReduce(max(mlp_bytes, 8 * world))
    if args.model == "deepfm":
        model.mlp = torch.nn.parallel.DistributedDataParallel(model.mlp)
        if reduce is not None and mlp_hook:
            model.mlp.register_comm_hook(reduce, ps.allreduce.ddp_comm_hook)
    opt = torch.optim.Adam(dense, lr=0.001) if dense else None

    cp = client.checkpoints() if args.checkpoint_dir else None
    step, epoch, skip = 0, 0, 0
    if cp is not None:
        info = cp.info()
        if info["restored"]:
            step, epoch = info["restored_step"], info["epoch"]
            skip = info["examples_consumed"]
            if opt is not None:
                if not dense_path(args, step).exists():
                    raise ps.errors.NotFoundError(
                        f"the servers restored step {step}, but "
                        f"{dense_path(args, step)} (the MLP) is missing")
                state = torch.load(dense_path(args, step))
                model.mlp.module.load_state_dict(state["mlp"])
                opt.load_state_dict(state["adam"])
            print(f"worker {rank}: resumed after step {step} (epoch {epoch}, "
                  f"{skip} lines consumed)", flush=True)

    trained, stopped = 0, False
    # The servers' CPU over the training loop alone (not their start-up or
    # the evaluation): read by worker 0 between two barriers.
    dist.barrier()
    server_cpu0 = process_cpu_seconds(args.server_pids) if rank == 0 else 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    for epoch in range(epoch, args.epochs):
        batches = step_batches(args, rank, world, skip, reduce)
        skip = 0
        nxt = next(batches, None)
        while nxt is not None:
            (keys, labels, consumed), nxt = nxt, next(batches, None)
            if args.prefetch and nxt is not None:
                model.embedding.prefetch(nxt[0])
            loss, _ = loss_of(model, keys, labels)
            if opt is not None:
                opt.zero_grad()
            loss.backward()  # pushes the embedding gradient
            if opt is not None:
                opt.step()
            client.clock()
            step += 1
            trained += len(labels)
            if cp is not None and cp.due(step):
                if rank == 0 and opt is not None:
                    torch.save({"mlp": model.mlp.module.state_dict(),
                                "adam": opt.state_dict()},
                               dense_path(args, step))
                cp.checkpoint(step, epoch, consumed)
            if args.stop_after_steps and step >= args.stop_after_steps:
                stopped = True
                break
        if stopped:
            break
    seconds = time.perf_counter() - t0
    cpu_seconds = time.process_time() - cpu0
    dist.barrier()
    server_cpu = process_cpu_seconds(args.server_pids) - server_cpu0
    client.barrier()
    result = {"worker": rank, "steps": step, "examples": trained,
              "seconds": round(seconds, 3),
              "cpu_seconds": round(cpu_seconds, 3),
              "samples_per_sec": round(trained / seconds, 1) if seconds else 0,
              "stopped_early": stopped}
    if rank == 0:
        result["server_cpu_seconds"] = round(server_cpu, 3)
    if rank == 0 and args.eval and not stopped:
        auc, logloss = evaluate(model, ps.data.Reader(args.eval).batches(
            args.batch_size))
        result.update(auc=round(auc, 5), logloss=round(logloss, 5))
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(result) + "\n", end="", flush=True)
    results[rank] = result


def run(args):
    """Starts the servers (unless --servers-at) and the workers; returns
    the workers' results (a list of dicts) and the servers' CPU seconds."""
    args.dist_url = f"tcp://127.0.0.1:{free_port()}"
    # The workers' BLAS (OpenBLAS on Debian) with as many threads as torch:
    # read when a spawned worker loads it.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    servers = None
    args.server_pids = []
    if args.servers_at:
        addresses = args.servers_at.split(",")
    else:
        flags = {"apply_threads": args.apply_threads,
                 "consistency": args.consistency}
        if args.checkpoint_dir:
            flags["checkpoint_dir"] = args.checkpoint_dir
            flags["checkpoint_every_steps"] = args.checkpoint_every
            # The servers' own checkpoint at exit would hold no MLP (that is
            # saved by worker 0 at the scheduled steps only).
            flags["checkpoint_on_exit"] = False
            if args.resume:
                flags["restore_from"] = "latest"
        servers = ps.LocalServers(args.tables, num_shards=args.servers,
                                  num_workers=args.workers, **flags).start()
        addresses = servers.addresses
        args.server_pids = servers.pids
    try:
        results = mp.Manager().dict()
        mp.spawn(worker, args=(args.workers, addresses, args, results),
                 nprocs=args.workers)
        return [results[r] for r in range(args.workers)], (
            servers.cpu_seconds() if servers else 0.0)
    finally:
        if servers is not None:
            servers.stop()


def main(argv=None):
    args = parse_args(argv)
    results, _ = run(args)
    return 0 if all(r["steps"] > 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
