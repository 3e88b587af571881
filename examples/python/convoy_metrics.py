"""Optional: report progress to Convoy (a JSON line per record on CONVOY_METRICS_SOCKET)."""
import json, os, socket

_sock = None

def report(**record):
    """Sends e.g. report(step=10, loss=0.41, samples=320); does nothing outside Convoy."""
    global _sock
    path = os.environ.get("CONVOY_METRICS_SOCKET")
    if not path:
        return
    try:
        if _sock is None:
            _sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _sock.connect(path)
        _sock.sendall((json.dumps(record) + "\n").encode())
    except OSError:
        _sock = None  # metrics are best effort: training goes on without them
