"""The multihost tests' "hosts": network namespaces joined by a bridge in a
namespace of its own (Fabric), or the root namespace on loopback (Loopback),
with partitions and nftables faults; and the clean-up that removes every
namespace, link and process of a run, also after a failure."""
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time


SKIP_RETURN_CODE = 77
NS_PREFIX = "psmh-"
SUBNET = "10.213.7."  # exists only inside this test's namespaces
SUBNET6 = "fd00:213:7::"  # a unique-local prefix, the same
HOSTS = ("s0", "s1", "w0", "w1")
# Extra seconds for timing bounds in sanitizer builds (set by CMake).
SLACK_S = float(os.environ.get("PS_MULTIHOST_SLACK_S", "0"))

BIN = {}  # "server", "worker", "test_worker", "datagen" -> path
# This run's folder (logs, data, the cluster secret) and the secret's file,
# set by the test's main.
RUN = {"tmp": "", "secret": ""}
# What the running case must undo (processes, namespaces), newest last:
# run by tearDown, and by main() when a signal or an error ends the run.
_CLEANUPS = []


def at_cleanup(fn):
    _CLEANUPS.append(fn)


def run_cleanups():
    """Runs and forgets every cleanup, newest first; returns the errors."""
    errors = []
    while _CLEANUPS:
        try:
            _CLEANUPS.pop()()
        except Exception as e:  # keep cleaning up
            errors.append(e)
    return errors


def log(msg):
    print(f"[multihost {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def figure(msg):
    """A number the closing note of the issue needs."""
    print(f"FIGURE: {msg}", flush=True)


def run(argv, check=True, stdin=None):
    r = subprocess.run(argv, input=stdin, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {r.returncode}: "
                           f"{r.stderr.strip()}")
    return r


# --- namespaces -------------------------------------------------------------


def list_namespaces():
    r = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def kill_namespace(ns):
    """Kills every process in `ns`, then deletes it (its veths and nft
    tables go with it)."""
    r = run(["ip", "netns", "pids", ns], check=False)
    for pid in r.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)
    run(["ip", "netns", "del", ns], check=False)


def sweep_stale_runs():
    """Namespaces and temp folders an earlier run left when it was killed
    outright (the pid in their name is gone)."""
    stale = re.compile(re.escape(NS_PREFIX) + r"(\d+)-")

    def dead(name):
        m = stale.match(name)
        return m and not os.path.exists(f"/proc/{m.group(1)}")

    for ns in list_namespaces():
        if dead(ns):
            log(f"removing {ns}, left by a run that was killed")
            kill_namespace(ns)
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        if dead(name) and os.path.isdir(os.path.join(tmp, name)):
            log(f"removing {tmp}/{name}, left by a run that was killed")
            shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def can_use_namespaces():
    """'' when this process may make namespaces, veths and nft tables;
    otherwise why not."""
    if os.geteuid() != 0:
        return "not root"
    for tool in ("ip", "bridge", "nft"):
        if shutil.which(tool) is None:
            return f"no {tool} on PATH"
    ns = f"{NS_PREFIX}{os.getpid()}-probe"
    try:
        run(["ip", "netns", "add", ns])
        run(["ip", "-n", ns, "link", "add", "name", "pa", "type", "veth",
             "peer", "name", "pb"])
        run(["ip", "netns", "exec", ns, "nft", "add", "table", "inet",
             "probe"])
        return ""
    except (RuntimeError, OSError) as e:
        return str(e)
    finally:
        run(["ip", "netns", "del", ns], check=False)


