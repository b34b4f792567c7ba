"""ps.data: the C++ readers on hand-written Criteo, libsvm and libffm lines
(shapes, labels, hashed ids, missing columns, skip, batches, gzip) and the
AUC / logloss metrics on known values."""

import gzip
import math

import numpy as np
import pytest
import torch

import ps


def criteo_line(label, ints, cats):
    assert len(ints) == 13 and len(cats) == 26
    return "\t".join([str(label)] + [str(i) for i in ints] + cats)


INTS = [1, 2, 0, 5, 100, 3, "", 7, 8, 9, 10, 11, 12]   # I7 missing
CATS = [f"{i:08x}" for i in range(0xA0, 0xA0 + 26)]
LINES = [
    criteo_line(1, INTS, CATS),
    criteo_line(0, INTS[:6] + [4] + INTS[7:], CATS[:2] + [""] + CATS[3:]),
    criteo_line(0, [""] * 13, [""] * 26),                   # all missing
    criteo_line(1, INTS, [CATS[1]] + CATS[1:]),             # C1 = C2's token
    criteo_line(0, [-3] + INTS[1:], CATS),
]


@pytest.fixture
def criteo(tmp_path):
    path = tmp_path / "day.tsv"
    path.write_text("\n".join(LINES) + "\n")
    return path


def test_criteo_batch(criteo):
    reader = ps.data.Reader(criteo)
    batch = reader.read(100)
    assert len(batch) == 5
    assert batch.labels.dtype == np.float32
    assert batch.labels.tolist() == [1, 0, 0, 1, 0]
    ids = batch.ids
    assert ids.shape == (5, 39) and ids.dtype == np.uint64
    assert batch.offsets.tolist() == [39 * i for i in range(6)]
    assert batch.fields.tolist() == list(range(39)) * 5
    assert (batch.values == 1.0).all()
    # Ids of a field depend only on (field, token).
    assert (ids[0] == ids[3])[[f for f in range(39) if f != 13]].all()
    assert ids[3, 13] != ids[0, 13]
    assert ids[3, 13] != ids[3, 14]  # same token, other field: other id
    # A missing column is its field's "missing" feature, the same in every
    # line; the all-missing line has 39 distinct ids.
    assert ids[0, 6] == ids[2, 6] and ids[1, 6] != ids[0, 6]
    assert ids[1, 13 + 2] == ids[2, 13 + 2] != ids[0, 13 + 2]
    assert len(set(ids[2].tolist())) == 39
    # Integers: their own buckets for small values (1, 2 and 5 differ;
    # -3 has its own).
    assert ids[0, 0] != ids[0, 1] and ids[4, 0] != ids[0, 0]
    assert (ids[4, 1:] == ids[0, 1:]).all()
    # Nothing malformed; the end of the file gives an empty batch.
    assert reader.stats == {"lines": 5, "examples": 5, "malformed": 0,
                            "first_malformed": []}
    assert len(reader.read(10)) == 0


def test_skip_and_batches(criteo, tmp_path):
    whole = ps.data.Reader(criteo).read(5)
    reader = ps.data.Reader(criteo)
    reader.skip(2)
    rest = reader.read(10)
    assert len(rest) == 3
    np.testing.assert_array_equal(rest.ids, whole.ids[2:])
    np.testing.assert_array_equal(rest.labels, whole.labels[2:])

    sizes = [len(b) for b in ps.data.Reader(criteo).batches(2)]
    assert sizes == [2, 2, 1]

    gz = tmp_path / "day.tsv.gz"
    with gzip.open(gz, "wt") as f:
        f.write("\n".join(LINES) + "\n")
    np.testing.assert_array_equal(ps.data.Reader(gz).read(10).ids, whole.ids)


def test_split_between_workers(tmp_path):
    # Lines "label idx:i" of varying length: libsvm values give i back.
    lines = [f"1 1:{i}" + " 2:1" * (i % 5) for i in range(50)]
    path = tmp_path / "lines.libsvm"
    path.write_text("\n".join(lines) + "\n")

    def indices(reader):
        batch = reader.read(100)
        return batch.values[batch.offsets[:-1]].astype(int).tolist()

    for split, expect_split in (("lines", "lines"), ("bytes", "bytes"),
                                ("auto", "bytes")):
        parts = []
        for w in range(3):
            r = ps.data.Reader(path, format="libsvm", worker_id=w,
                               num_workers=3, split=split)
            assert r.split == expect_split
            parts.append(indices(r))
        if expect_split == "lines":
            assert parts == [list(range(w, 50, 3)) for w in range(3)]
        else:  # contiguous parts, in order, every line once
            assert sum(parts, []) == list(range(50))
            assert all(10 < len(p) < 24 for p in parts), parts

    gz = tmp_path / "lines.libsvm.gz"
    with gzip.open(gz, "wt") as f:
        f.write("\n".join(lines) + "\n")
    auto = ps.data.Reader(gz, format="libsvm", worker_id=1, num_workers=2,
                          split="auto")
    assert auto.split == "lines"
    assert indices(auto) == list(range(1, 50, 2))
    with pytest.raises(ps.errors.InvalidArgumentError, match="gzip"):
        ps.data.Reader(gz, format="libsvm", num_workers=2, split="bytes")
    with pytest.raises(ps.errors.InvalidArgumentError, match="halves"):
        ps.data.Reader(path, format="libsvm", split="halves")


