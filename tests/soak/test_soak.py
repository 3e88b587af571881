"""The short soak (issue 26): bench/soak.py for two minutes with a fixed seed on a secure
cluster of a coordinator and three workers, two of them in network namespaces. It asserts
correctness only: every job SUCCEEDED having trained exactly its steps or FAILED with a
cause, no job resumed another's state, nothing is left behind. Memory is reported, never
asserted here, and nothing is timed."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from soak import REQUIRED_FAULTS, netns_works  # noqa: E402

SEED = 7
# CI's budget for it: two minutes (CONVOY_SOAK_MINUTES for longer). Every kind of fault still
# comes in that time: bench/soak.py draws them from a shuffled bag of eleven, and past 30 % of
# the run the REQUIRED_FAULTS not yet done go first.
MINUTES = os.environ.get("CONVOY_SOAK_MINUTES", "2")


@pytest.mark.skipif(not netns_works(), reason="needs root and `ip netns` (network namespaces)")
def test_short_soak_loses_nothing_and_leaves_nothing(tmp_path):
    out = tmp_path / "soak.json"
    # The soak's table and every violation go to stdout, which pytest shows on failure.
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "soak.py"),
                        "--minutes", MINUTES, "--seed", str(SEED), "--check",
                        "--drain-timeout", "300", "--json", str(out)],
                       timeout=60 * float(MINUTES) + 600)
    assert out.exists(), f"the soak ended (exit {r.returncode}) before its checks"
    results = json.loads(out.read_text())
    assert results["violations"] == [], "\n".join(results["violations"])
    assert r.returncode == 0
    # It did what it is for: jobs ran and finished, faults hit them and were recovered from.
    kinds = {f["kind"] for f in results["faults"]}
    for kind in REQUIRED_FAULTS:
        assert kind in kinds, (kind, kinds)
    assert kinds & {"drain", "drain --now"}, kinds
    assert results["outcomes"].get("SUCCEEDED", 0) >= 3, results["outcomes"]
    assert sum(j["restarts"] + j["preemptions"] for j in results["jobs"].values()) >= 1
    assert results["resumes"] >= 1
