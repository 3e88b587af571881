"""convoy-forkserver: a warm Python for the ranks of Convoy `command:` jobs.

A convoy-worker started with `--warm-python PYTHON` runs `PYTHON -I -u convoy-forkserver.py 3
<padding>` (fd 3: a SOCK_SEQPACKET socket to the worker) as the worker itself, one for every
job identity (as the warm trainer is), isolated (-I: no PYTHON* variable, no user site) with
HOME=/nonexistent, so that nothing a job plants in a home directory runs in it. It runs
nothing of any job: each forked rank joins its cgroup and drops to its job's identity before
it decodes its own request. It imports torch once, then forks a rank
for each request, so that a Python rank skips the seconds of `import torch`. It speaks
the warm trainer's protocol (rank_process/zygote_protocol.h): Spawn requests (argv, environment,
working directory, uid/gid, the rank's stdout and stderr as SCM_RIGHTS) in; 'R' ready, 'S'
started, 'F' failed, 'X' exited out.

The forked rank is set up as the worker's launcher sets up a cold rank, in the same order as
rank_process/rank_child.cc: its own process group; stdin /dev/null, stdout and stderr; groups, gid
and uid dropped and verified; dumpable again; PR_SET_PDEATHSIG(SIGKILL) after the drop; its
working directory; every other descriptor closed; signals as a fresh interpreter has them;
exactly its environment (os.environ, the C environment, and /proc/PID/environ and cmdline);
sys.argv, sys.orig_argv, sys.executable and sys.path[0] as `python3 script.py` or `python3 -m
module` would set them. Then the script runs as __main__; the interpreter's own handling of
SystemExit, uncaught exceptions (traceback, exit 1) and KeyboardInterrupt applies, and so do
atexit handlers.

What stays from the forkserver: the modules it imported (torch, numpy, ...), Python's hash
seed (PYTHONHASHSEED is the same for every rank it forks), and sys.path as computed when it
started. The worker sends a rank here only when every variable read while the interpreter
and torch load (PYTHON*, LD_*, MALLOC_*, OMP_* but OMP_NUM_THREADS, MKL_*, TORCH_*, LANG,
LC_*, HOME, ...) is the forkserver's; OMP_NUM_THREADS is applied after the fork
(torch.set_num_threads), CUDA_VISIBLE_DEVICES is read when CUDA initialises, which the
forkserver never does.

The forkserver never decodes a request itself: it forks first and the child decodes it; the
receive buffer is overwritten after every fork, so no rank finds another's argv or
environment in the memory it inherits. It dies with the worker (PR_SET_PDEATHSIG, set by the
worker) and its ranks die with it. Standard library only (plus what it preloads).
"""

import ctypes
import errno
import os
import select
import signal
import socket
import struct
import sys

MAGIC = 0x315A5643  # "CVZ1"
MAX_PACKET = 192 << 10
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
# Stages, as rank_process/rank_child.h numbers them.
(STAGE_PRCTL, STAGE_STDIO, STAGE_CHDIR, STAGE_EXEC, STAGE_DROP, STAGE_REGAIN, STAGE_VIEW,
 STAGE_CGROUP) = range(1, 9)
# What the forkserver imports before serving: torch and what a DDP script uses of it.
PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel", "torch.utils.data",
           "torch.distributed.elastic.multiprocessing.errors")

_libc = ctypes.CDLL(None, use_errno=True)


def log(message):
    sys.stderr.write(f"convoy-forkserver: {message}\n")
    sys.stderr.flush()


# ---- The protocol (rank_process/zygote_protocol.cc: native-endian u32s, length-prefixed strings).

def encode_reply(kind, pid=0, value=0, message=b""):
    return struct.pack("=IIiiI", MAGIC, ord(kind), pid, value, len(message)) + message


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def u32(self):
        if len(self.data) - self.pos < 4:
            raise ValueError("short")
        (v,) = struct.unpack_from("=I", self.data, self.pos)
        self.pos += 4
        return v

    def string(self):
        n = self.u32()
        if len(self.data) - self.pos < n:
            raise ValueError("short")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def strings(self):
        n = self.u32()
        if n > 1 << 20:
            raise ValueError("too many")
        return [self.string() for _ in range(n)]


