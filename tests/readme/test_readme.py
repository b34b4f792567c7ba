"""README.md's code blocks, run as a new user runs them (so the README
cannot drift from what works).

Every fenced block of README.md either runs here, in README order, in one
working folder that stands in for the clone (its top-level entries are
links to the source tree's, ``build`` to the build folder under test), or
carries "<!-- not run: REASON -->", allowed only for a block that needs
docker, kubectl or sbatch (and uses it). How each language runs:

  sh      bash -euo pipefail, in the working folder (the Python install
          block makes .venv there, reusing the build folder)
  python  the .venv's interpreter (the package as installed), the working
          folder's train.tsv and configs/
  yaml    a Prometheus configuration: promtool check config
  cpp     compiled from README.md at build time and run by ctest
          (readme_one_sided_example_*; tests/readme/CMakeLists.txt): here
          only checked to be the README's current text

Nothing runs from the caller's Python path: the blocks see the package only
as the install block installed it.
"""

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_blocks import read_blocks  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("PS_BUILD_DIR", REPO / "build")).resolve()
BLOCKS = read_blocks(REPO / "README.md")
EXCUSES = ("docker", "kubectl", "sbatch")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A folder that looks like the clone: links to the source tree's
    top-level entries, ``build`` to the build folder."""
    root = tmp_path_factory.mktemp("clone")
    # Not what git ignores at the top (what the blocks write: .venv,
    # train.tsv, cluster.key, run/; other build folders), so that no block
    # writes through a link into the source tree.
    ignored = [line.strip().strip("/") for line in
               (REPO / ".gitignore").read_text().splitlines()
               if line.startswith("/")]
    for entry in REPO.iterdir():
        if entry.name.startswith(".") or any(
                fnmatch.fnmatch(entry.name, pattern) for pattern in ignored):
            continue
        (root / entry.name).symlink_to(entry)
    (root / "build").symlink_to(BUILD)
    return root


def environment():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV",
                        "PS_SERVER_BIN", "PS_CLUSTER_SECRET",
                        "PS_CLUSTER_SECRET_FILE")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run(command, cwd, timeout=300):
    result = subprocess.run(command, cwd=cwd, env=environment(),
                            stdin=subprocess.DEVNULL, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
        f"\n--- stderr\n{result.stderr[-4000:]}")
    return result


def run_sh(block, clone):
    run(["bash", "-euo", "pipefail", "-c", block.text], clone)


def run_python(block, clone):
    python = clone / ".venv" / "bin" / "python"
    assert python.is_file(), (
        f"{block.where()} runs in the .venv the README's install block "
        "makes, and there is none")
    run([str(python), "-c", block.text], clone)


def run_yaml(block, clone):
    promtool = shutil.which("promtool")
    assert promtool, "promtool (Debian's prometheus; scripts/setup.sh) missing"
    config = clone / "readme-prometheus.yml"
    config.write_text(block.text)
    run([promtool, "check", "config", str(config)], clone, timeout=60)


def check_cpp(block, clone):
    extracted = BUILD / "tests" / "readme" / "readme_one_sided_example.cc"
    assert extracted.is_file(), f"{extracted} was not built"
    assert block.text in extracted.read_text(), (
        f"{extracted} is not {block.where()}'s text: rebuild")


RUNNERS = {"sh": run_sh, "python": run_python, "yaml": run_yaml,
           "cpp": check_cpp}


def test_every_block_runs_or_needs_what_ci_lacks():
    assert BLOCKS, "README.md has no code blocks"
    for block in BLOCKS:
        if block.not_run:
            needs = [tool for tool in EXCUSES
                     if re.search(rf"\b{tool}\b", block.not_run)
                     and re.search(rf"\b{tool}\b", block.text)]
            assert needs, (
                f"{block.where()} is not run ({block.not_run!r}): only "
                f"blocks that use {', '.join(EXCUSES)} may skip")
        else:
            assert block.lang in RUNNERS, (
                f"{block.where()}: no way to run a '{block.lang}' block")


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.not_run],
                         ids=lambda b: f"line{b.line}-{b.lang}")
def test_block(block, clone):
    RUNNERS[block.lang](block, clone)
