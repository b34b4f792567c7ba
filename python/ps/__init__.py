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
- ``ps.programs``: the programs the package carries (ps_server,
  ps_datagen, ps_serve, ps_ckpt).
- ``ps.serving``: lookups on serving replicas (ps_serve), which follow the
  training cluster's checkpoints.
- ``ps.allreduce``: the workers' all-reduce of dense tensors through
  ``ps.xfer`` (a DDP comm hook; ``import ps.allreduce``; it needs torch).

Every failure is a ``ps.errors.Error`` subclass carrying the C++ status
message.
"""

import importlib as _importlib

try:
    _importlib.import_module("ps._native")  # the C++ extension under it all
except ImportError as _e:
    # Without this, the first module that needs it fails with a circular
    # import message that points the user the wrong way.
    raise ImportError(
        f"ps: the native module ps._native cannot be loaded from "
        f"{__path__[0]} ({_e}). Install the package with the README's "
        "command (pip install --no-build-isolation --no-index ./python "
        "builds it), or build it: scripts/build.sh "
        "--target=ps_python_native") from _e

from ps import data, errors, programs, serving, xfer  # noqa: E402
from ps.client import Checkpoints, Client, Handle, Table  # noqa: E402
from ps.cluster import LocalServers  # noqa: E402
from ps.errors import Error  # noqa: E402

__all__ = ["Checkpoints", "Client", "Error", "Handle", "LocalServers",
           "Table", "data", "errors", "programs", "serving", "xfer"]
