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

ARGS = None  # set in main()


def load(manifests):
    """The manifests: {'docs': [(file, doc)], 'files': [file],
    'kustomization': doc, 'dockerfile': text}."""
    bundle = {"docs": [], "files": [], "kustomization": None}
    for path in sorted(glob.glob(os.path.join(manifests, "*.yaml"))):
        name = os.path.basename(path)
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if doc is None:
                    continue
                if doc.get("kind") == "Kustomization":
                    bundle["kustomization"] = doc
                else:
                    bundle["docs"].append((name, doc))
        if name != "kustomization.yaml":
            bundle["files"].append(name)
    with open(os.path.join(manifests, "Dockerfile")) as f:
        bundle["dockerfile"] = f.read()
    return bundle


def program_flags(path):
    """The flag names a gflags program defines, from its --helpxml."""
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is not built (ninja -C build "
                           f"{os.path.basename(path)})")
    # gflags exits 1 after the help, a sanitizer build may exit otherwise:
    # the XML on stdout is what counts.
    run = subprocess.run([path, "--helpxml"], capture_output=True, text=True,
                         timeout=30)
    names = set(re.findall(r"<name>([A-Za-z0-9_]+)</name>", run.stdout))
    if "flagfile" not in names:
        raise RuntimeError(f"{path} --helpxml listed no flags: {run.stderr}")
    return names


def library_packages(paths):
    """{shared library the programs link: the Debian packages holding it}."""
    libs = set()
    for path in paths:
        out = subprocess.run(["readelf", "-d", path], capture_output=True,
                             text=True, check=True).stdout
        libs |= set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]",
                               out))
    # A sanitizer build's runtimes: never part of an image.
    libs = {lib for lib in libs if not re.match(r"lib(a|ub|t|l)san", lib)}
    out = subprocess.run(["dpkg-query", "-S"] +
                         [f"*/{lib}" for lib in sorted(libs)],
                         capture_output=True, text=True).stdout
    found = {lib: set() for lib in libs}
    for line in out.splitlines():
        packages, _, path = line.partition(": ")
        lib = os.path.basename(path)
        if lib in found:
            found[lib] |= {p.split(":")[0] for p in packages.split(", ")}
    return found


# --- Reading the documents ----------------------------------------------


def docs_of(bundle, kind):
    return [d for _, d in bundle["docs"] if d.get("kind") == kind]


