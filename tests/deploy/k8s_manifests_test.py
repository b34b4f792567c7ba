"""Structure test of the Kubernetes deployment (deploy/k8s).

No cluster is needed: the manifests are read as YAML and checked against
each other, against the Dockerfile and against the programs they run (the
flags each lists in --helpxml, the libraries each links). It catches what a
cluster would show only at run time, or never: a flag gflags ignores in a
flagfile, a port the Service names that the server does not listen on, a
worker count that differs between the servers, the workers and the Job.

  /usr/bin/python3 tests/deploy/k8s_manifests_test.py --manifests=deploy/k8s \\
      --program=ps_server=build/server/ps_server --program=ps_worker=... ...

Every check is also run on a copy of the manifests with the mistake it is
for (BREAKAGES), so a check that stops catching its mistake fails the test.
"""
import argparse
import copy
import glob
import os
import re
import subprocess
import sys
import unittest

import yaml

from k8s_bundle import *  # noqa: F401,F403
from k8s_checks import *  # noqa: F401,F403

ARGS = None  # set in main()


# --- The tests -----------------------------------------------------------


class Fixture:
    """The manifests (a fresh copy each time) and what the programs say
    about themselves (asked once)."""
    bundle = None
    facts = None

    @classmethod
    def get(cls):
        if cls.bundle is None:
            facts = {
                "flags": {name: program_flags(path)
                          for name, path in ARGS.programs.items()},
                "libraries": library_packages(ARGS.programs.values()),
            }
            cls.bundle, cls.facts = load(ARGS.manifests), facts
        return copy.deepcopy(cls.bundle), cls.facts


class Manifests(unittest.TestCase):
    def test_consistent(self):
        bundle, facts = Fixture.get()
        self.assertEqual(all_problems(bundle, facts), [])


def server_args(bundle):
    return running(bundle, "StatefulSet", "ps_server")[1].spec["args"]


def worker_args(bundle):
    return running(bundle, "Job", "ps_worker")[1].spec["args"]


def replace_arg(args, name, value):
    i = next(i for i, a in enumerate(args) if split_flag(a)[0] == name)
    args[i] = f"--{name}={value}"


def edit_config(bundle, key, old, new):
    data = one(bundle, "ConfigMap")["data"]
    assert old in data[key], f"{old} is not in {key}"
    data[key] = data[key].replace(old, new)


def edit_dockerfile(bundle, old, new):
    assert old in bundle["dockerfile"], f"{old} is not in the Dockerfile"
    bundle["dockerfile"] = bundle["dockerfile"].replace(old, new)


def spec_of(bundle, kind):
    return one(bundle, kind)["spec"]


