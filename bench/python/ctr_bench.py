#!/usr/bin/env python3
"""The Python package's training benchmark (scripts/bench_python.sh).

FM and DeepFM (examples/python/ctr_models.py), one generated Criteo-format
file, batch 1000, one epoch, the same optimizers (configs/fm.tables' Adagrad,
lr 0.05 and initial accumulator 0.1, rows from normal(0, 0.01), for the rows;
Adam lr 0.001 for the MLP) and the same torch thread count, trained
  (a) torch: plain PyTorch, nn.EmbeddingBag(sparse=True) + torch's Adagrad;
  (b) ps:    PyTorch with the rows on 1 ps_server (ps.torch.Embedding);
  (c) ps_worker: the C++ trainer against 1 ps_server (with the model's
      shipped tables: frequency admission too, which the Python client
      does not apply, and DeepFM's MLP on the server);
and (b) with 2 workers x 2 servers against 1 x 1, both on a longer file
(--scale-rows: at 200,000 lines each process's warm-up, tens of ms paid
once per process, moved that ratio by several percent); and, as the ceiling of
that 2 x 2 efficiency on the machine, (a) twice side by side (each process
on half the lines) against (a) alone; and the MLP gradient's all-reduce
alone, ps.allreduce against gloo (allreduce_bench.py). The servers run bsp: a
step sees every update of the step before, as in (a). Every configuration runs
in its own processes, --rounds times, alternating; the table shows medians.
CPU seconds of (b): the workers' and the servers' (apply threads included)
over the training loops; "_with_startup" rows count the servers' whole lives
instead (start-up, the idle wait while the workers start, evaluation). Of
(c): the whole runs of ps_worker and its server.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import allreduce_bench

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "python"))


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# -- one configuration, run in a child process ----------------------------

def run_torch(args):
    """(a): plain PyTorch in this process."""
    import torch
    import ps.data
    from ctr_models import (LocalEmbedding, batch_keys, evaluate, loss_of,
                            make_model)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    emb = LocalEmbedding(1 << 20, 9)
    model = make_model(args.model, emb)
    sparse = torch.optim.Adagrad(emb.parameters(), lr=0.05,
                                 initial_accumulator_value=0.1)
    dense_params = [p for n, p in model.named_parameters()
                    if not n.startswith("embedding.")]
    dense = torch.optim.Adam(dense_params, lr=0.001) if dense_params else None
    reader = ps.data.Reader(args.train)
    trained, cpu0, t0 = 0, time.process_time(), time.perf_counter()
    for batch in reader.batches(args.batch_size):
        if len(batch) < args.batch_size:
            break
        loss, _ = loss_of(model, batch_keys(batch.ids),
                          torch.from_numpy(batch.labels))
        sparse.zero_grad()
        if dense:
            dense.zero_grad()
        loss.backward()
        sparse.step()
        if dense:
            dense.step()
        trained += len(batch)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    auc, _ = evaluate(model, ps.data.Reader(args.eval).batches(1000))
    return {"samples_per_sec": trained / seconds, "auc": auc,
            "cpu_seconds": cpu, "examples": trained}


def run_ps(args):
    """(b): PyTorch with the rows on servers (examples/python/train_ctr)."""
    import train_ctr
    targs = train_ctr.parse_args([
        "--train", args.train, "--eval", args.eval, "--model", args.model,
        "--workers", str(args.workers), "--servers", str(args.servers),
        "--tables", str(ROOT / "configs" / "fm.tables"),
        "--batch-size", str(args.batch_size), "--threads", str(args.threads),
        "--consistency", "bsp"])
    results, server_lifetime_cpu = train_ctr.run(targs)
    seconds = max(r["seconds"] for r in results)
    examples = sum(r["examples"] for r in results)
    worker_cpu = sum(r["cpu_seconds"] for r in results)
    # The job's CPU over its training loops: the workers' and the servers'
    # (read by worker 0 around the loop). Also the servers' whole lives,
    # start-up, idle wait for the workers and evaluation included.
    return {"samples_per_sec": examples / seconds, "auc": results[0]["auc"],
            "cpu_seconds": worker_cpu + results[0]["server_cpu_seconds"],
            "cpu_seconds_with_startup": worker_cpu + server_lifetime_cpu,
            "examples": examples}


def run_ps_worker(args):
    """(c): ps_worker against 1 ps_server."""
    import ps
    build = Path(os.environ.get("PS_BUILD_DIR", ROOT / "build"))
    model_flags = ROOT / "configs" / f"{args.model}.flags"
    tables = ROOT / "configs" / f"{args.model}.tables"
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "m.json"
        with ps.LocalServers(tables, apply_threads=1,
                             consistency="bsp") as servers:
            cmd = [str(build / "worker" / "train" / "ps_worker"),
                   f"--flagfile={model_flags}", "--epochs=1",
                   f"--batch_size={args.batch_size}",
                   f"--threads={args.threads}", "--l2_v=0", "--l2_w=0",
                   f"--train_data={args.train}", f"--eval_data={args.eval}",
                   "--progress_secs=0", f"--metrics_json={metrics}",
                   f"--servers={','.join(servers.addresses)}"]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"ps_worker failed:\n{done.stderr[-2000:]}")
        m = json.loads(metrics.read_text())
    # ps_worker does not report its CPU over training alone: the whole runs
    # of the worker and the server (both waited for) are counted.
    return {"samples_per_sec": m["samples_per_sec"], "auc": m["eval_auc"],
            "cpu_seconds": child_cpu(),
            "examples": m["train_examples"]}


RUNNERS = {"torch": run_torch, "ps": run_ps, "ps_worker": run_ps_worker}


def child_main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=RUNNERS, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--eval", required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--servers", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    print("RESULT " + json.dumps(RUNNERS[args.kind](args)), flush=True)


# -- the benchmark: every configuration, alternating rounds ---------------

def start_child(kind, model, train, data, extra):
    cmd = [sys.executable, __file__, "--child", "--kind", kind, "--model",
           model, "--train", train, "--eval", data["eval"], *extra]
    threads = extra[extra.index("--threads") + 1]
    # OpenBLAS (torch's BLAS here) would start a thread per core: the same
    # thread count as torch's in every configuration.
    env = dict(os.environ, GLOG_minloglevel="1", OPENBLAS_NUM_THREADS=threads)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def child_result(kind, model, proc):
    out, err = proc.communicate()
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{kind} {model} failed (exit {proc.returncode}):\n"
                       f"{err[-3000:]}")


def run_child(kind, model, data, extra=()):
    return child_result(kind, model,
                        start_child(kind, model, data["train"], data, extra))


def run_side_by_side(kind, model, data, extra=()):
    """Two children at once, each on its half of the lines: one job."""
    procs = [start_child(kind, model, half, data, extra)
             for half in data["halves"]]
    parts = [child_result(kind, model, p) for p in procs]
    examples = sum(x["examples"] for x in parts)
    return {"samples_per_sec": examples / max(x["examples"] /
                                               x["samples_per_sec"]
                                               for x in parts),
            "auc": parts[0]["auc"],
            "cpu_seconds": sum(x["cpu_seconds"] for x in parts),
            "examples": examples}


def generate(build, rows, eval_rows, folder, halves=True):
    folder.mkdir()
    data = {"train": str(folder / "train.tsv"), "eval": str(folder / "eval.tsv")}
    subprocess.run([str(build / "worker" / "datagen" / "ps_datagen"),
                    "--model=fm", f"--rows={rows}", f"--eval_rows={eval_rows}",
                    f"--output={data['train']}", f"--eval_output={data['eval']}"],
                   check=True, capture_output=True)
    if not halves:
        return data
    # The lines that start in each half of the bytes, as train_ctr's
    # ps.data.Reader (split "auto") shares a plain file between 2 workers.
    data["halves"] = [str(folder / f"train.{i}.tsv") for i in range(2)]
    text = Path(data["train"]).read_bytes()
    mid = len(text) // 2
    cut = mid if text[mid - 1:mid] == b"\n" else text.find(b"\n", mid) + 1
    cut = cut or len(text)  # no line starts after the middle
    Path(data["halves"][0]).write_bytes(text[:cut])
    Path(data["halves"][1]).write_bytes(text[cut:])
    return data


def row(name, value, unit, peer, peer_value):
    return {"name": name, "value": round(value, 4), "unit": unit,
            "peer": peer, "peer_value": round(peer_value, 4),
            "ratio": round(value / peer_value, 4) if peer_value else 0.0}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200000)
    p.add_argument("--scale-rows", type=int, default=1000000,
                   help="lines of the file the 2 x 2 and its 1 x 1 peer "
                   "train on: long enough that each process's warm-up (tens "
                   "of ms) does not weigh on the ratio")
    p.add_argument("--eval-rows", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--models", default="fm,deepfm")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads in (a) and (b); ps_worker --threads")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    build = Path(os.environ.get("PS_BUILD_DIR", ROOT / "build"))
    configs = []  # (key, kind, model, extra args, data set)
    threads = ["--threads", str(args.threads)]
    two_by_two = threads + ["--workers", "2", "--servers", "2"]
    for model in args.models.split(","):
        configs += [((model, "torch"), "torch", model, threads, "base"),
                    ((model, "ps"), "ps", model, threads, "base"),
                    ((model, "ps_worker"), "ps_worker", model, threads,
                     "base"),
                    ((model, "ps_1x1_long"), "ps", model, threads, "long"),
                    ((model, "ps_2x2"), "ps", model, two_by_two, "long"),
                    ((model, "torch_2proc"), "torch", model, threads,
                     "base")]
    runs = {key: [] for key, *_ in configs}
    with tempfile.TemporaryDirectory(prefix="ps-bench-python-") as tmp:
        sets = {"base": generate(build, args.rows, args.eval_rows,
                                 Path(tmp) / "base"),
                "long": generate(build, args.scale_rows, args.eval_rows,
                                 Path(tmp) / "long", halves=False)}
        for r in range(args.rounds):
            for key, kind, model, extra, data_set in configs:
                run = run_side_by_side if key[1] == "torch_2proc" else run_child
                result = run(kind, model, sets[data_set], extra)
                runs[key].append(result)
                print(f"round {r + 1} {model:7s} {key[1]:10s} "
                      f"{result['samples_per_sec']:9.0f} samples/s  "
                      f"AUC {result['auc']:.4f}  "
                      f"{result['examples'] / result['cpu_seconds']:8.0f} "
                      "samples/CPU-s", flush=True)

    def med(key, field):
        if field in ("cpu_seconds", "cpu_seconds_with_startup"):
            return statistics.median(x["examples"] / x[field]
                                     for x in runs[key])
        return statistics.median(x[field] for x in runs[key])

    results = []
    for model in args.models.split(","):
        torch_sps = med((model, "torch"), "samples_per_sec")
        torch_auc = med((model, "torch"), "auc")
        for kind, label in (("ps", "ps"), ("ps_worker", "ps_worker")):
            results.append(row(f"{model}_{label}_samples_per_sec",
                               med((model, kind), "samples_per_sec"),
                               "samples/s", "plain PyTorch", torch_sps))
            results.append(row(f"{model}_{label}_eval_auc",
                               med((model, kind), "auc"), "AUC",
                               "plain PyTorch", torch_auc))
        # 2 x 2 against 1 x 1, both on the --scale-rows file.
        peer = f"ps 1 worker x 1 server ({args.scale_rows} rows)"
        results.append(row(f"{model}_ps_2x2_samples_per_sec",
                           med((model, "ps_2x2"), "samples_per_sec"),
                           "samples/s", peer,
                           med((model, "ps_1x1_long"), "samples_per_sec")))
        for field, suffix in (("cpu_seconds", ""),
                              ("cpu_seconds_with_startup", "_with_startup")):
            results.append(row(
                f"{model}_ps_2x2_samples_per_cpu_sec{suffix}",
                med((model, "ps_2x2"), field), "samples/CPU-s", peer,
                med((model, "ps_1x1_long"), field)))
        # What the same machine gives plain PyTorch for the same step from
        # one process to two: the ceiling of the 2 x 2 ratio above.
        results.append(row(f"{model}_torch_2proc_samples_per_cpu_sec",
                           med((model, "torch_2proc"), "cpu_seconds"),
                           "samples/CPU-s", "plain PyTorch, 1 process",
                           med((model, "torch"), "cpu_seconds")))
    # The MLP's all-reduce on its own: ps.allreduce against gloo, in the
    # same run (ratio = gloo / ours: above 1, ours costs less).
    # The ranks inherit this program's environment: no context INFO lines.
    os.environ.setdefault("GLOG_minloglevel", "1")
    reduce = allreduce_bench.measure(rounds=args.rounds)
    for index, what in ((0, "cpu"), (1, "wall")):
        ours, peer = reduce["ps"][index], reduce["gloo"][index]
        results.append({"name": f"allreduce_88KB_{what}_us_per_call",
                        "value": round(ours, 2), "unit": "us",
                        "peer": "torch.distributed all_reduce (gloo)",
                        "peer_value": round(peer, 2),
                        "ratio": round(peer / ours, 4) if ours else 0.0})
    print(f"\nmedians of {args.rounds} rounds, {args.rows} rows (2 x 2 "
          f"and its 1 x 1 peer: {args.scale_rows}), batch 1000, "
          f"{args.threads} torch thread(s):")
    for r in results:
        print(f"  {r['name']:36s} {r['value']:12.4f} {r['unit']:14s} vs "
              f"{r['peer']} {r['peer_value']:.4f}  ratio {r['ratio']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results}, indent=1))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
    else:
        sys.exit(main(sys.argv[1:]))
