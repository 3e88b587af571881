"""A real Prometheus (Debian's `prometheus`) scrapes a secure cluster's coordinator and both
workers while a 2-rank job trains; then every PromQL expression the project ships must
return at least one series through Prometheus's HTTP API, so no dashboard panel, template
variable, annotation, recording rule or alert can name a metric that does not exist.

How each kind of expression is checked (over the whole run, with /api/v1/query_range, so a
series that existed only while the ranks ran counts):
  - dashboard panels and recording rules: the expression as written ($job_id and $worker
    replaced by the job and a worker of the run);
  - template variables `label_values(METRIC, LABEL)`: METRIC must have series with LABEL;
  - the annotation and the alerts: an alert's condition is normally false in a healthy run,
    so the expression itself returns nothing; instead every metric selector inside it (e.g.
    `convoy_job_step_skew`, `up{job="convoy-coordinator"}`, a recording rule's name) is
    evaluated and must return a series, and where the expression ends in a comparison with a
    number (`EXPR > 100`), EXPR without it must return a series too.
GPU panels are required only when a worker exports GPU series (NVML present).
"""
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import yaml

from cluster import Cluster, free_port, trainer_spec, wait_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RULES = [os.path.join(ROOT, "deploy/prometheus/rules", f)
         for f in ("convoy-recording.yml", "convoy-alerts.yml")]
DASHBOARD = os.path.join(ROOT, "deploy/grafana/dashboards/convoy.json")
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


class MetricsCluster(Cluster):
    """The e2e cluster with every worker's --metrics-listen on a free port."""

    def __init__(self, **kwargs):
        self.worker_metrics = {}
        super().__init__(**kwargs)

    def start_worker(self, name, slots=1, extra=()):
        port = self.worker_metrics.setdefault(name, free_port())
        return super().start_worker(name, slots, [*extra, "--metrics-listen",
                                                  f"127.0.0.1:{port}"])


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def get_status(url):
    try:
        return http_get(url)[0]
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