# Each mistake, and words of the problem it must add.
BREAKAGES = {
    "no apiVersion": (
        lambda b: one(b, "Service").pop("apiVersion"), "without apiVersion"),
    "a file kustomize leaves out": (
        lambda b: b["kustomization"]["resources"].remove("worker.yaml"),
        "worker.yaml is not in kustomization"),
    "selector mismatch": (
        lambda b: spec_of(b, "StatefulSet")["selector"]["matchLabels"].update(
            {"app.kubernetes.io/name": "other"}), "does not match"),
    "service not headless": (
        lambda b: spec_of(b, "Service").pop("clusterIP"), "not headless"),
    "serviceName wrong": (
        lambda b: spec_of(b, "StatefulSet").update(serviceName="ps"),
        "names no Service"),
    "a checkpoint claim per pod": (
        lambda b: spec_of(b, "StatefulSet").update(
            volumeClaimTemplates=[{"metadata": {"name": "c"}}]),
        "volumeClaimTemplates"),
    "checkpoint claim not shared": (
        lambda b: spec_of(b, "PersistentVolumeClaim").update(
            accessModes=["ReadWriteOnce"]), "not ReadWriteMany"),
    "checkpoint_dir moved, the script not": (
        lambda b: edit_config(b, "server.flags", "--checkpoint_dir=/var/lib/"
                              "ps/checkpoints", "--checkpoint_dir=/var/lib/"
                              "ps/checkpoints/x"), "does not look for"),
    "job not indexed": (
        lambda b: spec_of(b, "Job").pop("completionMode"), "not Indexed"),
    "completions off": (
        lambda b: spec_of(b, "Job").update(completions=4),
        "worker counts differ"),
    "the servers' worker count off": (
        lambda b: replace_arg(server_args(b), "num_workers", "2"),
        "worker counts differ"),
    "replicas off": (
        lambda b: spec_of(b, "StatefulSet").update(replicas=3),
        "but 3 replicas"),
    "port not the containerPort": (
        lambda b: replace_arg(server_args(b), "port", "7100"),
        "but containerPort control"),
    "service port off": (
        lambda b: spec_of(b, "Service")["ports"][1].update(port=7101),
        "Service port xfer"),
    "no readiness probe": (
        lambda b: running(b, "StatefulSet", "ps_server")[1].spec.pop(
            "readinessProbe"), "no tcpSocket probe"),
    "a server missing from --servers": (
        lambda b: replace_arg(worker_args(b), "servers",
                              "ps-server-0.ps-server:7000"),
        "ps_worker --servers="),
    "advertise not the pod's IP": (
        lambda b: replace_arg(server_args(b), "advertise_host", "0.0.0.0"),
        "is not the pod's IP"),
    "no metrics on the servers": (
        lambda b: server_args(b).remove("--metrics_port=9100"),
        "ps_server serves no metrics"),
    "metrics on every interface": (
        lambda b: replace_arg(server_args(b), "metrics_host", "0.0.0.0"),
        "the metrics host must be the pod's IP"),
    "metrics on loopback, out of Prometheus's reach": (
        lambda b: worker_args(b).remove("--metrics_host=$(POD_IP)"),
        "--metrics_host=None: the metrics host must be the pod's IP"),
    "metrics port not declared": (
        lambda b: replace_arg(worker_args(b), "metrics_port", "9200"),
        "--metrics_port=9200 is not a containerPort"),
    "undefined env var": (
        lambda b: server_args(b).append("--stats_every_secs=$(STATS)"),
        "$(STATS) is not defined"),
    "configmap missing": (
        lambda b: b["docs"].remove(next(
            x for x in b["docs"] if x[1]["kind"] == "ConfigMap")),
        "ConfigMap ps-config is not among"),
    "secret not generated": (
        lambda b: b["kustomization"].pop("secretGenerator"),
        "neither a document nor generated"),
    "secret readable by others": (
        lambda b: next(v for v in pod_spec(one(b, "StatefulSet"))["volumes"]
                       if "secret" in v)["secret"].update(defaultMode=0o444),
        "other users can read"),
    "flagfile not in the ConfigMap": (
        lambda b: replace_arg(server_args(b), "flagfile", "/etc/ps/x.flags"),
        "no key x.flags"),
    "unknown flag in args": (
        lambda b: server_args(b).append("--no_such_flag=1"),
        "has no flag --no_such_flag"),
    "unknown flag in a flagfile": (
        lambda b: edit_config(b, "worker.flags", "--epochs=", "--epoch="),
        "has no flag --epoch"),
    "program not copied": (
        lambda b: edit_dockerfile(b, "ps_worker", "ps_wrk"),
        "does not COPY"),
    "library not installed": (
        lambda b: edit_dockerfile(b, "librocksdb7.8", ""),
        "installs none of ['librocksdb7.8']"),
}


class OldPrograms(unittest.TestCase):
    """The flag check covers the flags the manifests rely on: a ps_server
    or ps_worker from before --metrics_host is refused."""

    def test_program_without_metrics_host(self):
        bundle, facts = Fixture.get()
        for prog in ("ps_server", "ps_worker"):
            with self.subTest(prog):
                old = copy.deepcopy(facts)
                old["flags"][prog].discard("metrics_host")
                self.assertTrue(any(
                    f"{prog} has no flag --metrics_host" in p
                    for p in all_problems(bundle, old)))


class BrokenManifests(unittest.TestCase):
    """Each mistake of BREAKAGES, made on a copy, is reported."""

    def test_each_mistake_is_caught(self):
        for what, (breakage, expected) in BREAKAGES.items():
            with self.subTest(what):
                bundle, facts = Fixture.get()
                before = set(all_problems(bundle, facts))
                breakage(bundle)
                new = [p for p in all_problems(bundle, facts)
                       if p not in before]
                self.assertTrue(any(expected in p for p in new),
                                f"no new problem says {expected!r}: {new}")


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifests", required=True,
                        help="the deploy/k8s folder")
    parser.add_argument("--program", action="append", default=[],
                        metavar="NAME=PATH",
                        help="a program the pods run, e.g. ps_server=build/"
                             "server/ps_server (once for each)")
    ARGS, rest = parser.parse_known_args()
    ARGS.programs = dict(p.split("=", 1) for p in ARGS.program)
    unittest.main(module=__name__, argv=[sys.argv[0]] + rest)


if __name__ == "__main__":
    main()
