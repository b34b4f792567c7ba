"""ps: the parameter server's Python package.

- ``ps.Client``: a worker's connection to the parameter servers (pull, push,
  clock, barrier, checkpoints); ``ps.Checkpoints`` for the checkpoint cut.
- ``ps.xfer``: the one-sided transfer core (contexts, registered memory,
  put / get / atomics / flush).
- ``ps.data``: the C++ click-log readers (Criteo TSV, libsvm, libffm) and
  the AUC / logloss metrics.
- ``ps.torch``: an embedding module whose rows live on the servers (imported
  on its own: ``import ps.torch``; it needs torch).

Every failure is a ``ps.errors.Error`` subclass carrying the C++ status
message.
"""

from ps import errors
from ps.errors import Error
from ps import xfer

__all__ = ["errors", "Error"]
