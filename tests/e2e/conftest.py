import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cluster  # noqa: E402
from cluster import Cluster  # noqa: E402

# A trainer job evaluates only in the tests that check its accuracy (trainer_spec(...,
# evaluate=True)): elsewhere the evaluation is CPU that CI spends for nothing.
cluster.EVALUATE = False


@pytest.fixture
def make_cluster(request):
    """make_cluster(workers=2, slots=1, ...) -> a running Cluster, torn down after the test,
    which then fails if any process of any of its jobs is still alive."""
    clusters = []

    def make(**kwargs):
        c = Cluster(**kwargs)
        clusters.append(c)
        return c

    yield make
    failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
    for c in clusters:
        if failed:
            c.print_logs()
        leftovers = c.close()
        assert not leftovers, f"processes of jobs survived the test: {leftovers}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
