"""Issue 42, "Hangs named by progress" (README "When nodes are sick"): one rank of a user's
DDP script stops stepping while its process stays alive, its peer blocks in the next
all-reduce, and every rank's step counter stops. With `hang_steps` the coordinator names the
rank that reported last least recently as the suspect after a few median step times (never
under 10 s), long before `hang_timeout`, and the restarted attempt avoids the suspect's node.

The stuck rank is the one on worker w2 (CONVOY_E2E_HANG, passed with --pass-env): in attempt 0
it sleeps for an hour instead of reporting step 12 (test_e2e_stragglers.SICK_HOST)."""

import pytest

from cluster import wait_for
from test_e2e_stragglers import HAVE_TORCH, script_dir, submit_script, workers_of


@pytest.mark.skipif(not HAVE_TORCH, reason="needs Debian's python3-torch")
def test_a_stuck_rank_is_named_and_the_job_restarts_off_its_node(make_cluster, tmp_path):
    code = script_dir(tmp_path)
    c = make_cluster(workers=0)
    c.start_worker("w1")
    c.start_worker("w2", extra=["--pass-env", "CONVOY_E2E_HANG"], env={"CONVOY_E2E_HANG": "12"})
    c.start_worker("w3")
    c.wait_workers_ready(3)
    # hang_timeout (no record at all for 300 s) would name the timeout, not the rank. The job
    # is cancelled once its next attempt trains: the script's final evaluation (5,000 test
    # images in one forward pass, no report meanwhile: over 17 s on 2 busy cores) is a pause
    # of every rank that hang_steps must cover in a real job, and would only cost time here.
    job = submit_script(c, code, "hang", 10000, hang_steps=10, hang_timeout=300, max_restarts=1)

    def next_attempt_trains():
        st = c.status(job)
        return st if st["attempt"] == 1 and any(
            int(m.get("step", 0)) >= 5 and m["attempt"] == 1 for m in st.get("latest", [])) \
            else None
    st = wait_for(next_attempt_trains, 90, "the next attempt's 5th step")
    assert st["state"] == "RUNNING", st["message"]
    first = st["attempts"][0]
    assert workers_of(first) == ["w1", "w2"], first
    failure = first["failure"]
    assert failure["cause"] == "FAILURE_HANG", failure
    assert failure["worker"] == "w2", failure
    reason = failure["reason"]
    assert reason.startswith("collective hang: no rank has reported for"), reason
    assert "(10 median steps of" in reason, reason
    assert f"rank {failure['rank']} on w2 reported last least recently (step 11" in reason, reason
    assert st["restarts"] == 1
    assert workers_of(st["attempts"][-1]) == ["w1", "w3"], st["attempts"][-1]
    c.cli("cancel", job)
    c.wait_state(job, {"CANCELLED"}, timeout=30)
