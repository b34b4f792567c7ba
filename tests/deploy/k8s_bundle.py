"""The Kubernetes deployment (deploy/k8s) as data: its YAML documents, the
containers they run and their flags, and what the programs say about
themselves (flags from --helpxml, packages of the libraries they link).
Read by k8s_checks.py and k8s_manifests_test.py."""
import glob
import os
import re
import subprocess
import yaml


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
