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
# Checkpoints kept by policy (README "Checkpoints kept by policy"): a record of this kind
# marks a checkpoint, named by CHECKPOINT_PATH relative to the job's checkpoint directory.
CHECKPOINT_DIR_ENV = "CONVOY_CHECKPOINT_DIR"
KIND_CHECKPOINT = "checkpoint"
CHECKPOINT_PATH = "checkpoint_path"

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


def checkpoint(path, step=None, **metrics):
    """Marks a checkpoint the script has finished writing (call it after the file, or the
    directory, is complete and in place: write to a temporary name, then rename):
    checkpoint("ckpt-100.pt", step=100, loss=0.41, test_accuracy=0.87). `path` is relative to
    CONVOY_CHECKPOINT_DIR (an absolute path inside it is made relative). With a `checkpoint:`
    policy in the job's spec, the worker keeps the newest and the best of the checkpoints so
    marked and deletes the rest; `convoy checkpoints JOB` lists what is kept. Does nothing
    outside Convoy."""
    root = os.environ.get(CHECKPOINT_DIR_ENV)
    path = os.fspath(path)
    if root and os.path.isabs(path):
        path = os.path.relpath(path, root)
    record = {KIND: KIND_CHECKPOINT, CHECKPOINT_PATH: path}
    if step is not None:
        record[STEP] = step
    record.update(metrics)
    report(**record)
