"""examples/python/train_ctr.py end to end: DeepFM, 2 workers (torch
multiprocessing + gloo) x 2 ps_server processes on a small ps_datagen file;
a run that checkpoints every 2 steps and stops after step 4, then --resume,
which continues after step 4 and ends with an eval AUC."""

import json
import sys

from conftest import REPO, python_env, run_group

SCRIPT = REPO / "examples" / "python" / "train_ctr.py"
BATCH = 500
TRAIN_ROWS = 6000  # 6 steps per worker: 6000 / (500 x 2 workers)


def train(tmp_path, data, *extra, checkpoint=True):
    train_file, eval_file = data
    cmd = [sys.executable, str(SCRIPT), "--train", str(train_file),
           "--eval", str(eval_file), "--model", "deepfm", "--workers", "2",
           "--servers", "2", "--batch-size", str(BATCH), *extra]
    if checkpoint:
        cmd += ["--checkpoint-dir", str(tmp_path / "ckpt"),
                "--checkpoint-every", "2"]
    run = run_group(cmd, timeout=120, env=python_env(), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    results = {}
    # One JSON object per worker. With PYTHONUNBUFFERED the two processes'
    # print() calls write text and newline separately, so two objects can
    # share a line: find them anywhere.
    decoder = json.JSONDecoder()
    start = run.stdout.find('{"worker"')
    while start >= 0:
        r, end = decoder.raw_decode(run.stdout, start)
        results[r["worker"]] = r
        start = run.stdout.find('{"worker"', end)
    assert sorted(results) == [0, 1], run.stdout
    return run.stdout, results


def test_checkpoint_stop_and_resume(tmp_path, datagen):
    data = datagen(TRAIN_ROWS, 2000, model="fm")

    out, first = train(tmp_path, data, "--stop-after-steps", "4")
    assert "resumed" not in out
    for r in first.values():
        assert r["steps"] == 4 and r["stopped_early"] is True
        assert r["examples"] == 4 * BATCH
        assert "auc" not in r  # a stopped run does not evaluate
    # Worker 0 saved the MLP at each checkpointed step.
    assert (tmp_path / "ckpt" / "dense-2.pt").exists()
    assert (tmp_path / "ckpt" / "dense-4.pt").exists()

    out, second = train(tmp_path, data, "--resume")
    for w in (0, 1):
        # Each worker reads its own share of the file (its half in bytes).
        assert (f"worker {w}: resumed after step 4 (epoch 0, "
                f"{4 * BATCH} lines consumed)") in out, out
    # The halves hold about 3000 lines each: 2 more steps or 3 (a short
    # last batch, or an empty one on the worker that has no more); the
    # resumed run trains every line after the checkpoint, once.
    assert second[0]["steps"] == second[1]["steps"] in (6, 7), second
    assert sum(r["examples"] for r in second.values()) == (
        TRAIN_ROWS - 2 * 4 * BATCH)
    for r in second.values():
        assert r["stopped_early"] is False
    assert 0.0 <= second[0]["auc"] <= 1.0
    assert second[0]["logloss"] > 0
    assert "auc" not in second[1]  # worker 0 evaluates


def test_workers_take_as_many_steps_on_uneven_shares(tmp_path, datagen):
    # Split by lines, worker 0 has 2 full batches and one line, worker 1 2
    # full batches: both take 3 steps (the step agreement, through
    # ps.allreduce or gloo), worker 1's last one empty; none waits for a
    # step the other never takes, and every line is trained.
    rows = 2 * 2 * BATCH + 1
    data = datagen(rows, 200, model="fm")
    for allreduce in ("ps", "gloo"):
        _, results = train(tmp_path, data, "--allreduce", allreduce,
                           "--servers", "1", "--split", "lines",
                           checkpoint=False)
        got = [(results[w]["steps"], results[w]["examples"]) for w in (0, 1)]
        assert got == [(3, 2 * BATCH + 1), (3, 2 * BATCH)], results
