"""Runs examples/python/one_sided_ps.py (a server and two worker processes
training over ps.xfer) over shm and tcp: it must converge and exit 0."""

import os
import signal
import subprocess
import sys

import pytest

import ps

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples", "python", "one_sided_ps.py")


@pytest.mark.parametrize("transport", ["auto", "tcp"])
def test_one_sided_ps_converges(transport):
    env = dict(os.environ, XFER_TRANSPORT=transport,
               PYTHONPATH=os.path.dirname(os.path.dirname(ps.__file__)))
    # Its own process group: whatever the launcher leaves behind (it kills
    # its children when it fails, but it may itself be killed) goes too.
    proc = subprocess.Popen([sys.executable, EXAMPLE], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, out + err[-2000:]
    lines = out.splitlines()
    assert lines[-1].endswith("converged") and "NOT" not in lines[-1]
    losses = [float(line.split()[-1]) for line in lines[:-1]]
    assert losses == sorted(losses, reverse=True) and len(losses) >= 5