def test_libsvm_compressed_rows(tmp_path):
    path = tmp_path / "a.libsvm"
    path.write_text("1 3:1.5 7:2\n"
                    "-1 3:0.5\n"
                    "+1 10:1 3:1 7:-1 12:0.25\n"
                    "\n"                       # empty lines are skipped
                    "0 7:4\n")
    batch = ps.data.Reader(path, format="libsvm").read(10)
    assert len(batch) == 4
    assert batch.labels.tolist() == [1, 0, 1, 0]
    assert batch.offsets.tolist() == [0, 2, 3, 7, 8]
    assert batch.values.tolist() == [1.5, 2, 0.5, 1, 1, -1, 0.25, 4]
    assert batch.fields.tolist() == [0] * 8
    assert batch.ids is None  # examples of different lengths
    f = batch.flat_ids
    assert f.dtype == np.uint64 and len(f) == 8
    assert f[0] == f[2] == f[4]           # index 3
    assert f[1] == f[5] == f[7]           # index 7
    assert len({f[0], f[1], f[3], f[6]}) == 4

    ffm = tmp_path / "a.ffm"
    ffm.write_text("1 0:3:1 2:3:1 5:9:0.5\n0 2:3:2 0:3:1 5:9:1\n")
    b = ps.data.Reader(ffm, format="libffm").read(10)
    assert b.fields.tolist() == [0, 2, 5, 2, 0, 5]
    assert b.ids.shape == (2, 3)  # equal lengths: the (n, width) form
    assert b.ids[0, 0] == b.ids[1, 1] and b.ids[0, 1] == b.ids[1, 0]
    assert b.ids[0, 0] != b.ids[0, 1]  # index 3 in fields 0 and 2
    # libsvm's field is 0: its index 3 is libffm's 0:3.
    assert b.ids[0, 0] == f[0]


def test_csv_with_a_header(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("id,click,hour,site\n"
                    "a1,1,14102100,s1\n"
                    "a2,0,14102101,\"s,2\"\n"
                    "a3,maybe,14102101,s1\n"
                    "a4,0,14102102,s1\n")
    r = ps.data.Reader(path, format="csv",
                       csv_columns="label=click ignore=id numeric=hour")
    assert r.fields == ["hour", "site"]
    batch = r.read(10)
    assert batch.labels.tolist() == [1, 0, 0]
    assert batch.fields.tolist() == [0, 1] * 3
    assert batch.ids.shape == (3, 2)
    assert batch.ids[0, 1] == batch.ids[2, 1]   # site s1
    assert batch.ids[0, 1] != batch.ids[1, 1]   # "s,2"
    assert r.stats["malformed"] == 1
    assert "line 4: label click 'maybe' is not 0/1" in \
        r.stats["first_malformed"][0]
    assert ps.data.Reader(path).fields is None  # criteo: no header

    with pytest.raises(ps.errors.InvalidArgumentError,
                       match="label column 'clicked' is not in the header"):
        ps.data.Reader(path, format="csv", csv_columns="label=clicked")
    with pytest.raises(ps.errors.InvalidArgumentError, match="column spec"):
        ps.data.Reader(path, format="csv")
    with pytest.raises(ps.errors.InvalidArgumentError,
                       match="line 4: label click 'maybe'"):
        ps.data.Reader(path, format="csv", strict=True,
                       csv_columns="label=click ignore=id").read(10)


def test_auc_known_values():
    y = np.array([0, 0, 1, 1], np.float32)
    assert ps.data.auc(np.array([0.1, 0.2, 0.8, 0.9], np.float32), y) == 1.0
    assert ps.data.auc(np.array([0.9, 0.8, 0.2, 0.1], np.float32), y) == 0.0
    # The textbook example: 3 of the 4 (click, non-click) pairs ordered.
    assert ps.data.auc(np.array([0.1, 0.4, 0.35, 0.8], np.float32),
                       y) == pytest.approx(0.75)
    assert ps.data.auc(np.full(4, 0.3, np.float32), y) == 0.5   # all ties
    assert ps.data.auc(np.array([0.1, 0.9], np.float32),
                       np.ones(2, np.float32)) == 0.5           # one class
    assert math.isnan(ps.data.auc(np.array([0.1, np.nan, 0.3, 0.2],
                                           np.float32), y))
    # Tensors are accepted too.
    assert ps.data.auc(torch.tensor([0.2, 0.1, 0.7, 0.6]),
                       torch.from_numpy(y)) == 1.0


def test_logloss_known_values():
    y = np.array([1, 0, 1, 0], np.float32)
    assert ps.data.logloss(np.full(4, 0.5, np.float32), y) == pytest.approx(
        math.log(2), rel=1e-6)
    p = np.array([0.9, 0.1, 0.8, 0.3], np.float32)
    want = -(math.log(0.9) + math.log(0.9) + math.log(0.8) +
             math.log(0.7)) / 4
    assert ps.data.logloss(p, y) == pytest.approx(want, rel=1e-5)
    # Clipped to [1e-7, 1 - 1e-7]: a certain wrong answer is finite.
    worst = ps.data.logloss(np.array([1.0], np.float32),
                            np.array([0.0], np.float32))
    assert worst == pytest.approx(-math.log(1e-7), rel=1e-3)


def test_normalized_entropy_known_values():
    # Predicting the base rate 1/4 scores NE 1; 1/2 everywhere costs ln 2
    # against H(1/4) = 0.5623...
    y = np.array([1, 0, 0, 0], np.float32)
    assert ps.data.normalized_entropy(np.full(4, 0.25, np.float32),
                                      y) == pytest.approx(1, rel=1e-6)
    assert ps.data.normalized_entropy(np.full(4, 0.5, np.float32), y) == \
        pytest.approx(math.log(2) / 0.5623351446188083, rel=1e-6)
    # One class only: undefined (NaN), never a division by zero.
    assert math.isnan(ps.data.normalized_entropy(
        np.array([0.9, 0.8], np.float32), np.ones(2, np.float32)))
