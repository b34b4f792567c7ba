"""What python/setup.py refuses: a package without its native module.

The install itself, from a clone by the README's command, is run by the
README tests (tests/readme: the install block, then the README's snippet
with the installed package). Here: a build folder that does not build the
extension (configured with -DPS_BUILD_PYTHON=OFF) is refused by pip's build
with the reason and what to do, and a package tree without ps._native says
so on import instead of failing with a circular-import message.
"""

import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO


def needs(module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{sys.executable} has no {module} module")


def test_build_folder_without_the_extension_is_refused(tmp_path):
    needs("pip")
    needs("setuptools")
    build = tmp_path / "build"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    configured = subprocess.run(
        ["cmake", "-S", str(REPO), "-B", str(build), *generator,
         "-DCMAKE_BUILD_TYPE=Release", "-DPS_BUILD_PYTHON=OFF",
         "-DPS_BUILD_BENCH=OFF", "-DPS_BUILD_FUZZ=OFF"],
        capture_output=True, text=True, timeout=300)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    assert (build / "python" / "NOT_BUILT").is_file()

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PS_BUILD_DIR=str(build), PIP_DISABLE_PIP_VERSION_CHECK="1")
    wheel = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation",
         "--no-index", "--no-deps", "-w", str(tmp_path / "wheels"),
         str(REPO / "python")],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    out = wheel.stdout + wheel.stderr
    assert wheel.returncode != 0, out
    assert "cannot build the Python package" in out, out
    assert "does not build the native module ps._native" in out, out
    assert "-DPS_BUILD_PYTHON=OFF" in out, out
    assert not list((tmp_path / "wheels").glob("*.whl"))
    # Nothing was built: the refusal comes before any compiling.
    assert not (build / "server" / "ps_server").exists()


def test_import_without_the_extension_says_what_to_do(tmp_path):
    package = tmp_path / "ps"
    shutil.copytree(REPO / "python" / "ps", package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    imported = subprocess.run([sys.executable, "-c", "import ps"],
                              capture_output=True, text=True, timeout=60,
                              env=env, cwd=tmp_path)
    assert imported.returncode != 0
    assert "the native module ps._native cannot be loaded" in imported.stderr
    assert "pip install --no-build-isolation --no-index ./python" in \
        imported.stderr
    assert "circular import" not in imported.stderr