def decode_spawn(data):
    r = Reader(data)
    if r.u32() != MAGIC:
        raise ValueError("magic")
    argv, env, cwd = r.strings(), r.strings(), r.string()
    drop, uid, gid = r.u32(), r.u32(), r.u32()
    join = r.strings()
    if not argv or r.pos != len(data):
        raise ValueError("shape")
    return argv, env, cwd, bool(drop), uid, gid, join


# ---- Where /proc shows this process's argv and environment (zygote_protocol.cc: ProcView).

def proc_view():
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    # fields[0] is field 3 (state); arg_start..env_end are fields 48-51.
    return tuple(int(x) for x in fields[45:49])


def rewrite(start, end, items):
    data = b"".join(i + b"\0" for i in items)
    if start == 0 or len(data) > end - start:
        return False
    ctypes.memmove(start, data + b"\0" * (end - start - len(data)), end - start)
    return True


# ---- The child.

class SetupFailed(Exception):
    def __init__(self, stage, err, what=""):
        super().__init__(what)
        self.stage, self.err, self.what = stage, err, what


def prctl(option, value):
    if _libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def set_up(req, fds, report, server_pid, view):
    """The rank's set-up, step by step as rank_process/rank_child.cc does it. Raises SetupFailed."""
    argv, env, cwd, drop, uid, gid, join = req
    out_fd, err_fd = fds
    # Into the rank's cgroup first, while still root.
    for path in join:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"0\n")
            finally:
                os.close(fd)
        except OSError as e:
            raise SetupFailed(STAGE_CGROUP, e.errno or errno.EIO, "joining the rank's cgroup")
    try:
        os.setpgid(0, 0)
        devnull = os.open("/dev/null", os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        if report != 3:
            os.dup2(report, 3, inheritable=False)
    except OSError as e:
        raise SetupFailed(STAGE_STDIO, e.errno or errno.EIO)
    # The environment: the C library's (os.environ's) emptied, /proc's rewritten, then the
    # rank's own set.
    os.environb.clear()
    _libc.clearenv()
    if not (rewrite(view[0], view[1], argv) and rewrite(view[2], view[3], env)):
        raise SetupFailed(STAGE_VIEW, errno.E2BIG)
    for item in env:
        name, sep, value = item.partition(b"=")
        if sep and name:
            os.environb[name] = value
    what = f"dropping privileges to uid {uid} (gid {gid}) failed"
    if drop:
        try:
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(uid)
        except OSError as e:
            raise SetupFailed(STAGE_DROP, e.errno or errno.EPERM, what)
        if (os.getuid(), os.geteuid(), os.getgid(), os.getegid()) != (uid, uid, gid, gid) or \
                set(os.getgroups()) - {gid}:
            raise SetupFailed(STAGE_DROP, errno.EPERM, what)
        if uid != 0:
            try:
                os.setuid(0)
                raise SetupFailed(STAGE_REGAIN, errno.EPERM, what)
            except PermissionError:
                pass
        prctl(PR_SET_DUMPABLE, 1)  # as an execve of the program would make it
    try:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError as e:
        raise SetupFailed(STAGE_PRCTL, e.errno)
    if os.getppid() != server_pid:
        os._exit(137)  # the forkserver died before prctl took effect
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as e:
            raise SetupFailed(STAGE_CHDIR, e.errno, "chdir " + os.fsdecode(cwd))
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))
    # Signals as a fresh interpreter has them: SIGPIPE and SIGXFSZ ignored, SIGINT raising
    # KeyboardInterrupt, everything else at its default; none blocked.
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        handler = signal.SIG_DFL
        if sig in (signal.SIGPIPE, signal.SIGXFSZ):
            handler = signal.SIG_IGN
        elif sig == signal.SIGINT:
            handler = signal.default_int_handler
        try:
            signal.signal(sig, handler)
        except (OSError, ValueError):
            pass


def which(program, path):
    """sys.executable as the interpreter computes it from argv[0] and PATH."""
    if "/" in program:
        return os.path.abspath(program)
    for d in (path or "/usr/local/bin:/usr/bin:/bin").split(":"):
        candidate = os.path.join(d or ".", program)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return os.path.abspath(candidate)
    return sys.executable


