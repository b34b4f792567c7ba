"""Parameter servers on this machine, for examples, tests and notebooks.

    with ps.LocalServers("configs/fm.tables", num_shards=2,
                         num_workers=2) as servers:
        client = ps.Client(servers.addresses, worker_id=0, num_workers=2)

Each shard is a ``ps_server`` process ($PS_SERVER_BIN, else the one the
installed package carries or the build tree's, else ``ps_server`` on PATH) listening
on a free loopback port; its log is ``<run_dir>/server-<k>.log``. Leaving
the ``with`` block (or ``stop()``) stops them (SIGTERM, then SIGKILL after
``stop_timeout`` seconds); so does the interpreter's exit, also after an
uncaught exception, when nothing stopped them before. For a cluster across machines use ps_launch,
Slurm or Kubernetes (deploy/).
"""

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from ps.errors import DeadlineError, NotFoundError, PeerLostError
from ps.programs import program_path


def find_server_binary():
    """ps_server: $PS_SERVER_BIN, the package's (ps/bin/) or the build
    tree's, or the one on PATH."""
    candidates = [os.environ.get("PS_SERVER_BIN"),
                  program_path("ps_server"),
                  shutil.which("ps_server")]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    raise NotFoundError(
        "no ps_server binary: install the package with the README's pip "
        "command (it carries one), set PS_SERVER_BIN or put it on PATH")


def process_cpu_seconds(pids):
    """CPU seconds (user + system, every thread) the live processes ``pids``
    used so far, to the nanosecond; a process that is gone counts 0."""
    total = 0.0
    for pid in pids:
        try:
            total += time.clock_gettime(_cpu_clock_of(pid))
        except OSError:
            continue
    return total


def _cpu_clock_of(pid):
    # Linux's clock of a whole process's CPU time (CPUCLOCK_SCHED of the
    # thread group), what glibc's clock_getcpuclockid(pid) returns. Where
    # /proc/<pid>/stat counts 10 ms ticks, a 2-server job's CPU over a
    # short training loop would be off by a few percent.
    return ((~pid) << 3) | 2


class LocalServers:
    """``num_shards`` ps_server processes serving ``tables`` (a
    configs/*.tables path) to ``num_workers`` workers.

    Keyword arguments become flags of every server (``consistency="bsp"``
    -> ``--consistency=bsp``; True -> ``--flag=true``); ``run_dir`` holds
    the logs and port files (a temporary folder by default, removed by
    stop() unless ``keep_run_dir``).

    One default differs from ps_server's: ``idle_sleep_max_us=1000``. A
    Python worker pushes every few milliseconds; between pushes an idle
    apply thread then sleeps up to 1 ms between polls of its inboxes, where
    ps_server's 200 us (for C++ workers pushing every few microseconds) cost
    about a sixth of a core per idle server.
    """

    def __init__(self, tables, num_shards=1, num_workers=1, *, run_dir=None,
                 server_binary=None, ready_timeout=30.0, stop_timeout=10.0,
                 keep_run_dir=False, **flags):
        self.tables = str(tables)
        self.num_shards = num_shards
        self.num_workers = num_workers
        self.flags = {"idle_sleep_max_us": 1000, **flags}
        self.binary = server_binary or find_server_binary()
        self.ready_timeout = ready_timeout
        self.stop_timeout = stop_timeout
        self._own_run_dir = run_dir is None and not keep_run_dir
        self.run_dir = Path(run_dir or tempfile.mkdtemp(prefix="ps-servers-"))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.procs = []
        self.addresses = []

    def _command(self, shard):
        cmd = [self.binary, f"--tables={self.tables}",
               f"--num_shards={self.num_shards}", f"--shard_id={shard}",
               f"--num_workers={self.num_workers}", "--port=0",
               f"--port_file={self.run_dir / f'server-{shard}.port'}",
               "--logtostderr"]
        for name, value in self.flags.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            cmd.append(f"--{name}={value}")
        return cmd

    def log(self, shard):
        """The text server ``shard`` logged so far."""
        try:
            return (self.run_dir / f"server-{shard}.log").read_text(
                errors="replace")
        except OSError:
            return ""

    def start(self):
        """Starts every shard; returns once all wrote their port file
        (DeadlineError after ready_timeout, PeerLostError with the log's
        tail if a server exits first)."""
        # A script that fails before stop() (the README's snippet has no
        # ``with``) must not leave its servers running.
        atexit.register(self.stop)
        for shard in range(self.num_shards):
            (self.run_dir / f"server-{shard}.port").unlink(missing_ok=True)
            with open(self.run_dir / f"server-{shard}.log", "wb") as log:
                self.procs.append(subprocess.Popen(
                    self._command(shard), stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL))
        try:
            self.addresses = [self._wait_ready(s)
                              for s in range(self.num_shards)]
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, shard):
        port_file = self.run_dir / f"server-{shard}.port"
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if port_file.exists():
                text = port_file.read_text().strip()
                if text:
                    return text
            code = self.procs[shard].poll()
            if code is not None:
                tail = "\n".join(self.log(shard).splitlines()[-15:])
                raise PeerLostError(
                    f"server {shard} exited with code {code} before it was "
                    f"ready; its log ends:\n{tail}")
            time.sleep(0.02)
        raise DeadlineError(f"server {shard} not ready after "
                            f"{self.ready_timeout} s (log: "
                            f"{self.run_dir / f'server-{shard}.log'})")

    def kill(self, shard, sig=signal.SIGKILL):
        """Kills server ``shard`` at once (tests of a lost server)."""
        proc = self.procs[shard]
        if proc.poll() is None:
            proc.send_signal(sig)
            proc.wait()

    @property
    def pids(self):
        """The servers' process ids, in shard order."""
        return [proc.pid for proc in self.procs]

    def cpu_seconds(self):
        """User + system CPU seconds the running servers used so far."""
        return process_cpu_seconds(self.pids)

    def stop(self):
        """Stops every server; returns their exit codes."""
        atexit.unregister(self.stop)
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=self.stop_timeout))
            except subprocess.TimeoutExpired:
                proc.kill()
                codes.append(proc.wait())
        self.procs = []
        if self._own_run_dir:
            shutil.rmtree(self.run_dir, ignore_errors=True)
        return codes

    def __enter__(self):
        return self.start() if not self.procs else self

    def __exit__(self, *exc):
        self.stop()