class Fabric:
    """The hosts of one case: a namespace per host with one veth ("eth0",
    SUBNET.N/24), its other end a port of a bridge in the switch namespace.
    partition() cuts a host off with `ip link set DEV down`, heal() brings
    DEV up again: at="switch" takes its bridge port down (a pulled cable:
    the host's eth0 loses carrier, its routes stay, its packets are lost),
    at="host" its own eth0 (the route goes too: sends fail at once with
    "network unreachable")."""

    def __init__(self, hosts):
        self.tag = f"{NS_PREFIX}{os.getpid()}-{secrets.token_hex(3)}"
        self.switch = f"{self.tag}-sw"
        self.ns = {}
        self.ip = {}
        self._made = []
        try:
            self._add_ns(self.switch)
            sw = ["ip", "-n", self.switch]
            run(sw + ["link", "add", "name", "br0", "type", "bridge"])
            run(sw + ["link", "set", "br0", "up"])
            for i, h in enumerate(hosts):
                ns = f"{self.tag}-{h}"
                self._add_ns(ns)
                self.ns[h] = ns
                self.ip[h] = f"{SUBNET}{10 + i}"
                run(sw + ["link", "add", "name", f"p-{h}", "type", "veth",
                          "peer", "name", "eth0", "netns", ns])
                run(sw + ["link", "set", f"p-{h}", "master", "br0", "up"])
                hn = ["ip", "-n", ns]
                run(hn + ["link", "set", "lo", "up"])
                run(hn + ["addr", "add", f"{self.ip[h]}/24", "dev", "eth0"])
                # nodad: usable at once, without duplicate detection; and
                # kept while eth0 is down (a partition), as IPv4's are.
                run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                     "net.ipv6.conf.eth0.keep_addr_on_down=1"])
                run(hn + ["addr", "add", f"{SUBNET6}{10 + i}/64", "dev",
                          "eth0", "nodad"])
                run(hn + ["link", "set", "eth0", "up"])
            self._wait_reachable(hosts)
        except BaseException:
            self.close()
            raise

    def listen_host(self, host):
        """What a server binds: s0 every IPv4 address (it advertises its
        only non-loopback one, eth0's, by itself), s1 its IPv6 address (the
        workers dial it over IPv6)."""
        index = HOSTS.index(host)
        return "0.0.0.0" if host == "s0" else f"{SUBNET6}{10 + index}"

    def _add_ns(self, ns):
        run(["ip", "netns", "add", ns])
        self._made.append(ns)

    def _wait_reachable(self, hosts):
        """Until every bridge port forwards and every host's link is up."""
        deadline = time.monotonic() + 10
        while not self._links_up(hosts):
            if time.monotonic() > deadline:
                raise RuntimeError("the bridge ports did not come up")
            time.sleep(0.05)

    def _links_up(self, hosts):
        ports = json.loads(run(["bridge", "-n", self.switch, "-j", "link",
                                "show"]).stdout)
        forwarding = {p["ifname"] for p in ports
                      if p.get("state") == "forwarding"}
        for h in hosts:
            eth0 = json.loads(run(["ip", "-n", self.ns[h], "-j", "link",
                                   "show", "eth0"]).stdout)
            if f"p-{h}" not in forwarding or eth0[0]["operstate"] != "UP":
                return False
        return True

    def exec_prefix(self, host):
        return ["ip", "netns", "exec", self.ns[host]]

    def _link(self, host, at, state):
        where = {"switch": [self.switch, f"p-{host}"],
                 "host": [self.ns[host], "eth0"]}[at]
        run(["ip", "-n", where[0], "link", "set", where[1], state])

    def partition(self, host, at="switch"):
        self._link(host, at, "down")

    def heal(self, host, at="switch"):
        self._link(host, at, "up")  # the route returns with the link

    def nft(self, host, ruleset):
        run(self.exec_prefix(host) + ["nft", "-f", "-"], stdin=ruleset)

    def close(self):
        for ns in reversed(self._made):
            kill_namespace(ns)
        self._made = []
        left = [ns for ns in list_namespaces() if ns.startswith(self.tag)]
        if left:
            raise RuntimeError(f"namespaces left behind: {left}")


class Loopback:
    """The reference "fabric": every process in the root namespace on
    127.0.0.1."""

    ns = {}

    def __init__(self):
        self.ip = {h: "127.0.0.1" for h in HOSTS}

    def listen_host(self, host):
        return self.ip[host]

    def exec_prefix(self, host):
        return []

    def close(self):
        pass
