"""The programs an installed package carries (``ps/bin/``): ps_server,
which ps.LocalServers starts; ps_datagen, which writes click logs from a
planted model (Criteo TSV, one-hot libsvm or Avazu-shaped CSV); ps_serve,
a serving replica that follows a checkpoint folder (ps.serving looks rows
up on it); and ps_ckpt, which lists, verifies and exports checkpoints.
pip makes a command of each in the environment's ``bin/`` (setup.py's
entry points): ``ps_datagen --rows=10000 --output=train.tsv``.

In the build tree (the package imported from <build>/python) the programs
are the build's own.
"""

import os
import sys
from pathlib import Path

from ps._program_paths import BUILD_TREE
from ps.errors import NotFoundError

_PACKAGE = Path(__file__).resolve().parent


def program_path(name):
    """The path of program ``name`` (a key of _program_paths.BUILD_TREE): the
    package's own copy, else the build tree's; None when neither exists."""
    for path in (_PACKAGE / "bin" / name,
                 _PACKAGE.parent.parent / BUILD_TREE[name]):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def _run(name):
    path = program_path(name)
    if path is None:
        raise NotFoundError(f"no {name} in {_PACKAGE / 'bin'}: reinstall the "
                            "package with the README's pip command")
    os.execv(path, [str(path), *sys.argv[1:]])


def ps_server():
    """The ``ps_server`` command."""
    _run("ps_server")


def ps_datagen():
    """The ``ps_datagen`` command."""
    _run("ps_datagen")


def ps_serve():
    """The ``ps_serve`` command."""
    _run("ps_serve")


def ps_ckpt():
    """The ``ps_ckpt`` command."""
    _run("ps_ckpt")
