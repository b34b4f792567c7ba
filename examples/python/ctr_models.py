"""FM and DeepFM in PyTorch, the same models ps_worker trains
(worker/train/fm_model.h, deepfm_model.h), over any embedding of rows.

A row is [w, v_1 .. v_k] (dim 1 + k). Each example has one feature per
field (Criteo: 39) plus the bias row, whose key is ps_worker's kBiasKey:
    logit = sum_i w_i + 1/2 sum_f [(sum_i v_if)^2 - sum_i v_if^2]   (FM)
          + MLP(v_0 .. v_{F-1})                                      (DeepFM)
The rows come from ``embedding(ids)`` -> (batch, fields + 1, 1 + k): a
ps.torch.Embedding (rows on the servers) or LocalEmbedding (an
nn.EmbeddingBag(sparse=True) in this process).
"""

import numpy as np
import torch
from torch import nn

CRITEO_FIELDS = 39  # 13 integer and 26 categorical columns

# worker/train/model.h: kBiasKey, as the int64 with the same bits.
BIAS_KEY = np.uint64(0xB1A5B1A5B1A5B1A5).astype(np.int64).item()


def batch_keys(ids):
    """The (batch, fields) uint64 ids of a ps.data Batch as int64 keys with
    the bias key appended to every example: (batch, fields + 1)."""
    keys = torch.from_numpy(np.ascontiguousarray(ids).view(np.int64))
    bias = torch.full((keys.shape[0], 1), BIAS_KEY, dtype=torch.int64)
    return torch.cat([keys, bias], dim=1)


class LocalEmbedding(nn.Module):
    """Rows in this process: nn.EmbeddingBag(sparse=True), one bag per
    feature, the key hashed to a row by its value modulo ``capacity`` (a
    HASHED server table hashes too: collisions are alike, not identical).
    Rows start as configs/fm.tables' do: normal, stddev 0.01."""

    def __init__(self, capacity, dim, init_scale=0.01, seed=7):
        super().__init__()
        self.capacity = capacity
        self.bag = nn.EmbeddingBag(capacity, dim, mode="sum", sparse=True)
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            self.bag.weight.normal_(0.0, init_scale, generator=g)

    def forward(self, keys):
        rows = torch.remainder(keys, self.capacity).reshape(-1, 1)
        return self.bag(rows).reshape(*keys.shape, -1)


class FM(nn.Module):
    def __init__(self, embedding, k=8):
        super().__init__()
        self.embedding = embedding
        self.k = k

    def fm_logit(self, rows):
        # split, not slicing: its backward is one cat, where each slice's
        # would fill a zero gradient of the whole batch.
        fields, bias = rows.split([rows.shape[1] - 1, 1], dim=1)
        w, v = fields.split([1, self.k], dim=2)  # v: the fields' factors
        w = w.sum(dim=(1, 2)) + bias[:, 0, 0]
        s = v.sum(dim=1)
        pairs = 0.5 * (s * s - (v * v).sum(dim=1)).sum(dim=1)
        return w + pairs, v

    def forward(self, keys):
        logit, _ = self.fm_logit(self.embedding(keys))
        return logit


class DeepFM(FM):
    """FM plus an MLP (ReLU hidden layers, one linear output) over the
    fields' factors, summed in the logit."""

    def __init__(self, embedding, k=8, num_fields=CRITEO_FIELDS,
                 hidden=(64, 32)):
        super().__init__(embedding, k)
        layers, width = [], num_fields * k
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, keys):
        logit, v = self.fm_logit(self.embedding(keys))
        return logit + self.mlp(v.flatten(1)).squeeze(1)


def make_model(name, embedding, k=8, num_fields=CRITEO_FIELDS):
    if name == "fm":
        return FM(embedding, k)
    if name == "deepfm":
        return DeepFM(embedding, k, num_fields)
    raise ValueError(f"model must be fm or deepfm, not {name!r}")


def loss_of(model, keys, labels):
    """The SUM of the examples' logloss (ps_worker's loss: a feature seen in
    n examples gets n examples' worth of gradient, as Adagrad expects)."""
    logits = model(keys)
    return nn.functional.binary_cross_entropy_with_logits(
        logits, labels, reduction="sum"), logits


class Evaluation(tuple):
    """(auc, logloss), unpacked as before, and .ne: the normalized entropy
    (logloss over the base rate's entropy; NaN with one class only)."""

    def __new__(cls, auc, logloss, ne):
        e = super().__new__(cls, (auc, logloss))
        e.ne = ne
        return e


def evaluate(model, reader_batches):
    """AUC and logloss of the model over the batches (no pushes), with the
    normalized entropy as .ne (NE >= 1: no better than the base rate)."""
    import ps.data
    model.eval()
    probs, labels = [], []
    with torch.no_grad():
        for batch in reader_batches:
            logits = model(batch_keys(batch.ids))
            probs.append(torch.sigmoid(logits).numpy())
            labels.append(batch.labels)
    model.train()
    p = np.concatenate(probs).astype(np.float32)
    y = np.concatenate(labels).astype(np.float32)
    return Evaluation(ps.data.auc(p, y), ps.data.logloss(p, y),
                      ps.data.normalized_entropy(p, y))
