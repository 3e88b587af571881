"""deploy/kubernetes as shipped: each overlay renders with `kubectl kustomize`, every rendered
object validates offline against the Kubernetes schemas (npm kubernetes-models, pinned; an
unknown field is an error too), and each container's command, args and environment, with
the ConfigMap's config files, pass the real binary's --check-config, so that a manifest
cannot name a flag or a key the daemons do not have. Probes and scrape annotations must point
at the ports the config files open. The `ha` overlay's etcd members are started from their
rendered args (on loopback, with certificates from its etcd-certs.sh) and its coordinator's
--check-config reaches them; its store names exactly the members the etcd StatefulSet makes."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest
import yaml

from deploy_util import BIN, DEPLOY, ROOT, free_port, run

K8S = os.path.join(DEPLOY, "kubernetes")
OVERLAYS = ("cpu", "gpu", "ha")
HA = os.path.join(K8S, "overlays", "ha")
EXTERNAL_STORE = "etcd://etcd-a.example.net:2379,etcd-b.example.net:2379,etcd-c.example.net:2379"
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
    # The ha overlay on an etcd of one's own, as deploy/README.md says to write it.
    (d / "external-etcd").mkdir()
    with open(os.path.join(HA, "coordinator.yaml")) as f:
        (d / "external-etcd" / "coordinator.yaml").write_text(
            re.sub(r"(?m)^store: .*$", "store: " + EXTERNAL_STORE, f.read()))
    (d / "external-etcd" / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [../overlays/ha]\ncomponents: [../components/external-etcd]\n"
        "configMapGenerator:\n  - name: convoy-config\n    behavior: merge\n"
        "    files: [coordinator.yaml]\n")
    out["ha+external-etcd"] = render(str(d / "external-etcd"))
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


def _one(objects, kind, name=None):
    found = [o for o in objects
             if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, (kind, name)
    return found[0]


def _container(workload):
    return workload["spec"]["template"]["spec"]["containers"][0]


def _port(address):
    return int(address.rsplit(":", 1)[1])


def _check_config(objects, kind, tmp_path, name=None, hosts=None, secrets=None, then=None):
    """Runs the workload's init containers, then its container command + args +
    --check-config with the ConfigMap's files where the pod mounts them and the `secrets`
    ({Secret name: a directory of its files}) where it mounts those; paths of the image map to
    temp dirs and the build, and `hosts` ({"HOST:PORT": "HOST:PORT"}) to where the test runs
    them. `then(argv, env, remap)` runs while the files are there."""
    workload = _one(objects, kind, name)
    c = _container(workload)
    config = _one(objects, "ConfigMap")
    # Not under pytest's tmp_path: that lies in a 0700 /tmp/pytest-of-USER, which a root
    # worker's ranks (run_as convoy) cannot pass, and --check-config rightly refuses.
    top = tempfile.mkdtemp(prefix="convoy-k8s-check-")
    os.chmod(top, 0o711)
    try:
        return _check_config_in(workload, c, config, type(tmp_path)(top) / kind, hosts or {},
                                secrets or {}, then)
    finally:
        shutil.rmtree(top)


def _env(c, pod):
    """The container's environment as the kubelet makes it for the pod named `pod` (downward
    API, the Secrets the README documents)."""
    env = {"PATH": os.environ["PATH"]}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        else:  # the downward API
            field = e["valueFrom"]["fieldRef"]["fieldPath"]
            env[e["name"]] = {"spec.nodeName": "node-1", "status.hostIP": "10.1.2.3",
                              "metadata.name": pod}[field]
    for src in c.get("envFrom", []):
        # The Secret documented in deploy/README.md.
        assert src["secretRef"]["name"] == "convoy-join"
        env.update(CONVOY_JOIN_TOKEN="cvy_" + "0" * 40, CONVOY_CA_FINGERPRINT="SHA256:" + "ab" * 32)
    return env


def _expand(text, env):
    """Kubernetes' $(VAR) in command and args."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), text)


