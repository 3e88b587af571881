"""deploy/kubernetes as shipped: each overlay renders with `kubectl kustomize`, every rendered
object validates offline against the Kubernetes schemas (npm kubernetes-models, pinned; an
unknown field is an error too), and each container's command, args and environment, with
the ConfigMap's config files, pass the real binary's --check-config, so that a manifest
cannot name a flag or a key the daemons do not have. Probes and scrape annotations must point
at the ports the config files open."""
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest
import yaml

from deploy_util import BIN, DEPLOY, ROOT, run

K8S = os.path.join(DEPLOY, "kubernetes")
OVERLAYS = ("cpu", "gpu")
# The schemas: npm kubernetes-models 5.1.0 (Kubernetes 1.3x objects), every package pinned
# by tests/deploy/npm/package-lock.json; installed with `npm ci` under .cache/ (ignored).
NPM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npm")
NODE_MODULES_PARENT = os.path.join(ROOT, ".cache", "npm-kubernetes-models")
# Kinds of CustomResourceDefinitions: no schema offline; checked by hand below.
CRD_GROUPS = ("monitoring.coreos.com/",)


def kubectl():
    path = shutil.which("kubectl")
    if not path:
        pytest.skip("kubectl is not installed (Debian: kubernetes-client)")
    return path


def render(target):
    r = run([kubectl(), "kustomize", target])
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def rendered():
    """{name: objects} for each overlay, and the cpu overlay with the ServiceMonitor
    component (through a kustomization of the test's own)."""
    out = {o: render(os.path.join(K8S, "overlays", o)) for o in OVERLAYS}
    return out


@pytest.fixture(scope="module")
def renders(tmp_path_factory):
    out = rendered()
    d = tmp_path_factory.mktemp("component")
    # Kustomize loads bases and components relative to the kustomization: link them in.
    os.symlink(os.path.join(K8S, "overlays"), d / "overlays")
    os.symlink(os.path.join(K8S, "base"), d / "base")
    os.symlink(os.path.join(K8S, "components"), d / "components")
    (d / "with-monitor").mkdir()
    (d / "with-monitor" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../overlays/cpu]\ncomponents: [../components/servicemonitor]\n")
    out["cpu+servicemonitor"] = render(str(d / "with-monitor"))
    return out


def test_overlays_render(renders):
    for name, objects in renders.items():
        kinds = sorted(o["kind"] for o in objects)
        for kind in ("ConfigMap", "DaemonSet", "NetworkPolicy", "PodDisruptionBudget", "Service",
                     "StatefulSet"):
            assert kind in kinds, f"{name}: no {kind}"
        for o in objects:
            if o["kind"] != "Namespace":
                assert o["metadata"].get("namespace") == "convoy", o["metadata"]
    assert "ServiceMonitor" in [o["kind"] for o in renders["cpu+servicemonitor"]]
    gpu = _one(renders["gpu"], "DaemonSet")
    assert "nvidia.com/gpu" in _container(gpu)["resources"]["limits"]
    assert "nvidia.com/gpu" not in json.dumps(_one(renders["cpu"], "DaemonSet"))


def _node_modules():
    modules = os.path.join(NODE_MODULES_PARENT, "node_modules")
    if os.path.exists(os.path.join(modules, "kubernetes-models", "package.json")):
        return modules
    if not shutil.which("npm") or not shutil.which("node"):
        pytest.skip("node/npm are not installed: no offline schema validation")
    os.makedirs(NODE_MODULES_PARENT, exist_ok=True)
    for f in ("package.json", "package-lock.json"):
        shutil.copy(os.path.join(NPM_DIR, f), NODE_MODULES_PARENT)
    try:
        r = run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_MODULES_PARENT, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("npm ci of kubernetes-models timed out (no registry?)")
    if r.returncode != 0:
        pytest.skip(f"npm ci (kubernetes-models) failed, no registry?: {r.stderr[-500:]}")
    return modules


def test_every_object_validates_against_the_schemas(renders):
    modules = _node_modules()
    for name, objects in renders.items():
        r = run(["node", os.path.join(os.path.dirname(__file__), "validate_k8s.mjs"), modules],
                input=json.dumps(objects))
        lines = r.stdout.splitlines()
        assert r.returncode == 0 and len(lines) == len(objects), f"{name}:\n{r.stdout}{r.stderr}"
        for line, o in zip(lines, objects):
            if o["apiVersion"].startswith(CRD_GROUPS):
                assert line.startswith("NOSCHEMA"), line
            else:
                assert line.startswith("OK "), f"{name}: {line}"


def test_validator_catches_a_typo(renders):
    """The validation can fail: a misspelt field and a wrong type are both refused."""
    modules = _node_modules()
    ds = json.loads(json.dumps(_one(renders["cpu"], "DaemonSet")))
    _container(ds)["imagePullPolicyy"] = "Always"
    sts = json.loads(json.dumps(_one(renders["cpu"], "StatefulSet")))
    sts["spec"]["replicas"] = "one"
    r = run(["node", os.path.join(os.path.dirname(__file__), "validate_k8s.mjs"), modules],
            input=json.dumps([ds, sts]))
    assert r.returncode == 1
    assert "imagePullPolicyy" in r.stdout and "replicas" in r.stdout, r.stdout


