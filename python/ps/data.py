"""Click logs and metrics, from the C++ library ps_worker uses.

    reader = ps.data.Reader("train.txt")              # Criteo TSV
    for batch in reader.batches(1000):
        batch.ids        # (examples, 39) uint64 for Criteo: one id a field
        batch.labels     # (examples,) float32, 0 or 1

Feature ids are the same hashed ids ps_worker trains on (worker/data:
feature_hash.h), so a PyTorch model and ps_worker read one file alike.
libsvm / libffm lines have a varying number of features: use the
compressed-row form (``offsets``, ``flat_ids``, ``values``, ``fields``);
``ids`` is None unless every example of the batch has as many.
Malformed lines are skipped and counted (``reader.stats``), or with
``strict=True`` raise InvalidArgumentError naming the line.
"""

from dataclasses import dataclass

import numpy as np

from ps import _arrays, _native


@dataclass
class Batch:
    """Examples in compressed-row form: example i has label labels[i] and
    features flat_ids[offsets[i]:offsets[i+1]] (with values and fields)."""

    labels: np.ndarray     # float32 (n,)
    offsets: np.ndarray    # uint32 (n + 1,)
    flat_ids: np.ndarray   # uint64
    values: np.ndarray     # float32
    fields: np.ndarray     # uint32

    def __len__(self):
        return len(self.labels)

    @property
    def ids(self):
        """(n, features) when every example has the same number of features
        (Criteo: 39), else None."""
        n = len(self.labels)
        if n == 0:
            return self.flat_ids.reshape(0, 0)
        width = int(self.offsets[1] - self.offsets[0])
        if not (np.diff(self.offsets) == width).all():
            return None
        return self.flat_ids.reshape(n, width)


class Reader:
    """Streams examples from a file ("criteo", "libsvm", "libffm" or "csv";
    plain or gzip). NotFoundError / FileError when it cannot be opened.

    A "csv" file starts with a header line; ``csv_columns`` names its
    columns by role, as ps_worker's --csv_columns: "label=click ignore=id"
    (label=NAME required; numeric=A,B log-bucketed numbers; ignore=A,B read
    past; categorical=A,B, default every column not named; sep=C, default
    comma). The feature columns are the fields (``fields``), in header
    order. A spec that does not fit the header raises
    InvalidArgumentError.

    With ``num_workers`` > 1 it yields this worker's share only, as
    ``split`` says:

    - "lines": line i (counting every line of the file) when i % num_workers
      == worker_id, as ps_worker splits a file. Every worker reads the whole
      file and parses its own lines only.
    - "bytes": the lines that start in bytes [w B / n, (w + 1) B / n) of a
      plain file of B bytes (w = worker_id, n = num_workers). Each worker
      reads its own part only; the parts hold about as many lines, not
      exactly as many. A gzip file raises InvalidArgumentError.
    - "auto": "bytes" for a plain file, "lines" for gzip (``split`` then
      says which).
    """

    def __init__(self, path, format="criteo", strict=False, worker_id=0,
                 num_workers=1, split="lines", csv_columns=""):
        self._r = _native.data.ExampleSource(str(path), format, strict,
                                             worker_id, num_workers, split,
                                             csv_columns)

    def read(self, max_examples):
        """Up to ``max_examples`` examples; an empty Batch at the end."""
        return Batch(*self._r.read(max_examples))

    def batches(self, batch_size):
        """Batches of ``batch_size`` until the end of the file (the last one
        may be smaller)."""
        while True:
            batch = self.read(batch_size)
            if len(batch) == 0:
                return
            yield batch

    def skip(self, lines):
        """Reads past the next ``lines`` lines of this worker without parsing
        them: resuming at a checkpoint's ``consumed``. OutOfRangeError if the
        file has fewer."""
        self._r.skip(lines)

    def rewind(self):
        """Starts over from the first line (the next epoch)."""
        self._r.rewind()

    @property
    def split(self):
        """How the file is shared between workers: "lines" or "bytes"."""
        return self._r.split

    @property
    def fields(self):
        """A csv file's feature columns, in field order; None for other
        formats."""
        return self._r.fields

    @property
    def consumed(self):
        """Lines of this worker read since the start (malformed ones
        included): the data position a checkpoint records."""
        return self._r.consumed

    @property
    def stats(self):
        """lines, examples, malformed, first_malformed (the first few
        reasons, "<path> line 17: ...")."""
        return self._r.stats


def auc(scores, labels):
    """The probability that a random click scores above a random non-click
    (ties half); 0.5 with one class; NaN if any score is not finite."""
    return _native.data.auc(_arrays.as_array(scores, "scores", np.float32),
                            _arrays.as_array(labels, "labels", np.float32))


def logloss(probabilities, labels):
    """Mean logloss (probabilities clipped to [1e-7, 1 - 1e-7])."""
    return _native.data.logloss(
        _arrays.as_array(probabilities, "probabilities", np.float32),
        _arrays.as_array(labels, "labels", np.float32))


def normalized_entropy(probabilities, labels):
    """Logloss over the base-rate entropy H(p) of the labels' positive rate
    p (the logloss of always predicting p): below 1 the model beats that
    constant. NaN when undefined (the labels hold one class only)."""
    return _native.data.normalized_entropy(
        _arrays.as_array(probabilities, "probabilities", np.float32),
        _arrays.as_array(labels, "labels", np.float32))