def _check_config_in(workload, c, config, root, hosts, secrets, then):
    spec = workload["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    pod = workload["metadata"]["name"] + "-0"  # the first pod of a StatefulSet

    def remap(text):
        text = text.replace("/usr/bin/", BIN + "/")
        for real, here in hosts.items():
            text = text.replace(real, here)
        return re.sub(r"(/etc/convoy|/var/lib/)", lambda m: str(root) + m.group(1), text)

    def mount(container):
        """The container's ConfigMap and Secret volumes, where it mounts them."""
        for m in container["volumeMounts"]:
            where = root / m["mountPath"].lstrip("/")
            source = volumes.get(m["name"], {})
            if "configMap" in source:
                assert source["configMap"]["name"] == config["metadata"]["name"]
                where.mkdir(parents=True, exist_ok=True)
                for name, text in config["data"].items():
                    (where / name).write_text(remap(text))
            elif "secret" in source:
                secret = source["secret"]["secretName"]
                assert secret in secrets, f"no files for the Secret {secret}"
                if not where.exists():
                    shutil.copytree(secrets[secret], where)
    for init in spec.get("initContainers", []):
        mount(init)
        env = _env(init, pod)
        argv = [remap(_expand(a, env)) for a in init["command"] + init.get("args", [])]
        r = run(argv, env=env)
        assert r.returncode == 0, f"init container {init['name']}: {argv}\n{r.stdout}{r.stderr}"
    mount(c)
    env = _env(c, pod)
    argv = [remap(_expand(a, env)) for a in c["command"] + c.get("args", [])]
    r = run(argv + ["--check-config"], env=env)
    assert r.returncode == 0 and "configuration OK" in r.stdout, \
        f"{' '.join(argv)} --check-config\n{r.stdout}{r.stderr}"
    if then:
        then(argv, env, remap)
    config_file = os.path.basename(c["args"][c["args"].index("--config") + 1])
    return workload, yaml.safe_load(config["data"][config_file]), r.stdout


def _check_coordinator(sts, cfg):
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


def test_coordinator_container_passes_check_config(renders, tmp_path):
    for name in OVERLAYS:
        if name == "ha":
            continue  # on etcd: test_ha_coordinator_passes_check_config_on_the_rendered_etcd
        sts, cfg, _ = _check_config(renders[name], "StatefulSet", tmp_path / name)
        _check_coordinator(sts, cfg)


def test_worker_container_passes_check_config(renders, tmp_path):
    keys = run([os.path.join(BIN, "convoy-worker"), "--print-config-keys"]).stdout
    if "`metrics_listen`" not in keys:
        pytest.skip("convoy-worker has no --metrics-listen yet (branch `metrics`): the "
                    "ConfigMap's worker.yaml names it for the /readyz and /healthz probes")
    for name in OVERLAYS:
        ds, cfg, _ = _check_config(renders[name], "DaemonSet", tmp_path / name)
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


# The `ha` overlay: three coordinators leading in turn on a three-member etcd of its own.

def _labels(workload):
    return workload["spec"]["template"]["metadata"]["labels"]


def _selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def _flags(container):
    """The container's --flag=value args as {flag: value}."""
    return dict(re.fullmatch(r"--([\w-]+)=(.*)", a).groups() for a in container["args"])


def test_ha_overlay_runs_three_coordinators_on_the_etcd_it_makes(renders):
    objects = renders["ha"]
    coord = _one(objects, "StatefulSet", "convoy-coordinator")
    etcd = _one(objects, "StatefulSet", "convoy-etcd")
    cfg = yaml.safe_load(_one(objects, "ConfigMap")["data"]["coordinator.yaml"])
    c, e = _container(coord), _container(etcd)
    _check_coordinator(coord, cfg)

    # Three coordinators, started together: followers are never ready, and an ordered start
    # or a rolling update would wait for them forever.
    assert coord["spec"]["replicas"] == 3
    assert coord["spec"]["podManagementPolicy"] == "Parallel"
    assert coord["spec"]["updateStrategy"]["type"] == "OnDelete"
    # Ready only while leading (the Service routes to the leader alone); alive otherwise.
    assert c["readinessProbe"]["grpc"] == {"port": _port(cfg["health_listen"]), "service": "leader"}
    assert c["livenessProbe"]["grpc"].get("service", "") == ""
    service = _one(objects, "Service", "convoy-coordinator")
    assert _selects({"matchLabels": service["spec"]["selector"]}, _labels(coord))
    assert not service["spec"].get("publishNotReadyAddresses")
    # Every name of that Service is in each coordinator's serving certificate.
    for name in ("convoy-coordinator", "convoy-coordinator.convoy", "convoy-coordinator.convoy.svc",
                 "convoy-coordinator.convoy.svc.cluster.local"):
        assert name in cfg["tls_san"], name

    # One coordinator and one etcd member per node.
    for sts in (coord, etcd):
        terms = (sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
                 ["requiredDuringSchedulingIgnoredDuringExecution"])
        assert any(t["topologyKey"] == "kubernetes.io/hostname"
                   and _selects(t["labelSelector"], _labels(sts)) for t in terms), sts["metadata"]

    def budget(sts):
        found = [o["spec"] for o in objects if o["kind"] == "PodDisruptionBudget"
                 and _selects(o["spec"]["selector"], _labels(sts))]
        assert len(found) == 1, sts["metadata"]["name"]
        return found[0]
    assert budget(coord).get("maxUnavailable") == 1
    assert budget(etcd).get("minAvailable") == 2

    # The store names exactly the members the etcd StatefulSet makes, by the names its
    # headless Service gives their pods (resolvable before they are ready: they need each
    # other to become ready).
    assert etcd["spec"]["replicas"] == 3
    headless = _one(objects, "Service", etcd["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert _selects({"matchLabels": headless["spec"]["selector"]}, _labels(etcd))
    assert not _selects({"matchLabels": headless["spec"]["selector"]}, _labels(coord))
    ports = {p["name"]: p["containerPort"] for p in e["ports"]}
    assert {(p["port"], p["targetPort"]) for p in headless["spec"]["ports"]} >= \
        {(ports["client"], "client"), (ports["peer"], "peer")}
    pods = [f"{etcd['metadata']['name']}-{i}" for i in range(etcd["spec"]["replicas"])]
    dns = {pod: f"{pod}.{headless['metadata']['name']}" for pod in pods}
    m = re.fullmatch(r"etcd://(.+)", cfg["store"])
    assert m, cfg["store"]
    assert sorted(m.group(1).split(",")) == sorted(f"{dns[pod]}:{ports['client']}" for pod in pods)

    # Each member is named after its pod, and --initial-cluster names each by its URL.
    flags = _flags(e)
    assert flags["name"] == "$(POD_NAME)"
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} \
        in e["env"]
    cluster = dict(member.split("=", 1) for member in flags["initial-cluster"].split(","))
    assert cluster == {pod: f"https://{dns[pod]}:{ports['peer']}" for pod in pods}
    for pod in pods:
        env = {"POD_NAME": pod}
        assert _expand(flags["initial-advertise-peer-urls"], env) == cluster[pod]
        client_url = f"https://{dns[pod]}:{ports['client']}"
        assert _expand(flags["advertise-client-urls"], env) == client_url
    assert flags["listen-client-urls"] == f"https://0.0.0.0:{ports['client']}"
    assert flags["listen-peer-urls"] == f"https://0.0.0.0:{ports['peer']}"
    assert flags["initial-cluster-state"] == "new"
    # Convoy's batches and metric histories (README "High availability").
    assert int(flags["max-request-bytes"]) >= 8388608
    # mTLS on both ports, and the coordinators hold a client certificate.
    assert flags["client-cert-auth"] == "true" and flags["peer-client-cert-auth"] == "true"
    assert all(cfg.get(k) for k in ("etcd_ca", "etcd_cert", "etcd_key"))
    # The probes use the plain-text metrics port, which serves nothing but /health, /metrics.
    assert flags["listen-metrics-urls"] == f"http://0.0.0.0:{ports['metrics']}"
    assert e["readinessProbe"]["httpGet"] == {"path": "/health", "port": ports["metrics"]}
    assert e["livenessProbe"]["httpGet"]["port"] == ports["metrics"]

    # Only coordinators reach the clients' port, only members the peers'.
    policies = [o for o in objects if o["kind"] == "NetworkPolicy"
                and _selects(o["spec"]["podSelector"], _labels(etcd))]
    assert len(policies) == 1
    assert policies[0]["spec"]["policyTypes"] == ["Ingress"]
    rules = policies[0]["spec"]["ingress"]
    assert all(r.get("from") and r.get("ports") for r in rules), rules

    def admitted(port):
        return [f for r in rules if any(p["port"] == port for p in r["ports"]) for f in r["from"]]
    for port, only in ((ports["client"], coord), (ports["peer"], etcd)):
        assert admitted(port), port
        for source in admitted(port):
            assert list(source) == ["podSelector"], (port, source)
            assert _selects(source["podSelector"], _labels(only)), (port, source)
    worker = _one(objects, "DaemonSet")
    assert not any(_selects(f["podSelector"], _labels(worker))
                   for f in admitted(ports["client"]) + admitted(ports["peer"]))


def test_ha_on_an_etcd_of_ones_own(renders):
    """components/external-etcd drops every object of the overlay's own etcd; the coordinators
    keep their client certificate and name the other members."""
    objects = renders["ha+external-etcd"]
    assert not [o["metadata"]["name"] for o in objects if "etcd" in o["metadata"]["name"]]
    cfg = yaml.safe_load(_one(objects, "ConfigMap")["data"]["coordinator.yaml"])
    assert cfg["store"] == EXTERNAL_STORE
    coord = _one(objects, "StatefulSet", "convoy-coordinator")
    assert coord["spec"]["replicas"] == 3
    assert "convoy-etcd-client" in _secret_files(objects)


def test_ha_pods_are_locked_down(renders):
    """The base's conventions hold for what the ha overlay adds: non-root pods, seccomp
    RuntimeDefault, read-only root file systems, no privilege escalation, no capabilities,
    no service account token."""
    for sts in (o for o in renders["ha"] if o["kind"] == "StatefulSet"):
        spec = sts["spec"]["template"]["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] > 0
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for c in spec.get("initContainers", []) + spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False, c["name"]
            assert sc["readOnlyRootFilesystem"] is True, c["name"]
            assert sc["capabilities"] == {"drop": ["ALL"]}, c["name"]
            assert "runAsUser" not in sc or sc["runAsUser"] > 0, c["name"]


def _secret_files(objects):
    """{Secret: {file names the pods read from it}}: each path under a Secret volume's mount
    named in a container's command, args or in the ConfigMap's config files."""
    texts = [json.dumps(d) for d in _one(objects, "ConfigMap")["data"].values()]
    out = {}
    for w in objects:
        if w["kind"] not in ("StatefulSet", "DaemonSet"):
            continue
        spec = w["spec"]["template"]["spec"]
        secrets = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", [])
                   if "secret" in v}
        for c in spec.get("initContainers", []) + spec["containers"]:
            said = " ".join(texts + c["command"] + c.get("args", []))
            for m in c.get("volumeMounts", []):
                if m["name"] in secrets:
                    files = set(re.findall(re.escape(m["mountPath"]) + r"/([\w.-]+)", said))
                    assert files, f"{c['name']} reads nothing from {m['mountPath']}"
                    out.setdefault(secrets[m["name"]], set()).update(files)
    return out


def test_readme_makes_the_ha_secrets_the_pods_read(renders):
    """deploy/README.md makes every Secret the ha overlay mounts, with each file its pods read;
    the files come from etcd-certs.sh and `convoy-coordinator init`."""
    with open(os.path.join(DEPLOY, "README.md")) as f:
        text = f.read().replace("\\\n", " ")
    for secret, files in _secret_files(renders["ha"]).items():
        m = re.search(r"kubectl -n convoy create secret generic " + re.escape(secret)
                      + r" ([^\n]*)", text)
        assert m, f"deploy/README.md does not say how to make the Secret {secret}"
        keys = set(re.findall(r"--from-file=([\w.-]+)=", m.group(1)))
        assert files <= keys, f"{secret}: the pods read {sorted(files)}, the README makes {keys}"


@pytest.fixture(scope="module")
def ha_etcd(renders):
    """The ha overlay's etcd members started from the rendered StatefulSet's command line
    ($(POD_NAME) expanded) on loopback ports, with the certificates of its etcd-certs.sh, until
    each answers its readiness probe. {"hosts": {"POD.SERVICE:PORT": "127.0.0.1:PORT"},
    "tls": the certificates' directory}."""
    etcd_bin = shutil.which("etcd")
    if not etcd_bin:
        pytest.skip("etcd is not installed (Debian's etcd-server)")
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed (etcd-certs.sh needs it)")
    etcd = _one(renders["ha"], "StatefulSet", "convoy-etcd")
    e = _container(etcd)
    service = etcd["spec"]["serviceName"]
    volumes = {v["name"]: v for v in etcd["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in e["volumeMounts"]}
    pods = [f"{etcd['metadata']['name']}-{i}" for i in range(etcd["spec"]["replicas"])]
    ports = [{p["containerPort"]: free_port() for p in e["ports"]} for _ in pods]
    hosts = {f"{pod}.{service}:{port}": f"127.0.0.1:{ports[i][port]}"
             for i, pod in enumerate(pods) for port in ports[i]}
    top = tempfile.mkdtemp(prefix="convoy-k8s-etcd-")
    tls = os.path.join(top, "tls")
    procs = []
    try:
        r = run(["sh", os.path.join(HA, "etcd-certs.sh"), tls])
        assert r.returncode == 0, r.stdout + r.stderr
        for i, pod in enumerate(pods):
            def remap(arg):
                arg = _expand(arg, {"POD_NAME": pod})
                for real, here in hosts.items():
                    arg = arg.replace(real, here)
                arg = re.sub(r"0\.0\.0\.0:(\d+)",
                             lambda m: f"127.0.0.1:{ports[i][int(m.group(1))]}", arg)
                for path, volume in mounts.items():
                    here = tls if "secret" in volumes.get(volume, {}) else os.path.join(top, pod)
                    arg = arg.replace(path + "/", here + "/")
                return arg
            log = open(os.path.join(top, pod + ".log"), "ab")
            procs.append(subprocess.Popen(
                [etcd_bin] + [remap(a) for a in e["args"]], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
        probe = e["readinessProbe"]["httpGet"]

        def ready(i):
            url = f"http://127.0.0.1:{ports[i][probe['port']]}{probe['path']}"
            try:
                with urllib.request.urlopen(url, timeout=2) as f:
                    return json.load(f).get("health") == "true"
            except OSError:
                return False
        deadline = time.time() + 60
        while not all(ready(i) for i in range(len(pods))):
            assert all(p.poll() is None for p in procs), _logs(top, pods)
            assert time.time() < deadline, "etcd members not ready\n" + _logs(top, pods)
            time.sleep(0.3)
        yield {"hosts": hosts, "tls": tls}
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        shutil.rmtree(top)


def _logs(top, pods):
    out = ""
    for pod in pods:
        with open(os.path.join(top, pod + ".log"), errors="replace") as f:
            out += f"--- {pod}\n" + "".join(f.readlines()[-15:])
    return out


def test_ha_coordinator_passes_check_config_on_the_rendered_etcd(renders, ha_etcd, tmp_path):
    """The coordinator pod as rendered (its init container copying the cluster CA, its
    command line, the ConfigMap, the Secrets as deploy/README.md makes them) on the etcd members
    as rendered: --check-config reaches all three through mTLS; started, it leads (its API
    port opens), and a worker token is made in etcd from the pod, as the README does."""
    coordinator = os.path.join(BIN, "convoy-coordinator")
    made = tmp_path / "init"
    r = run([coordinator, "init", "--state-dir", str(made)])
    assert r.returncode == 0, r.stderr
    fingerprint = r.stdout.strip().splitlines()[-1]
    ca = tmp_path / "convoy-cluster-ca"
    ca.mkdir()
    for name in ("ca.crt", "ca.key"):
        shutil.copy(made / "tls" / name, ca / name)
    client = tmp_path / "convoy-etcd-client"
    client.mkdir()
    for name in ("ca.crt", "client.crt", "client.key"):
        shutil.copy(os.path.join(ha_etcd["tls"], name), client / name)
    # The pod's ports, free ones here.
    cfg = yaml.safe_load(_one(renders["ha"], "ConfigMap")["data"]["coordinator.yaml"])
    ports = {cfg[k]: f"127.0.0.1:{free_port()}"
             for k in ("listen", "health_listen", "metrics_listen")}
    tokens = []

    def lead_and_make_a_token(argv, env, remap):
        with open(tmp_path / "coordinator.log", "wb") as log:
            p = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            api = ports[cfg["listen"]].rsplit(":", 1)
            deadline = time.time() + 60
            while True:
                assert p.poll() is None, (tmp_path / "coordinator.log").read_text()
                assert time.time() < deadline, (tmp_path / "coordinator.log").read_text()
                try:
                    socket.create_connection((api[0], int(api[1])), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.3)
            r = run(argv + ["token", "create", "--role", "worker", "--ttl", "1h"], env=env)
            assert r.returncode == 0, r.stdout + r.stderr
            tokens.append(r.stdout.strip())
        finally:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
    sts, cfg, out = _check_config(
        renders["ha"], "StatefulSet", tmp_path, name="convoy-coordinator",
        hosts={**ha_etcd["hosts"], **ports},
        secrets={"convoy-cluster-ca": str(ca), "convoy-etcd-client": str(client)},
        then=lead_and_make_a_token)
    assert "etcd: 3 of 3 member(s) reached" in out, out
    # The CA the init container copied is the one `init` made (and printed).
    assert fingerprint.startswith("SHA256:") and fingerprint in out, out
    assert tokens and tokens[0].startswith("cvy_"), tokens
