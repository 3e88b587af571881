"""Optional: report progress to Convoy (a JSON line per record on CONVOY_METRICS_SOCKET).

The names below are Convoy's rank contract (common/rank_contract.h); a unit test checks that
they agree with it."""
import json, os, socket

# Where the worker listens for this rank's records.
METRICS_SOCKET_ENV = "CONVOY_METRICS_SOCKET"
# Fields of a record that Convoy reads itself (any other numeric key is kept as a value).
KIND = "kind"
STEP = "step"
EPOCH = "epoch"
LOSS = "loss"
SAMPLES = "samples"
SECONDS = "seconds"
# Values that `convoy status`, `convoy top` and the coordinator's /metrics show.
SAMPLES_PER_S = "samples_per_s"
TOTAL_STEPS = "total_steps"
FIRST_STEP_S = "first_step_s"
TEST_ACCURACY = "test_accuracy"
TEST_LOSS = "test_loss"

_sock = None

def report(**record):
    """Sends e.g. report(step=10, loss=0.41, samples=320); does nothing outside Convoy."""
    global _sock
    path = os.environ.get(METRICS_SOCKET_ENV)
    if not path:
        return
    try:
        if _sock is None:
            _sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _sock.connect(path)
        _sock.sendall((json.dumps(record) + "\n").encode())
    except OSError:
        _sock = None  # metrics are best effort: training goes on without them
