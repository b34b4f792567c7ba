"""The checks of the Kubernetes deployment: each takes the bundle
(k8s_bundle.load) and returns its problems as lines of text; all_problems
runs them all."""
import os
import re

from k8s_bundle import *  # noqa: F401,F403  (the bundle's accessors)


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


def pod_ip_var(c, value):
    """Whether `value` is $(VAR) with VAR the pod's IP (an env var from
    fieldRef status.podIP) in container c."""
    m = re.fullmatch(r"\$\((\w+)\)", value or "")
    env = {e["name"]: e for e in c.spec.get("env", [])}
    return bool(m) and env.get(m.group(1), {}).get("valueFrom", {}).get(
        "fieldRef", {}).get("fieldPath") == "status.podIP"


def check_metrics_endpoints(bundle):
    """--metrics_port serves metrics to whoever reaches it, with no secret:
    it must listen on the pod's own IP (where a Prometheus in the cluster
    scrapes it), not on loopback (out of its reach) nor on every interface,
    and the port must be declared (service discovery finds it there).
    The servers and the workers serve them: a cluster nobody can watch
    is found out only when it fails."""
    problems = []
    for c in all_containers(bundle):
        port = c.flag("metrics_port")
        prog = os.path.basename(c.program())
        if port is None and prog in ("ps_server", "ps_worker"):
            problems.append(f"{c.name}: {prog} serves no metrics "
                            f"(--metrics_port)")
        if port is None or as_int(port) == -1:
            continue
        value = as_int(port)
        if not value:
            problems.append(f"{c.name}: --metrics_port={port} is not a "
                            f"fixed port")
            continue
        host = c.flag("metrics_host")
        if not pod_ip_var(c, host):
            problems.append(f"{c.name}: --metrics_port={value} with "
                            f"--metrics_host={host}: the metrics host must be "
                            f"the pod's IP ($(POD_IP), an env var from "
                            f"fieldRef status.podIP)")
        if not any(p.get("containerPort") == value
                   for p in c.spec.get("ports", [])):
            problems.append(f"{c.name}: --metrics_port={value} is not a "
                            f"containerPort of its pod")
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
          check_metrics_endpoints, check_env_references, check_references,
          check_dockerfile]


def all_problems(bundle, facts):
    problems = []
    for check in CHECKS:
        problems += check(bundle)
    return (problems + check_flags_exist(bundle, facts["flags"]) +
            check_image_libraries(bundle, facts["libraries"]))
