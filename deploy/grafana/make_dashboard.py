#!/usr/bin/env python3
"""Writes dashboards/convoy.json, the Convoy Grafana dashboard (schemaVersion 37, Grafana 9+).
With --check, writes nothing and exits 1 when the file differs from what this generates.

The JSON is generated so that panels stay consistent; edit this file and run it, or edit the
JSON in Grafana and export it over dashboards/convoy.json. Every PromQL expression here is
evaluated against a real Prometheus by tests/observability/test_prometheus.py.
"""
import json
import os
import sys

DS = {"type": "prometheus", "uid": "${datasource}"}
_next_id = [1]


def target(expr, legend="", ref="A"):
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}


def panel(title, exprs, x, y, w=8, h=8, unit="short", kind="timeseries", description=""):
    pid = _next_id[0]
    _next_id[0] += 1
    refs = "ABCDEFGH"
    return {
        "id": pid,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [target(e, l, refs[i]) for i, (e, l) in enumerate(exprs)],
    }


def row(title, y):
    pid = _next_id[0]
    _next_id[0] += 1
    return {"id": pid, "type": "row", "title": title, "collapsed": False,
            "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []}


ACTIVE = 'state=~"PENDING|SCHEDULED|RENDEZVOUS|RUNNING|RESTARTING"'
J = 'job_id="$job_id"'
W = 'worker="$worker"'

panels = [
    row("Cluster overview", 0),
    panel("Workers by state", [("convoy_workers", "{{state}}")], 0, 1, unit="none"),
    panel("Jobs by state", [("convoy_jobs", "{{state}}")], 8, 1, unit="none"),
    panel("Slots", [("convoy_slots", "{{kind}}")], 16, 1, unit="none"),
    panel("Time in queue and rendezvous (p90)",
          [("convoy:job_queue_seconds:p90_5m", "queue"),
           ("convoy:job_rendezvous_seconds:p90_5m", "rendezvous")], 0, 9, unit="s"),
    panel("Restarts by cause, preemptions by reason (1 h)",
          [("cause:convoy_job_restarts:increase1h", "restart: {{cause}}"),
           ("sum by (reason) (increase(convoy_preemptions_total[1h]))", "preempted: {{reason}}")],
          8, 9, unit="none", kind="barchart"),
    panel("Unfinished jobs by owner", [(f"sum by (owner) (convoy_owner_jobs{{{ACTIVE}}})",
                                        "{{owner}}")], 16, 9, unit="none"),
    panel("Throughput by job", [("job_id:convoy_rank_samples_per_second:sum", "{{job_id}}")],
          0, 17, unit="none", description="samples per second, all ranks"),
    panel("RPC latency (p99, unary)",
          [("method:convoy_grpc_server_handling_seconds:p99_5m", "{{method}}")], 8, 17, unit="s"),
    panel("RPCs by code", [("sum by (code) (method:convoy_grpc_server_handled:rate5m)",
                            "{{code}}")], 16, 17, unit="reqps"),
    panel("State store commit latency (p99)", [("convoy:store_commit_seconds:p99_5m", "p99")],
          0, 25, unit="s"),
    panel("Worker heartbeat age", [("convoy_worker_heartbeat_age_seconds", "{{worker}}")],
          8, 25, unit="s"),
    panel("Attempts started and failed (rate)",
          [("sum(rate(convoy_attempts_started_total[5m]))", "started"),
           ("sum by (cause) (rate(convoy_attempt_failures_total[5m]))", "failed: {{cause}}")],
          16, 25, unit="ops"),

    row("Job $job_id", 33),
    panel("Loss per rank", [(f"convoy_rank_loss{{{J}}}", "rank {{rank}}")], 0, 34, w=12),
    panel("Samples/s per rank", [(f"convoy_rank_samples_per_second{{{J}}}", "rank {{rank}}")],
          12, 34, w=12),
    panel("Step per rank", [(f"convoy_rank_step{{{J}}}", "rank {{rank}}")], 0, 42, unit="none"),
    panel("Step skew (fastest − slowest) and slowest rank",
          [(f"convoy_job_step_skew{{{J}}}", "skew"),
           (f"convoy_job_step_skew{{{J}}} * on (job_id) group_left (rank) "
            f"convoy_job_slowest_rank{{{J}}}", "slowest: rank {{rank}}")], 8, 42, unit="none"),
    panel("Test accuracy per rank", [(f"convoy_rank_test_accuracy_ratio{{{J}}}", "rank {{rank}}")],
          16, 42, unit="percentunit"),
    panel("Seconds since each rank's last record",
          [(f"convoy_rank_last_record_age_seconds{{{J}}}", "rank {{rank}}")], 0, 50, unit="s"),
    panel("Restarts and failed attempts by cause",
          [(f"convoy_job_restarts{{{J}}}", "restarts"),
           (f"convoy_job_failed_attempts{{{J}}}", "failed: {{cause}}")], 8, 50, unit="none"),
    panel("Epoch per rank", [(f"convoy_rank_epoch{{{J}}}", "rank {{rank}}")], 16, 50, unit="none"),

    row("Worker $worker", 58),
    panel("CPU per rank (cores)",
          [(f"worker_job_id_rank:convoy_worker_rank_cpu_seconds:rate1m{{{W}}}",
            "{{job_id}} rank {{rank}}")], 0, 59, unit="none"),
    panel("Resident memory per rank",
          [(f"convoy_worker_rank_resident_memory_bytes{{{W}}}", "{{job_id}} rank {{rank}}")],
          8, 59, unit="bytes"),
    panel("Ranks", [(f"convoy_worker_ranks{{{W}}}", "{{state}}"),
                    (f"convoy_worker_slots{{{W}}}", "slots")], 16, 59, unit="none"),
    panel("Rank log output", [(f"rate(convoy_worker_log_bytes_total{{{W}}}[1m])", "bytes/s")],
          0, 67, unit="Bps"),
    panel("Metric records",
          [(f"rate(convoy_worker_metric_records_received_total{{{W}}}[1m])", "received/s"),
           (f"rate(convoy_worker_metric_records_dropped_total{{{W}}}[1m])", "dropped/s")],
          8, 67, unit="none"),
    panel("Restarts seen and heartbeat age",
          [(f"convoy_worker_restarts_seen_total{{{W}}}", "restarts seen"),
           (f"convoy_worker_heartbeat_age_seconds{{{W}}}", "heartbeat age (s)")],
          16, 67, unit="none"),
    panel("GPU utilisation (NVML; empty without GPUs)",
          [(f"convoy_worker_gpu_utilization_ratio{{{W}}}", "gpu {{gpu}}")], 0, 75,
          unit="percentunit"),
    panel("GPU memory (NVML; empty without GPUs)",
          [(f"convoy_worker_gpu_memory_used_bytes{{{W}}}", "used gpu {{gpu}}"),
           (f"convoy_worker_gpu_memory_total_bytes{{{W}}}", "total gpu {{gpu}}")], 8, 75,
          unit="bytes"),

    # README "When nodes are sick": the health gate, cordons, stragglers, hangs by progress.
    row("When nodes are sick", 83),
    panel("Workers taking no new ranks",
          [("1 - convoy_worker_healthy", "unhealthy: {{worker}}"),
           ("convoy_worker_cordoned", "cordoned: {{worker}}")], 0, 84, unit="none",
          description="1 while a worker fails its health check (or runs its first one), or is "
                      "cordoned; `convoy workers` says why"),
    panel("Stragglers by job", [("convoy_job_stragglers", "{{job_id}}")], 8, 84, unit="none",
          description="ranks slower than straggler_factor times their peers' median now"),
    panel("Node faults, cordons, stragglers, hangs (1 h)",
          [("increase(convoy_node_faults_total[1h])", "node faults"),
           ("increase(convoy_worker_auto_cordons_total[1h])", "automatic cordons"),
           ("increase(convoy_stragglers_named_total[1h])", "stragglers named"),
           ("increase(convoy_progress_hangs_total[1h])", "hangs by progress")], 16, 84,
          unit="none", kind="barchart"),
]


def query_var(name, label, query):
    return {
        "name": name, "label": label, "type": "query", "datasource": DS,
        "definition": query, "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2, "sort": 1, "includeAll": False, "multi": False,
        "current": {}, "options": [],
    }


dashboard = {
    "uid": "convoy-overview",
    "title": "Convoy",
    "description": "Convoy cluster, one job and one worker (deploy/grafana)",
    "tags": ["convoy"],
    "timezone": "browser",
    "schemaVersion": 37,
    "version": 1,
    "editable": True,
    "refresh": "10s",
    "time": {"from": "now-1h", "to": "now"},
    "templating": {"list": [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
         "current": {}, "options": [], "refresh": 1},
        query_var("job_id", "job", "label_values(convoy_job_info, job_id)"),
        query_var("worker", "worker", "label_values(convoy_worker_info, worker)"),
    ]},
    "annotations": {"list": [
        {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
         "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts",
         "type": "dashboard"},
        {"name": "Restarts of $job_id (cause)", "datasource": DS, "enable": True,
         "iconColor": "red",
         "expr": f"changes(convoy_job_failed_attempts{{{J}}}[1m]) > 0",
         "step": "15s", "titleFormat": "attempt failed: {{cause}}",
         "textFormat": "job {{job_id}}: an attempt failed ({{cause}}); see convoy status {{job_id}}",
         "useValueForTime": False},
    ]},
    "panels": panels,
}

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "dashboards", "convoy.json")
text = json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"
if "--check" in sys.argv[1:]:
    with open(path, encoding="utf-8") as f:
        if f.read() != text:
            sys.exit(f"{path} differs from make_dashboard.py's output: run it, or port the "
                     "change to make_dashboard.py")
    sys.exit(0)
with open(path, "w", encoding="utf-8") as f:
    f.write(text)