def _one(objects, kind):
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def _container(workload):
    return workload["spec"]["template"]["spec"]["containers"][0]


def _port(address):
    return int(address.rsplit(":", 1)[1])


def _check_config(objects, kind, tmp_path):
    """Runs the workload's container command + args + --check-config with the ConfigMap's
    files where the pod mounts them; paths of the image map to temp dirs and the build."""
    workload = _one(objects, kind)
    c = _container(workload)
    config = _one(objects, "ConfigMap")
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    # Not under pytest's tmp_path: that lies in a 0700 /tmp/pytest-of-USER, which a root
    # worker's ranks (run_as convoy) cannot pass, and --check-config rightly refuses.
    top = tempfile.mkdtemp(prefix="convoy-k8s-check-")
    os.chmod(top, 0o711)
    try:
        return _check_config_in(workload, c, config, mounts, type(tmp_path)(top) / kind)
    finally:
        shutil.rmtree(top)


def _check_config_in(workload, c, config, mounts, root):
    etc = root / mounts["config"].lstrip("/")
    etc.mkdir(parents=True)

    def remap(text):
        text = text.replace("/usr/bin/", BIN + "/")
        return re.sub(r"(/etc/convoy|/var/lib/)", lambda m: str(root) + m.group(1), text)
    for name, text in config["data"].items():
        (etc / name).write_text(remap(text))
    env = {"PATH": os.environ["PATH"]}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:  # the downward API
            field = e["valueFrom"]["fieldRef"]["fieldPath"]
            env[e["name"]] = {"spec.nodeName": "node-1", "status.hostIP": "10.1.2.3"}[field]
    for src in c.get("envFrom", []):
        # The Secret documented in deploy/README.md.
        assert src["secretRef"]["name"] == "convoy-join"
        env.update(CONVOY_JOIN_TOKEN="cvy_" + "0" * 40, CONVOY_CA_FINGERPRINT="SHA256:" + "ab" * 32)
    argv = [remap(a) for a in c["command"] + c.get("args", [])] + ["--check-config"]
    r = run(argv, env=env)
    assert r.returncode == 0 and "configuration OK" in r.stdout, \
        f"{' '.join(argv)}\n{r.stdout}{r.stderr}"
    return workload, yaml.safe_load(config["data"][os.path.basename(c["args"][-1])])


def test_coordinator_container_passes_check_config(renders, tmp_path):
    for name in OVERLAYS:
        sts, cfg = _check_config(renders[name], "StatefulSet", tmp_path / name)
        c = _container(sts)
        health = _port(cfg["health_listen"])
        assert c["readinessProbe"]["grpc"]["port"] == health
        assert c["livenessProbe"]["grpc"]["port"] == health
        annotations = sts["spec"]["template"]["metadata"]["annotations"]
        assert int(annotations["prometheus.io/port"]) == _port(cfg["metrics_listen"])
        ports = {p["containerPort"] for p in c["ports"]}
        assert {_port(cfg["listen"]), health, _port(cfg["metrics_listen"])} <= ports
        state = [v for v in sts["spec"]["volumeClaimTemplates"] if v["metadata"]["name"] == "state"]
        assert state and {"name": "state", "mountPath": cfg["state_dir"]} in c["volumeMounts"]


def test_worker_container_passes_check_config(renders, tmp_path):
    keys = run([os.path.join(BIN, "convoy-worker"), "--print-config-keys"]).stdout
    if "`metrics_listen`" not in keys:
        pytest.skip("convoy-worker has no --metrics-listen yet (branch `metrics`): the "
                    "ConfigMap's worker.yaml names it for the /readyz and /healthz probes")
    for name in OVERLAYS:
        ds, cfg = _check_config(renders[name], "DaemonSet", tmp_path / name)
        c = _container(ds)
        spec = ds["spec"]["template"]["spec"]
        assert spec["hostNetwork"] is True
        metrics = _port(cfg["metrics_listen"])
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": metrics}
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": metrics}
        annotations = ds["spec"]["template"]["metadata"]["annotations"]
        assert int(annotations["prometheus.io/port"]) == metrics
        # Long enough to stop every rank (kill_grace_ms) and report.
        assert spec["terminationGracePeriodSeconds"] * 1000 > cfg["kill_grace_ms"]


def test_readme_secret_commands_give_the_worker_what_it_reads():
    """deploy/README.md's `kubectl create secret generic convoy-join` puts keys in the worker's
    environment (envFrom): each must be a variable convoy-worker reads."""
    with open(os.path.join(DEPLOY, "README.md")) as f:
        text = f.read().replace("\\\n", " ")
    m = re.search(r"kubectl -n convoy create secret generic convoy-join ([^\n]*)", text)
    assert m, "deploy/README.md does not say how to make the convoy-join Secret"
    literals = re.findall(r"--from-literal=(\w+)=", m.group(1))
    assert literals, m.group(1)
    reads = set(re.findall(r"\(env (CONVOY_\w+)\)",
                           run([os.path.join(BIN, "convoy-worker"), "--print-config-keys"]).stdout))
    for name in literals:
        assert name in reads, f"the worker reads no {name} (it reads {sorted(reads)})"