def prepare_interpreter(argv):
    """sys.* as `python3 [-u] script.py ...` or `python3 [-u] -m module ...` sets them.
    Returns ("script", absolute path) or ("module", name)."""
    args = [os.fsdecode(a) for a in argv]
    sys.orig_argv = list(args)
    sys.executable = which(args[0], os.environ.get("PATH"))
    rest = args[1:]
    if rest and rest[0] == "-u":
        rest = rest[1:]  # PYTHONUNBUFFERED=1 is set for every rank: the same
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    if len(rest) >= 2 and rest[0] == "-m":
        sys.argv = ["-m"] + rest[2:]
        sys.path.insert(0, os.getcwd())
        return "module", rest[1]
    sys.argv = rest
    script = os.path.join(os.getcwd(), rest[0])
    sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
    return "script", script


def after_fork_in_rank():
    """What the libraries took from the forkserver's environment and must take from the
    rank's: the thread count, the time zone, random seeds."""
    import time
    time.tzset()
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0 and "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(threads))
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # a cold interpreter seeds it from the OS at import


# ---- Running the rank's program as __main__.

def trim_traceback_hook(first_filename):
    """sys.excepthook that leaves out the forkserver's own frames, so that a rank's traceback
    reads as a cold one's."""
    original = sys.excepthook
    own = os.path.abspath(__file__)

    def hook(kind, value, tb):
        while tb is not None and tb.tb_next is not None:
            name = tb.tb_frame.f_code.co_filename
            if first_filename is not None:
                if name == first_filename:
                    break
            elif name != own:
                break
            tb = tb.tb_next
        original(kind, value, tb)
    return hook


def run_script(path):
    """As the interpreter runs `python3 path` (pymain_run_file): a __main__ module with
    __file__ and a SourceFileLoader, the code compiled under its absolute path."""
    import importlib.machinery
    import types
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__cached__ = None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
    main.__builtins__ = __builtins__
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        sys.stderr.write(f"{sys.executable}: can't open file {path!r}: [Errno {e.errno}] "
                         f"{e.strerror}\n")
        sys.stderr.flush()
        os._exit(2)
    sys.modules["__main__"] = main
    sys.excepthook = trim_traceback_hook(path)
    code = compile(source, path, "exec")
    exec(code, main.__dict__)


def run_module(name):
    import runpy
    sys.excepthook = trim_traceback_hook(None)  # keeps runpy's frames, as a cold -m shows
    runpy._run_module_as_main(name, alter_argv=True)


# ---- The server.

