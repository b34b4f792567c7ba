"""The multihost tests' processes: one program on one host with its log
(Proc), and a cluster of 2 servers and 2 workers (Cluster)."""
import contextlib
import ctypes
import os
import re
import signal
import subprocess
import threading
import time

from netns import *  # noqa: F401,F403  (BIN, RUN, log, run, ...)


_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # A harness killed outright (ctest's timeout) takes its processes along.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setpgid(0, 0)


class Proc:
    """A started program; every output line is logged with the time it
    arrived (the programs flush their progress lines)."""

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.argv = argv
        self.lines = []  # (monotonic time, line)
        self.exit_time = None
        self._cond = threading.Condition()
        self._log = open(log_path, "w")
        self._log.write("$ " + " ".join(argv) + "\n")
        self._log.flush()
        self.start_time = time.monotonic()
        self.popen = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, text=True, errors="replace",
            preexec_fn=_die_with_parent,
            env=dict(os.environ, **(env or {})))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.popen.stdout:
            t = time.monotonic()
            self._log.write(f"{t - self.start_time:9.3f} {line}")
            self._log.flush()
            with self._cond:
                self.lines.append((t, line.rstrip("\n")))
                self._cond.notify_all()
        self.popen.wait()
        with self._cond:
            self.exit_time = time.monotonic()
            self._cond.notify_all()

    def wait_line(self, pattern, timeout, after=0.0):
        """(time, match) of the first line matching `pattern` that arrived
        after `after`; raises on timeout or exit without one."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = 0
        with self._cond:
            while True:
                for t, line in self.lines[i:]:
                    m = rx.search(line)
                    if m and t > after:
                        return t, m
                i = len(self.lines)
                if self.exit_time is not None:
                    raise AssertionError(
                        f"{self.name} exited {self.popen.returncode} without "
                        f"a line matching {pattern!r}:\n{self.tail()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.name}: no line matching {pattern!r} in "
                        f"{timeout} s:\n{self.tail()}")
                self._cond.wait(left)

    def wait(self, timeout):
        """The exit status; raises if still running after `timeout` s."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.exit_time is not None,
                                       timeout):
                raise AssertionError(f"{self.name} still running after "
                                     f"{timeout} s:\n{self.tail()}")
        return self.popen.returncode

    def running(self):
        return self.exit_time is None

    def lines_between(self, pattern, t0, t1):
        rx = re.compile(pattern)
        with self._cond:
            return [line for t, line in self.lines
                    if t0 < t < t1 and rx.search(line)]

    def text(self):
        with self._cond:
            return "\n".join(line for _, line in self.lines)

    def tail(self, n=25):
        with self._cond:
            return "\n".join(f"  | {line}" for _, line in self.lines[-n:])

    def signal(self, sig):
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def close(self):
        self.signal(signal.SIGKILL)
        self.popen.wait()
        self._reader.join(5)
        self.popen.stdout.close()
        self._log.close()


class Cluster:
    """2 servers and 2 workers on a fabric (Fabric or Loopback)."""

    def __init__(self, case, fabric, name, tables, transport, timeout_ms):
        self.case = case
        self.fabric = fabric
        self.name = name
        self.transport = transport
        self.timeout_ms = timeout_ms
        self.servers = []
        self.workers = []
        self.addresses = []
        for shard in range(2):
            host = f"s{shard}"
            port_file = case.path(f"{name}-port-{shard}")
            argv = fabric.exec_prefix(host) + [
                BIN["server"], f"--shard_id={shard}", "--num_shards=2",
                "--num_workers=2", f"--tables={tables}",
                "--consistency=bsp", f"--listen_host={fabric.listen_host(host)}",
                "--port=0", f"--port_file={port_file}",
                f"--cluster_secret_file={RUN['secret']}",
                f"--transport={transport}", f"--timeout_ms={timeout_ms}"]
            self.servers.append(self._start(f"server-{shard}", argv))
            self.servers[-1].port_file = port_file
        for s in self.servers:
            self.addresses.append(self._wait_port_file(s))

    def _start(self, name, argv):
        p = Proc(name, argv, self.case.path(f"{self.name}-{name}.log"))
        at_cleanup(p.close)
        return p

    def _wait_port_file(self, server):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError):
                with open(server.port_file) as f:
                    text = f.read().strip()
                if text:
                    return text
            if not server.running():
                break
            time.sleep(0.02)
        raise AssertionError(f"{server.name} did not start:\n"
                             f"{server.tail()}")

    def start_worker(self, program, worker_id, args):
        host = f"w{worker_id}"
        argv = self.fabric.exec_prefix(host) + [
            BIN[program], f"--worker_id={worker_id}", "--num_workers=2",
            "--servers=" + ",".join(self.addresses),
            f"--cluster_secret_file={RUN['secret']}",
            f"--transport={self.transport}",
            f"--timeout_ms={self.timeout_ms}"] + args
        p = self._start(f"worker-{worker_id}", argv)
        self.workers.append(p)
        return p

    def finish(self, timeout):
        """Waits for the workers (each must exit 0), then stops the servers
        (SIGTERM; each must exit 0)."""
        for w in self.workers:
            rc = w.wait(timeout)
            if rc != 0:
                raise AssertionError(f"{w.name} exited {rc}:\n{w.tail()}")
        self.stop_servers(must_succeed=True)

    def stop_servers(self, must_succeed):
        for s in self.servers:
            s.signal(signal.SIGTERM)
        for s in self.servers:
            rc = s.wait(30)
            if must_succeed and rc != 0:
                raise AssertionError(f"{s.name} exited {rc}:\n{s.tail()}")


# --- the jobs ----------------------------------------------------------------

# SGD with learning rate 1 from zero rows, integer gradients: every row is
# an exact fp32 sum, the same whatever order the pushes apply in.
