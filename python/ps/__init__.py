"""ps: the parameter server's Python package.

- ``ps.Client``: a worker's connection to the parameter servers (pull, push,
  clock, barrier); ``client.checkpoints()`` for checkpoints and resume.
- ``ps.LocalServers``: ps_server processes on this machine.
- ``ps.xfer``: the one-sided transfer core (contexts, registered memory,
  put / get / atomics / flush).
- ``ps.data``: the C++ click-log readers (Criteo TSV, libsvm, libffm) and
  the AUC / logloss metrics.
- ``ps.torch``: an embedding module whose rows live on the servers
  (``import ps.torch``; it needs torch).
- ``ps.allreduce``: the workers' all-reduce of dense tensors through
  ``ps.xfer`` (a DDP comm hook; ``import ps.allreduce``; it needs torch).

Every failure is a ``ps.errors.Error`` subclass carrying the C++ status
message.
"""

from ps import data, errors, xfer
from ps.client import Checkpoints, Client, Handle, Table
from ps.cluster import LocalServers
from ps.errors import Error

__all__ = ["Checkpoints", "Client", "Error", "Handle", "LocalServers",
           "Table", "data", "errors", "xfer"]
