"""The offline install of python/setup.py: a venv with the system's
packages (numpy, torch), ``pip install --no-build-isolation --no-index``
of the package CMake assembled in <build>/python, then ``import ps,
ps.torch`` from outside the source and build trees, and a server round
trip with the installed package.

The package is copied out of the build tree first, so pip's build/ and
*.egg-info folders are not written next to the package the other tests
import."""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import PACKAGE_DIR, REPO, SERVER_BIN, run_group


def needs(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{sys.executable} has no {module} module")


CHECK = r"""
import sys
from pathlib import Path
import numpy as np
import ps, ps.torch

here = Path(ps.__file__).resolve()
assert here.is_relative_to(Path(sys.prefix).resolve()), here
print("ps from", here.parent)
tables = Path("one.tables")
tables.write_text('table { id: 1 name: "t" kind: HASHED dim: 2 '
                  'capacity: 64 optimizer { name: "sum" } }\n')
with ps.LocalServers(tables) as servers:
    with ps.Client(servers.addresses) as c:
        keys = np.array([1, 2], np.int64)
        c.push("t", keys, np.ones((2, 2), np.float32))
        c.wait_applied()
        assert (c.pull("t", keys) == 1).all()
print("round trip ok")
"""


def test_offline_pip_install(tmp_path):
    needs("venv")
    needs("ensurepip")
    needs("pip")
    needs("setuptools")
    assert (PACKAGE_DIR / "setup.py").is_file(), "build the package first"
    src = tmp_path / "src"
    shutil.copytree(PACKAGE_DIR / "ps", src / "ps",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PACKAGE_DIR / "setup.py", src / "setup.py")

    venv = tmp_path / "venv"
    made = subprocess.run([sys.executable, "-m", "venv",
                           "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=120)
    if made.returncode != 0 and "ensurepip" in made.stdout + made.stderr:
        pytest.skip("venv cannot install pip here: " + made.stdout[-300:])
    assert made.returncode == 0, made.stdout + made.stderr

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    pip = subprocess.run([str(venv / "bin" / "pip"), "install",
                          "--no-build-isolation", "--no-index", str(src)],
                         capture_output=True, text=True, timeout=180,
                         env=env, cwd=tmp_path)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    assert "Successfully installed ps" in pip.stdout

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    assert not outside.resolve().is_relative_to(REPO)
    env["PS_SERVER_BIN"] = str(SERVER_BIN)
    run = run_group([str(venv / "bin" / "python"), "-c", CHECK],
                    timeout=60, env=env, cwd=outside)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "round trip ok" in run.stdout
