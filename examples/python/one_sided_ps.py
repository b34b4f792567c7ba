"""A one-sided parameter server in twenty lines of ps.xfer.

The server holds the parameters, one gradient slot per worker and one word
per worker plus a step word, all in registered memory, and publishes their
descriptors. Each step a worker puts its gradient into its slot, fences (the
gradient is then in place), bumps its word with fetch_add, waits for the
server's step word and gets the new parameters. The server's code never touches the network: it waits for every
worker's word in its own memory, applies SGD and bumps the step word.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/one_sided_ps.py

trains a small least-squares problem with two workers (processes), prints
the loss going down and exits 0 once it converged.
"""

import multiprocessing as mp
import sys
import time

import numpy as np

from ps import xfer

DIM, WORKERS, STEPS, LR = 8, 2, 50, 0.1


def server(conn):
    ctx = xfer.Context(name="server")
    params = ctx.allocate(DIM * 4, xfer.READ)
    grads = ctx.allocate(WORKERS * DIM * 4, xfer.WRITE)
    words = ctx.allocate((WORKERS + 1) * 8, xfer.ALL)  # per worker, then step
    conn.send((ctx.address, params.descriptor, grads.descriptor,
               words.descriptor))
    w, flag = params.array.view(np.float32), words.array.view(np.uint64)
    g = grads.array.view(np.float32).reshape(WORKERS, DIM)
    for step in range(1, STEPS + 1):
        while (flag[:WORKERS] < step).any():  # every worker's gradient
            time.sleep(0)
        w -= LR * g.mean(axis=0)
        flag[WORKERS] = step  # after the update: workers then get it
    conn.recv()  # serve the last gets until told to stop


def worker(rank, address, descriptors, x, y, losses):
    ctx = xfer.Context(name=f"worker-{rank}")
    ep = ctx.connect(address)
    params, grads, words = (ep.import_region(d) for d in descriptors)
    w = np.zeros(DIM, np.float32)
    for step in range(1, STEPS + 1):
        grad = (x.T @ (x @ w - y) / len(y)).astype(np.float32)
        sending = ep.post_put(grad, grads, rank * DIM * 4)  # keeps grad
        ctx.fence()  # the step's fence: the gradient is in place...
        ep.fetch_add(words, rank * 8, 1)  # ...before its word counts it
        while ep.fetch_add(words, WORKERS * 8, 0) < step:  # an atomic read
            time.sleep(0)
        ep.get(w, params)
        losses.put((rank, step, float(np.mean((x @ w - y) ** 2))))


def main():
    """Runs the server and the workers; 0 when the loss converged."""
    rng = np.random.default_rng(0)
    truth = rng.normal(size=DIM).astype(np.float32)
    shards = []
    for _ in range(WORKERS):
        x = rng.normal(size=(64, DIM)).astype(np.float32)
        shards.append((x, x @ truth))
    mp_ctx = mp.get_context("spawn")  # no forked copies of running threads
    here, there = mp_ctx.Pipe()
    losses = mp_ctx.Queue()
    procs = [mp_ctx.Process(target=server, args=(there,))]
    try:
        procs[0].start()
        if not here.poll(30):
            raise RuntimeError("the server did not publish its regions")
        address, *descriptors = here.recv()
        for rank, (x, y) in enumerate(shards):
            procs.append(mp_ctx.Process(
                target=worker,
                args=(rank, address, descriptors, x, y, losses)))
            procs[-1].start()
        by_step = {}
        for _ in range(WORKERS * STEPS):
            rank, step, loss = losses.get(timeout=30)
            by_step.setdefault(step, []).append(loss)
            if len(by_step[step]) == WORKERS and (step == 1 or step % 10 == 0):
                print(f"step {step:3d}  loss {np.mean(by_step[step]):.3e}")
        for p in procs[1:]:
            p.join(30)
        here.send("stop")
        procs[0].join(30)
        if any(p.exitcode != 0 for p in procs):
            raise RuntimeError(f"exit codes {[p.exitcode for p in procs]}")
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
    first, last = np.mean(by_step[1]), np.mean(by_step[STEPS])
    converged = last < 1e-4 * first
    print(f"loss {first:.4f} -> {last:.2e}: "
          f"{'converged' if converged else 'did NOT converge'}")
    return 0 if converged else 1


if __name__ == "__main__":
    sys.exit(main())