class Prom:
    def __init__(self, workdir, targets):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": RULES,
            "scrape_configs": [
                {"job_name": "convoy-coordinator",
                 "static_configs": [{"targets": [targets["coordinator"]]}]},
                {"job_name": "convoy-worker",
                 "static_configs": [{"targets": targets["workers"]}]},
            ],
        }
        path = os.path.join(workdir, "prometheus.yml")
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        self.log = open(os.path.join(workdir, "prometheus.log"), "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={path}",
             f"--storage.tsdb.path={os.path.join(workdir, 'tsdb')}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: get_status(self.url + "/-/ready") == 200, 30, "Prometheus ready")

    def api(self, path, **params):
        status, body = http_get(f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        out = json.loads(body)
        assert out["status"] == "success", out
        return out["data"]

    def range_series(self, expr, start, end):
        return self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}",
                        step="1")["result"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


SELECTOR = re.compile(r'(?<![\w:"])((?:convoy[_:]|job_id:|cause:|method:|worker_job_id_rank:|up\b)'
                      r'[A-Za-z0-9_:]*)(\{[^}]*\})?')
TRAILING_COMPARISON = re.compile(r'^(.*?)\s*(>=|<=|==|!=|>|<)\s*-?[0-9.]+\s*$', re.S)
LABEL_VALUES = re.compile(r'^label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*(\w+)\s*\)$')


def selectors(expr):
    """The metric selectors in `expr`: names with their {matchers}, excluding label names
    and the function names that share a prefix (none do here)."""
    found = []
    for m in SELECTOR.finditer(expr):
        name, matchers = m.group(1), m.group(2) or ""
        if name in ("up",) or ":" in name or name.startswith("convoy_"):
            found.append(name + matchers)
    return sorted(set(found))


def dashboard_checks(dashboard, subst):
    """(what, kind, expression) for every PromQL thing in the dashboard."""
    def fill(expr):
        for k, v in subst.items():
            expr = expr.replace(k, v)
        return expr
    checks = []
    for p in dashboard["panels"]:
        for t in p.get("targets", []):
            checks.append((f"panel '{p['title']}' {t['refId']}", "full", fill(t["expr"])))
    for v in dashboard["templating"]["list"]:
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = LABEL_VALUES.match(q)
        assert m, f"variable {v['name']}: not label_values(METRIC, LABEL): {q}"
        checks.append((f"variable {v['name']}", "label", (m.group(1), m.group(2))))
    for a in dashboard["annotations"]["list"]:
        if "expr" in a:
            checks.append((f"annotation '{a['name']}'", "alert", fill(a["expr"])))
    return checks


def rule_checks():
    checks = []
    for path in RULES:
        with open(path) as f:
            doc = yaml.safe_load(f)
        for group in doc["groups"]:
            for rule in group["rules"]:
                if "record" in rule:
                    checks.append((f"recording rule {rule['record']}", "full", rule["expr"]))
                    checks.append((f"recorded series {rule['record']}", "full", rule["record"]))
                else:
                    checks.append((f"alert {rule['alert']}", "alert", rule["expr"]))
    return checks


def test_every_shipped_expression_has_series(tmp_path):
    c = MetricsCluster(workers=2, secure=True)
    prom = None
    ok = False
    try:
        workers = {n: f"127.0.0.1:{p}" for n, p in c.worker_metrics.items()}
        # The worker endpoint itself: healthy, and ready once registered.
        for name, addr in workers.items():
            assert get_status(f"http://{addr}/healthz") == 200, name
            wait_for(lambda: get_status(f"http://{addr}/readyz") == 200, 30, f"{name} ready")
        prom = Prom(str(tmp_path), {"coordinator": f"127.0.0.1:{c.metrics_port}",
                                    "workers": list(workers.values())})
        start = time.time()
        wait_for(lambda: len(prom.api("query", query='up == 1')["result"]) == 3, 30,
                 "three targets up")
        job = c.submit(trainer_spec(max_steps=120))
        c.wait_state(job, "RUNNING", timeout=60)
        # Ranks training on both workers, seen by Prometheus.
        wait_for(lambda: len(prom.api("query", query=f'convoy_rank_step{{job_id="{job}"}}')
                             ["result"]) == 2, 60, "both ranks' steps scraped")
        wait_for(lambda: prom.api("query", query="convoy_worker_rank_cpu_seconds_total")
                 ["result"], 30, "rank CPU scraped from the workers")
        final = c.wait_state(job, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=120)
        assert final["state"] == "SUCCEEDED", final
        # The finished job's series stay (retention), with the final test accuracy.
        wait_for(lambda: prom.api("query", query=f'convoy_rank_test_accuracy_ratio{{job_id="{job}"}}')
                 ["result"], 30, "test accuracy scraped")
        time.sleep(3)  # a few more scrapes and rule evaluations
        end = time.time()

        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        gpu = bool(prom.range_series("convoy_worker_gpu_memory_total_bytes", start, end))
        checks = dashboard_checks(dashboard, {"$job_id": job, "$worker": "w1",
                                              "${job_id}": job, "${worker}": "w1"})
        checks += rule_checks()
        assert len(checks) > 40
        missing = []
        for what, kind, expr in checks:
            if kind == "label":
                metric, label = expr
                series = prom.range_series(metric, start, end)
                if not any(label in s["metric"] for s in series):
                    missing.append(f"{what}: no {metric} series with label {label}")
                continue
            if not gpu and "convoy_worker_gpu_" in str(expr):
                continue  # no GPU on this machine: NVML exports nothing, by design
            exprs = [expr] if kind == "full" else selectors(expr)
            if kind == "alert":
                assert exprs, f"{what}: no metric selector found in {expr}"
                m = TRAILING_COMPARISON.match(expr)
                if m:
                    exprs.append(m.group(1))
            for e in exprs:
                if not prom.range_series(e, start, end):
                    missing.append(f"{what}: `{e}` returned no series")
        assert not missing, "expressions without series:\n" + "\n".join(missing)
        ok = True
    finally:
        if prom:
            prom.close()
        if not ok:
            c.print_logs()
        leftovers = c.close()
        assert not leftovers, f"processes of jobs survived the test: {leftovers}"
