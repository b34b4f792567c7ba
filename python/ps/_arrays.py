"""Arguments as NumPy arrays: the one place torch tensors become arrays.

The extension takes NumPy arrays and checks their dtype and layout itself.
A CPU torch tensor is passed as ``tensor.numpy()``, a view of the same
memory (no copy: a pull into a tensor writes the tensor). torch is never
imported here; a tensor can only exist if the caller imported it.
"""

import sys

import numpy as np

from ps.errors import InvalidArgumentError


def is_tensor(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def shared_array(x, name):
    """``x`` itself if an ndarray, a CPU tensor's ``numpy()`` view, else
    None."""
    if isinstance(x, np.ndarray):
        return x
    if is_tensor(x):
        if x.device.type != "cpu":
            raise InvalidArgumentError(
                f"{name} must be a CPU tensor, not one on {x.device}")
        return x.detach().numpy()
    return None


def as_array(x, name, dtype):
    """``x`` as an ndarray sharing its memory; other sequences converted to
    ``dtype`` (arrays and tensors keep theirs: the extension checks it)."""
    shared = shared_array(x, name)
    if shared is not None:
        return shared
    try:
        return np.asarray(x, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidArgumentError(f"{name}: {e}") from None


def as_keys(keys):
    """Keys as a one-dimensional int64/uint64 array (the extension checks)."""
    return as_array(keys, "keys", np.uint64)


def rows_out(out, n, dim, like):
    """The destination of a pull of ``n`` rows of ``dim`` floats: ``out``
    itself (checked), or a new array, a tensor when ``like`` is one."""
    if out is None:
        if is_tensor(like):
            import torch
            return torch.empty((n, dim), dtype=torch.float32)
        return np.empty((n, dim), dtype=np.float32)
    check_rows_shape(out, n, dim, "out")
    return out


def check_rows_shape(a, n, dim, name):
    """A two-dimensional ``a`` must be (n, dim); a flat one n * dim long (the
    extension checks the size either way)."""
    shape = tuple(a.shape)
    if len(shape) == 2 and shape != (n, dim):
        raise InvalidArgumentError(
            f"{name} has shape {shape}, but {n} keys of dim {dim} need "
            f"({n}, {dim})")
    if len(shape) > 2:
        raise InvalidArgumentError(
            f"{name} must be (keys, dim) or flat, not of shape {shape}")