def one(bundle, kind):
    found = docs_of(bundle, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def named(bundle, kind, name):
    return next((d for d in docs_of(bundle, kind)
                 if d["metadata"]["name"] == name), None)


def workloads(bundle):
    return [d for _, d in bundle["docs"]
            if d.get("kind") in ("StatefulSet", "Job")]


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def split_flag(arg):
    """'--name=value' -> (name, value); '--name' -> (name, None)."""
    body = arg.lstrip("-")
    name, eq, value = body.partition("=")
    return name, (value if eq else None)


def secrets(bundle):
    """{name: its keys} of the Secret documents and kustomize's generators."""
    out = {d["metadata"]["name"]: set(d.get("data", {})) |
           set(d.get("stringData", {})) for d in docs_of(bundle, "Secret")}
    for g in (bundle["kustomization"] or {}).get("secretGenerator", []):
        keys = {f.split("=", 1)[0] if "=" in f else os.path.basename(f)
                for f in g.get("files", [])}
        keys |= {lit.split("=", 1)[0] for lit in g.get("literals", [])}
        out[g["name"]] = keys
    return out


class Container:
    """A container with the pod it runs in (its volumes, its flagfiles)."""

    def __init__(self, bundle, workload, spec):
        self.bundle, self.workload, self.spec = bundle, workload, spec
        self.pod = pod_spec(workload)
        self.name = spec["name"]

    def script(self):
        """The script of `sh -c SCRIPT NAME ARGS...`, else None."""
        cmd = self.spec.get("command", [])
        if len(cmd) >= 3 and cmd[0] in ("/bin/sh", "/bin/bash") and \
                cmd[1] == "-c":
            return cmd[2]
        return None

    def program(self):
        """The binary it runs: command[0], or what its script execs."""
        text = self.script()
        if text is None:
            return self.spec["command"][0]
        m = re.search(r"\bexec\s+(\S+)", text)
        assert m, f"{self.name}: its script execs no program"
        return m.group(1)

    def flags(self):
        """[(name, value or None, where)] from the args, the flagfiles they
        name and the flags the script adds (names only)."""
        out = []
        for arg in self.spec.get("args", []):
            if not arg.startswith("-"):
                continue
            name, value = split_flag(arg)
            out.append((name, value, f"{self.name} args"))
            text = self.config_file(value) if name == "flagfile" else None
            for line in (text or "").splitlines():
                line = line.strip()
                if line.startswith("-"):
                    out.append(split_flag(line) + (value,))
        for m in re.finditer(r"(?<![\w-])--([a-z][a-z0-9_]*)",
                             self.script() or ""):
            out.append((m.group(1), None, f"{self.name} script"))
        return out

    def flag(self, name):
        """The flag's last value (gflags keeps the last); None if unset."""
        values = [v for n, v, _ in self.flags() if n == name and v is not None]
        return values[-1] if values else None

    def volume_at(self, path):
        """(the volume, the path inside it) of an absolute path."""
        best = None
        for m in self.spec.get("volumeMounts", []):
            mp = m["mountPath"].rstrip("/")
            if (path == mp or path.startswith(mp + "/")) and (
                    best is None or len(mp) > len(best[0])):
                best = (mp, m["name"])
        if best is None:
            return None, None
        volume = next((v for v in self.pod.get("volumes", [])
                       if v["name"] == best[1]), None)
        return volume, os.path.relpath(path, best[0])

    def config_file(self, path):
        """The text of a file in one of its ConfigMap volumes, else None."""
        volume, rel = self.volume_at(path)
        if volume is None or "configMap" not in volume:
            return None
        cm = named(self.bundle, "ConfigMap", volume["configMap"]["name"])
        return (cm or {}).get("data", {}).get(rel)

    def port(self, ref):
        """A port given as a number or as the name of a container port."""
        if isinstance(ref, int):
            return ref
        return next((p["containerPort"] for p in self.spec.get("ports", [])
                     if p.get("name") == ref), None)


def all_containers(bundle):
    return [Container(bundle, w, c) for w in workloads(bundle)
            for c in pod_spec(w).get("initContainers", []) +
            pod_spec(w).get("containers", [])]


def running(bundle, kind, prog):
    """The workload of `kind` and its container that runs `prog`."""
    w = one(bundle, kind)
    c = next(c for c in all_containers(bundle)
             if c.workload is w and os.path.basename(c.program()) == prog)
    return w, c


def as_int(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


# --- The checks: each returns a list of problems -------------------------


def check_required_fields(bundle):
    problems = []
    for name, d in bundle["docs"]:
        for field in ("apiVersion", "kind"):
            if not d.get(field):
                problems.append(f"{name}: a document without {field}")
        if not (d.get("metadata") or {}).get("name"):
            problems.append(f"{name}: a {d.get('kind')} without metadata.name")
    return problems


def check_kustomization(bundle):
    """apply -k and apply -f see the same documents."""
    k = bundle["kustomization"]
    if k is None:
        return ["no kustomization.yaml (it makes the cluster secret)"]
    listed, on_disk = set(k.get("resources", [])), set(bundle["files"])
    return ([f"kustomization.yaml lists {r}, which does not exist"
             for r in sorted(listed - on_disk)] +
            [f"{f} is not in kustomization.yaml's resources"
             for f in sorted(on_disk - listed)])


def check_labels(bundle):
    problems = []
    for w in workloads(bundle):
        labels = w["spec"]["template"].get("metadata", {}).get("labels", {})
        selector = w["spec"].get("selector", {}).get("matchLabels")
        if w["kind"] == "StatefulSet" and not selector:
            problems.append("the StatefulSet has no selector.matchLabels")
        for k, v in (selector or {}).items():
            if labels.get(k) != v:
                problems.append(f"{w['kind']} selector {k}={v} does not "
                                f"match its pod template's labels")
    return problems


def check_headless_service(bundle):
    sts = one(bundle, "StatefulSet")
    svc = named(bundle, "Service", sts["spec"].get("serviceName"))
    if svc is None:
        return [f"StatefulSet serviceName {sts['spec'].get('serviceName')!r} "
                f"names no Service"]
    problems = []
    if svc["spec"].get("clusterIP") != "None":
        problems.append("the servers' Service is not headless (clusterIP: "
                        "None): the pods get no DNS names of their own")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    for k, v in svc["spec"].get("selector", {}).items():
        if labels.get(k) != v:
            problems.append(f"Service selector {k}={v} selects no server pod")
    return problems


def check_checkpoint_volume(bundle):
    """One folder for all servers: shard 0 commits a checkpoint once every
    shard's part is in it, and the servers find each other there. A claim
    per pod (volumeClaimTemplates) breaks both."""
    sts, server = running(bundle, "StatefulSet", "ps_server")
    problems = []
    if sts["spec"].get("volumeClaimTemplates"):
        problems.append("volumeClaimTemplates give each server its own "
                        "checkpoint folder; the shards must share one")
    ckpt = server.flag("checkpoint_dir")
    if not ckpt:
        return problems + ["ps_server has no --checkpoint_dir"]
    # The script restores when it finds a checkpoint there.
    if f"{ckpt}/ckpt-*/MANIFEST" not in (server.script() or ""):
        problems.append(f"the server's script does not look for "
                        f"checkpoints in --checkpoint_dir={ckpt}")
    volume, _ = server.volume_at(ckpt)
    if volume is None or "persistentVolumeClaim" not in volume:
        return problems + [f"--checkpoint_dir={ckpt} is on no "
                           f"persistentVolumeClaim"]
    claim = named(bundle, "PersistentVolumeClaim",
                  volume["persistentVolumeClaim"]["claimName"])
    if claim is None:
        return problems  # check_references says so
    if (sts["spec"].get("replicas", 1) > 1 and
            "ReadWriteMany" not in claim["spec"].get("accessModes", [])):
        problems.append(f"claim {claim['metadata']['name']} is not "
                        f"ReadWriteMany: servers on other nodes cannot "
                        f"mount it")
    return problems


def check_job(bundle):
    _, server = running(bundle, "StatefulSet", "ps_server")
    job, worker = running(bundle, "Job", "ps_worker")
    problems = []
    if job["spec"].get("completionMode") != "Indexed":
        problems.append("the workers' Job is not Indexed: the pods get no "
                        "JOB_COMPLETION_INDEX for --worker_id")
    counts = {"completions": job["spec"].get("completions"),
              "parallelism": job["spec"].get("parallelism"),
              "ps_worker --num_workers": as_int(worker.flag("num_workers")),
              "ps_server --num_workers": as_int(server.flag("num_workers"))}
    if len(set(counts.values())) != 1:
        problems.append(f"the worker counts differ: {counts}")
    if worker.flag("worker_id") != "$(JOB_COMPLETION_INDEX)":
        problems.append("ps_worker --worker_id is not $(JOB_COMPLETION_INDEX)")
    return problems


def check_servers_and_ports(bundle):
    sts, server = running(bundle, "StatefulSet", "ps_server")
    _, worker = running(bundle, "Job", "ps_worker")
    problems = []
    replicas = sts["spec"].get("replicas", 1)
    shards = as_int(server.flag("num_shards"))
    if shards != replicas:
        problems.append(f"--num_shards={shards} but {replicas} replicas")
    svc = named(bundle, "Service", sts["spec"].get("serviceName"))
    if svc is None:
        return problems  # check_headless_service says so
    for flag, port_name in (("port", "control"), ("xfer_port", "xfer")):
        value = as_int(server.flag(flag))
        if not value:
            problems.append(f"ps_server --{flag} is not a fixed port")
            continue
        if server.port(port_name) != value:
            problems.append(f"--{flag}={value} but containerPort "
                            f"{port_name} is {server.port(port_name)}")
        sport = next((p for p in svc["spec"].get("ports", [])
                      if p.get("name") == port_name), None)
        if sport is None or sport["port"] != value or server.port(
                sport.get("targetPort", sport["port"])) != value:
            problems.append(f"Service port {port_name} is not --{flag}="
                            f"{value}")
    control = as_int(server.flag("port"))
    probe = server.spec.get("readinessProbe", {}).get("tcpSocket")
    if not probe or server.port(probe.get("port")) != control:
        problems.append("the servers' readiness is no tcpSocket probe of "
                        "the control port (--port)")
    # In shard order: ps-server-<k> runs shard k (--shard_id from its name).
    want = ",".join(f"{sts['metadata']['name']}-{k}.{svc['metadata']['name']}"
                    f":{control}" for k in range(replicas))
    if worker.flag("servers") != want:
        problems.append(f"ps_worker --servers={worker.flag('servers')}, the "
                        f"servers are {want}")
    return problems


def check_listen_and_advertise(bundle):
    _, server = running(bundle, "StatefulSet", "ps_server")
    problems = []
    if server.flag("listen_host") != "0.0.0.0":
        problems.append("ps_server does not listen on 0.0.0.0: other pods "
                        "cannot reach it")
    m = re.fullmatch(r"\$\((\w+)\)", server.flag("advertise_host") or "")
    env = {e["name"]: e for e in server.spec.get("env", [])}
    if not m or env.get(m.group(1), {}).get("valueFrom", {}).get(
            "fieldRef", {}).get("fieldPath") != "status.podIP":
        problems.append("ps_server --advertise_host is not the pod's IP "
                        "(an env var from fieldRef status.podIP)")
    return problems


def check_env_references(bundle):
    """$(VAR) in command and args: kubelet passes an undefined one on as
    it is."""
    problems = []
    for c in all_containers(bundle):
        defined = {e["name"] for e in c.spec.get("env", [])}
        if c.workload["kind"] == "Job" and \
                c.workload["spec"].get("completionMode") == "Indexed":
            defined.add("JOB_COMPLETION_INDEX")  # the Job controller's
        for arg in c.spec.get("command", []) + c.spec.get("args", []):
            for var in re.findall(r"\$\((\w+)\)", arg):
                if var not in defined:
                    problems.append(f"{c.name}: $({var}) is not defined in "
                                    f"its env")
    return problems


def volume_keys(bundle, volume):
    """The file names in a ConfigMap or Secret volume; None for others."""
    if "configMap" in volume:
        cm = named(bundle, "ConfigMap", volume["configMap"]["name"])
        return set((cm or {}).get("data", {}))
    if "secret" in volume:
        return secrets(bundle).get(volume["secret"]["secretName"], set())
    return None


def check_references(bundle):
    """Every ConfigMap, Secret and claim a pod names exists, and every file
    a flag names in a ConfigMap or Secret volume is one of its keys."""
    problems = []
    for w in workloads(bundle):
        for v in pod_spec(w).get("volumes", []):
            if "configMap" in v and named(bundle, "ConfigMap",
                                          v["configMap"]["name"]) is None:
                problems.append(f"ConfigMap {v['configMap']['name']} is not "
                                f"among the documents")
            if "secret" in v:
                if v["secret"]["secretName"] not in secrets(bundle):
                    problems.append(f"Secret {v['secret']['secretName']} is "
                                    f"neither a document nor generated")
                mode = v["secret"].get("defaultMode", 0o644)
                if mode & 0o007 or not mode & 0o400:
                    problems.append(f"secret volume {v['name']}: mode "
                                    f"{mode:o}; the programs refuse a "
                                    f"secret other users can read")
            if "persistentVolumeClaim" in v:
                claim = v["persistentVolumeClaim"]["claimName"]
                if named(bundle, "PersistentVolumeClaim", claim) is None:
                    problems.append(f"claim {claim} is not among the "
                                    f"documents")
    for c in all_containers(bundle):
        for name, value, where in c.flags():
            if not value or not value.startswith("/"):
                continue
            volume, rel = c.volume_at(value)
            held = volume_keys(bundle, volume) if volume else None
            if held is not None and rel not in held:
                problems.append(f"{where}: --{name}={value}: no key {rel} in "
                                f"volume {volume['name']}")
    return problems


def check_flags_exist(bundle, flags):
    """Every flag exists in its program: gflags ignores an unknown name in a
    flagfile, so a typo there would go unnoticed."""
    problems = []
    for c in all_containers(bundle):
        prog = os.path.basename(c.program())
        if prog not in flags:
            problems.append(f"{c.name} runs {prog}, which the test was not "
                            f"given (--program)")
            continue
        for name, _, where in c.flags():
            if name not in flags[prog] and not (
                    name.startswith("no") and name[2:] in flags[prog]):
                problems.append(f"{where}: {prog} has no flag --{name}")
    return problems


def dockerfile_lines(text):
    """The instructions, one a line (continuation lines joined)."""
    return re.sub(r"\\\n", " ", text).splitlines()


def check_dockerfile(bundle):
    """The image holds every program the pods run, where they run it."""
    lines = dockerfile_lines(bundle["dockerfile"])
    problems = []
    if not any(re.match(r"FROM\s+debian:12\b", line) for line in lines):
        problems.append("the Dockerfile is not FROM debian:12 (the programs "
                        "are built on Debian 12)")
    copied = set()
    for line in lines:
        if line.startswith("COPY "):
            parts = [p for p in line.split()[1:] if not p.startswith("--")]
            dest = parts[-1]
            copied |= {os.path.join(dest, os.path.basename(src))
                       if dest.endswith("/") else dest for src in parts[:-1]}
    images = set()
    for c in all_containers(bundle):
        images.add(c.spec.get("image"))
        if c.program() not in copied:
            problems.append(f"{c.name} runs {c.program()}, which the "
                            f"Dockerfile does not COPY")
    if len(images) != 1:
        problems.append(f"the pods run different images {sorted(images)}; "
                        f"the Dockerfile builds one")
    return problems


# In debian:12 itself (apt and dpkg need them).
BASE_IMAGE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}


def check_image_libraries(bundle, libraries):
    """Every library the programs link is in the image: in the base image
    or in a package the Dockerfile installs."""
    have = set(BASE_IMAGE_PACKAGES)
    for line in dockerfile_lines(bundle["dockerfile"]):
        for m in re.finditer(r"apt-get install((?:\s+[^&;\s]+)+)", line):
            have |= {p for p in m.group(1).split() if not p.startswith("-")}
    problems = []
    for lib, packages in sorted(libraries.items()):
        if not packages:
            problems.append(f"no Debian package holds {lib}: the image "
                            f"cannot install it")
        elif not packages & have:
            problems.append(f"the programs link {lib}, but the Dockerfile "
                            f"installs none of {sorted(packages)}")
    return problems


CHECKS = [check_required_fields, check_kustomization, check_labels,
          check_headless_service, check_checkpoint_volume, check_job,
          check_servers_and_ports, check_listen_and_advertise,
          check_env_references, check_references, check_dockerfile]


def all_problems(bundle, facts):
    problems = []
    for check in CHECKS:
        problems += check(bundle)
    return (problems + check_flags_exist(bundle, facts["flags"]) +
            check_image_libraries(bundle, facts["libraries"]))


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
