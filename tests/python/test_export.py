"""ps_ckpt export round trip: a real 2-server cluster trains two steps
(a full checkpoint, then an incremental one), ps_ckpt export writes the
latest checkpoint's tables, and NumPy alone reads them back: a HASHED id
finds its row through the hash tables.json spells out, an EXACT key through
keys.npy, and every row equals what the servers answer to a pull. PyTorch
takes the rows as they are (torch.from_numpy). Bad input: a folder that is
not empty and an unknown table exit 2 and write nothing."""

import json
import subprocess
import time

import numpy as np
import torch

from conftest import BUILD, hashed_rows, table_text

CKPT_BIN = BUILD / "checkpoint" / "ps_ckpt"
DIM = 4
TABLES = (table_text(1, "emb", dim=DIM, capacity=5003) +
          table_text(2, "ids", kind="EXACT", dim=DIM, capacity=4096,
                     extra="admit_after_pushes: 1 "))


def wait_committed(ckpt, step, timeout=30):
    """Until checkpoint `step` has its MANIFEST (the servers write in the
    background after the cut)."""
    manifest = ckpt / f"ckpt-{step:012d}" / "MANIFEST"
    deadline = time.monotonic() + timeout
    while not manifest.exists():
        assert time.monotonic() < deadline, f"no {manifest} after {timeout} s"
        time.sleep(0.02)


def export(ckpt, out, *extra):
    return subprocess.run([str(CKPT_BIN), "export", f"--dir={ckpt}",
                           f"--out={out}", *extra],
                          capture_output=True, text=True, timeout=60)


def test_export_round_trip(servers, tmp_path):
    ckpt = tmp_path / "ckpt"
    cluster = servers(TABLES, num_shards=2, num_workers=1, consistency="bsp",
                      checkpoint_dir=str(ckpt), checkpoint_every_steps=1)
    client = cluster.client()
    checkpoints = client.checkpoints()
    rng = np.random.default_rng(7)
    # Ids over the whole int64 range, negative ones too.
    hashed_ids = rng.integers(-2**63, 2**63 - 1, size=3000, dtype=np.int64)
    exact_keys = rng.integers(-2**63, 2**63 - 1, size=2000, dtype=np.int64)
    for step in (1, 2):
        # Step 2 changes a third of the rows and adds keys: an increment.
        h = hashed_ids if step == 1 else hashed_ids[::3].copy()
        e = exact_keys[:1500] if step == 1 else exact_keys[::3].copy()
        client.push("emb", h, rng.integers(-8, 8, (len(h), DIM)).astype(
            np.float32))
        client.push("ids", e, rng.integers(-8, 8, (len(e), DIM)).astype(
            np.float32))
        client.clock()
        checkpoints.checkpoint(step)
        wait_committed(ckpt, step)
    listing = subprocess.run([str(CKPT_BIN), "list", f"--dir={ckpt}"],
                             capture_output=True, text=True, check=True)
    assert "incremental" in listing.stdout, listing.stdout
    want_hashed = client.pull("emb", hashed_ids)
    want_exact = client.pull("ids", exact_keys)

    out = tmp_path / "export"
    r = export(ckpt, out)
    assert r.returncode == 0, r.stderr
    index = json.loads((out / "tables.json").read_text())
    assert index["step"] == 2
    tables = {t["name"]: t for t in index["tables"]}

    emb = tables["emb"]
    assert emb["kind"] == "HASHED" and emb["spec"]["capacity"] == "5003"
    rows = np.load(out / emb["rows_file"])
    assert rows.shape == (5003, DIM) and rows.dtype == np.float32
    np.testing.assert_array_equal(
        rows[hashed_rows(emb["hash"], hashed_ids)], want_hashed)

    ids = tables["ids"]
    keys = np.load(out / ids["keys_file"])
    rows = np.load(out / ids["rows_file"])
    assert keys.dtype == np.uint64 and len(keys) == len(rows) == ids["rows"]
    pushed = np.union1d(exact_keys[:1500], exact_keys[::3])
    assert sorted(keys.tolist()) == sorted(pushed.view(np.uint64).tolist())
    where = {k: i for i, k in enumerate(keys.tolist())}
    for key, want in zip(exact_keys.view(np.uint64).tolist(), want_exact):
        if key in where:
            np.testing.assert_array_equal(rows[where[key]], want)
        else:  # never pushed: no row, and a pull reads zeros
            np.testing.assert_array_equal(want, np.zeros(DIM, np.float32))

    tensor = torch.from_numpy(rows)
    assert tensor.shape == (len(keys), DIM) and tensor.dtype == torch.float32


def test_export_refuses_bad_input(servers, tmp_path):
    ckpt = tmp_path / "ckpt"
    cluster = servers(TABLES, num_shards=1, num_workers=1,
                      checkpoint_dir=str(ckpt), checkpoint_every_steps=1)
    client = cluster.client()
    client.push("emb", np.arange(10, dtype=np.int64),
                np.ones((10, DIM), np.float32))
    client.clock()
    client.checkpoints().checkpoint(1)
    wait_committed(ckpt, 1)

    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("keep me")
    r = export(ckpt, busy)
    assert r.returncode == 2 and "not empty" in r.stderr, r.stderr
    assert [p.name for p in busy.iterdir()] == ["mine.txt"]

    r = export(ckpt, tmp_path / "fresh", "--tables=emb,nope")
    assert r.returncode == 2, r.stderr
    assert "no table 'nope' (it has: emb, ids)" in r.stderr, r.stderr
    assert not (tmp_path / "fresh").exists()