def serve(sock_fd):
    """Serves until the worker closes the socket (then exits); returns only in a forked
    child, set up, with what it is to run."""
    view = proc_view()
    sock = socket.socket(fileno=sock_fd)
    server_pid = os.getpid()
    wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the poll below through wake_w
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    buf = bytearray(MAX_PACKET)
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    sock.sendmsg([encode_reply("R")])
    while True:
        # Exits first, each reported once; a rank's 'S' always goes before its 'X'.
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock.sendmsg([encode_reply("X", pid, status)])
        events = dict(poller.poll())  # no timeout: a request or SIGCHLD wakes it
        if wake_r in events:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        if sock.fileno() not in events:
            continue
        try:
            n, anc, flags, _ = sock.recvmsg_into([buf], socket.CMSG_SPACE(4 * 4),
                                                 socket.MSG_CMSG_CLOEXEC)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            os._exit(0)
        if n == 0:
            os._exit(0)  # the worker left; our ranks die with us
        fds = []
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += list(struct.unpack(f"={len(data) // 4}i", data[:len(data) // 4 * 4]))
        if len(fds) != 2 or flags & socket.MSG_TRUNC:
            for fd in fds:
                os.close(fd)
            buf[:n] = bytes(n)
            sock.sendmsg([encode_reply("F", 0, errno.EINVAL, b"a malformed request")])
            continue
        if not torch_unchanged():
            log("torch changed on disk since it was imported; leaving (ranks start cold until "
                "a new forkserver has loaded)")
            os._exit(0)
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            poller = None
            sock.detach()  # its descriptor is closed below, not by the object
            return child(buf, n, fds, report_w, server_pid, view)
        os.close(report_w)
        for fd in fds:
            os.close(fd)
        buf[:n] = bytes(n)  # nothing of this request stays here for a later rank to find
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        report = bytearray(4096)
        got = 0
        while got < len(report):
            try:
                k = os.readv(report_r, [memoryview(report)[got:]])
            except InterruptedError:
                continue
            if k == 0:
                break
            got += k
        os.close(report_r)
        if got >= 8:  # the child failed before its program ran, and has exited
            while True:
                try:
                    os.waitpid(pid, 0)
                    break
                except InterruptedError:
                    continue
                except ChildProcessError:
                    break
            # The reply is built in place: the message may name the working directory, and
            # no copy of it may stay behind.
            _, err = struct.unpack_from("=ii", report)
            reply = bytearray(20 + got - 8)
            struct.pack_into("=IIiiI", reply, 0, MAGIC, ord("F"), 0, err, got - 8)
            reply[20:] = memoryview(report)[8:got]
            sock.sendmsg([reply])
            reply[:] = bytes(len(reply))
            report[:] = bytes(len(report))
        else:
            sock.sendmsg([encode_reply("S", pid)])


def child(buf, n, fds, report, server_pid, view):
    try:
        req = decode_spawn(bytes(buf[:n]))
    except ValueError:
        fail(report, STAGE_EXEC, errno.EINVAL, "a malformed request")
    buf[:] = b""  # (the child's own copy)
    try:
        set_up(req, fds, report, server_pid, view)
    except SetupFailed as e:
        # (descriptor 3 is the report only once stdio is set up)
        fail(report if e.stage in (STAGE_CGROUP, STAGE_STDIO) else 3, e.stage, e.err, e.what)
    except OSError as e:
        fail(3, STAGE_EXEC, e.errno or errno.EIO, "setting up the rank")
    return req[0]


def fail(report, stage, err, what):
    try:
        os.write(report, struct.pack("=ii", stage, err) + what.encode(errors="replace"))
    finally:
        os._exit(127)


_torch_files = {}


def torch_unchanged():
    """Whether the preloaded torch is still what is installed (an upgrade while the worker
    runs would otherwise go unnoticed by warm ranks)."""
    for path, before in _torch_files.items():
        try:
            st = os.stat(path)
        except OSError:
            return False
        if (st.st_ino, st.st_size, st.st_mtime_ns) != before:
            return False
    return True


def preload():
    import importlib
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a missing part only costs its import later
            log(f"cannot preload {name}: {e!r}")
            if name == "torch":
                raise
    torch = sys.modules["torch"]
    for path in (torch.__file__, os.path.join(os.path.dirname(torch.__file__), "version.py")):
        try:
            st = os.stat(path)
            _torch_files[path] = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            pass
    # Forking is safe only from a single thread, and CUDA must never be initialised here.
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(f"{threads} threads after importing torch; cannot fork safely")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_initialized():
        raise RuntimeError("CUDA was initialised while importing torch")


def main():
    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        sys.stderr.write("usage: python3 convoy-forkserver.py FD (started by convoy-worker)\n")
        return 2
    sock_fd = int(sys.argv[1])
    # Nothing is imported from this file's directory (a rank gets its own sys.path[0]; the
    # worker runs it isolated, -I, which leaves the directory out already); the padding is not
    # ours to keep.
    if not sys.flags.isolated:
        del sys.path[0]
    for name in [k for k in os.environ if k.startswith("CONVOY_ZYGOTE_PAD")]:
        del os.environ[name]
    sys.dont_write_bytecode = True  # the forkserver writes no .pyc files
    try:
        preload()
    except Exception as e:  # noqa: BLE001
        log(f"not serving: {e}")
        return 1
    argv = serve(sock_fd)  # returns only in a rank, set up
    os.close(3)  # the rank runs (the worker hears 'S'): nothing more to report
    kind, target = prepare_interpreter(argv)
    after_fork_in_rank()
    if kind == "module":
        run_module(target)
    else:
        run_script(target)
    return None


if __name__ == "__main__":
    sys.exit(main())
