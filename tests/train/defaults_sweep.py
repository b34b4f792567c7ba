#!/usr/bin/python3
"""Do the shipped configs hold on any click log? (issue 37's acceptance)

For each generated regime (a one-hot log of a few thousand features, a
Criteo-like log at 10k and 1M rows, the demo's small vocabulary) and each
model (configs/{lr,fm,deepfm}.{flags,tables}), trains with ps_worker --local
as a new user would: the shipped files and no other flag. Then once more for
each fixed admission threshold of the sweep (0, 5, 20, 200, 1000), the
config otherwise unchanged. It checks that

  - the shipped config is within 0.01 eval AUC of the sweep's best,
  - its eval NE is below 1 (better than predicting the base rate),
  - FM's AUC is at least LR's - 0.005,

prints the table, writes it with --json, and exits 1 if any check fails.

  defaults_sweep.py --build-dir=build [--regimes=onehot-lr,criteo-10k]
                    [--work=DIR] [--jobs=N] [--json=FILE]
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_DIR = Path(__file__).resolve().parents[2]
MODELS = ("lr", "fm", "deepfm")
SWEEP = (0, 5, 20, 200, 1000)
AUC_SLACK = 0.01  # shipped vs the sweep's best
FM_VS_LR_SLACK = 0.005


@dataclass
class Regime:
    name: str
    datagen: list  # ps_datagen flags, less --output / --eval_output
    worker: list = field(default_factory=list)  # ps_worker flags (the format)


REGIMES = [
    # The shape of the public one-hot app-usage log (10 fields, about 5,400
    # values), labelled by LR and by FM.
    Regime("onehot-lr", ["--layout=onehot", "--model=lr", "--rows=50000",
                         "--eval_rows=25000"], ["--data_format=libsvm"]),
    Regime("onehot-fm", ["--layout=onehot", "--model=fm", "--rows=50000",
                         "--eval_rows=25000"], ["--data_format=libsvm"]),
    # Criteo's field sizes and long tails: nearly every value is rare.
    Regime("criteo-10k", ["--vocab=criteo", "--model=fm", "--rows=10000",
                          "--eval_rows=5000"]),
    Regime("criteo-1m", ["--vocab=criteo", "--model=fm", "--rows=1000000",
                         "--eval_rows=200000"]),
    # The demo's data (scripts/demo.sh: --quick, and the default 1M rows).
    Regime("demo-200k", ["--model=fm", "--rows=200000", "--eval_rows=40000"]),
    Regime("demo-1m", ["--model=fm", "--rows=1000000", "--eval_rows=200000"]),
]


def sweep_tables(text, threshold):
    """The tables text with the sparse (first hashed) table's admission set
    to a fixed threshold (0: none), everything else as shipped."""
    text = re.sub(r"\n[ \t]*admit_after_examples:[ \t]*\d+", "", text)
    text = re.sub(r"\n[ \t]*adaptive_admission[ \t]*\{[^}]*\}", "", text)
    if threshold == 0:
        return text
    at = text.index("kind: HASHED")  # ValueError: no hashed table
    return (text[:at] + f"admit_after_examples: {threshold}\n  " +
            text[at:])


def run_worker(build, regime, data, model, tables):
    cmd = [str(build / "worker/train/ps_worker"), "--local",
           f"--flagfile={SOURCE_DIR}/configs/{model}.flags",
           f"--tables={tables}", f"--train_data={data}/train",
           f"--eval_data={data}/eval", "--progress_secs=0"] + regime.worker
    out = subprocess.run(cmd, capture_output=True, text=True)
    found = re.findall(r"^eval AUC (\S+) logloss \S+ NE (\S+)", out.stdout,
                       re.M)
    if out.returncode != 0 or not found:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n"
                           f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return float(found[-1][0]), float(found[-1][1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", required=True, type=Path)
    parser.add_argument("--regimes", default=",".join(r.name for r in REGIMES))
    parser.add_argument("--work", type=Path, help="data folder (kept)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    build = args.build_dir.resolve()
    by_name = {r.name: r for r in REGIMES}
    unknown = [n for n in args.regimes.split(",") if n not in by_name]
    if unknown:
        parser.error(f"unknown regime(s) {unknown}; known: {list(by_name)}")
    regimes = [by_name[n] for n in args.regimes.split(",")]

    with tempfile.TemporaryDirectory(prefix="ps-defaults-") as tmp:
        work = args.work.resolve() if args.work else Path(tmp)
        jobs = []  # (regime, data folder, model, variant, tables file)
        for regime in regimes:
            data = work / regime.name
            data.mkdir(parents=True, exist_ok=True)
            if not (data / "eval").exists():
                subprocess.run(
                    [str(build / "worker/datagen/ps_datagen"), "--seed=1",
                     f"--output={data}/train", f"--eval_output={data}/eval"] +
                    regime.datagen, check=True, stdout=subprocess.DEVNULL)
            for model in MODELS:
                shipped = SOURCE_DIR / f"configs/{model}.tables"
                jobs.append((regime, data, model, "shipped", shipped))
                for t in SWEEP:
                    path = data / f"{model}.admit{t}.tables"
                    path.write_text(sweep_tables(shipped.read_text(), t))
                    jobs.append((regime, data, model, t, path))
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            scores = list(pool.map(
                lambda j: run_worker(build, j[0], j[1], j[2], j[4]), jobs))

    results = {}  # (regime, model) -> {variant: (auc, ne)}
    for (regime, _, model, variant, _), score in zip(jobs, scores):
        results.setdefault((regime.name, model), {})[variant] = score

    failures, rows = [], []
    print("| regime | model | shipped AUC | NE | sweep best (threshold) | "
          + " | ".join(f"{t}" for t in SWEEP) + " |")
    print("|---|---|---|---|---|" + "---|" * len(SWEEP))
    for (name, model), r in results.items():
        auc, ne = r["shipped"]
        best_t = max(SWEEP, key=lambda t: r[t][0])
        best = r[best_t][0]
        print(f"| {name} | {model} | {auc:.4f} | {ne:.3f} | {best:.4f} "
              f"({best_t}) | " + " | ".join(f"{r[t][0]:.4f}" for t in SWEEP)
              + " |")
        rows.append({"regime": name, "model": model, "auc": auc, "ne": ne,
                     "sweep": {str(t): r[t][0] for t in SWEEP}})
        if auc < best - AUC_SLACK:
            failures.append(f"{name} {model}: shipped AUC {auc:.4f} is more "
                            f"than {AUC_SLACK} below admission {best_t}'s "
                            f"{best:.4f}")
        if not ne < 1:
            failures.append(f"{name} {model}: shipped NE {ne:.4f} >= 1")
    for name in (r.name for r in regimes):
        fm, lr = results[(name, "fm")]["shipped"][0], results[
            (name, "lr")]["shipped"][0]
        if fm < lr - FM_VS_LR_SLACK:
            failures.append(f"{name}: FM AUC {fm:.4f} < LR's {lr:.4f} - "
                            f"{FM_VS_LR_SLACK}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "failures": failures},
                                        indent=1))
    for f in failures:
        print("FAILED:", f)
    print("all checks hold" if not failures else
          f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
