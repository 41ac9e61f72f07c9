"""Handing a stop to debugpy: the loopback listener, waiting for a client, suspending a thread,
and where this worker is paused now (for the worker table and evaluate).

Runs in user threads and the agent thread: imports debugpy only when a stop needs it (never while
idle), and never raises into the task: callers get False or an exception they log themselves.
"""

from __future__ import annotations

import atexit
import functools
import hmac
import os
import secrets
import socket
import sys
import tempfile
import threading
from typing import TYPE_CHECKING

from raysleuth.agent import pydevd_wake, stops
from raysleuth.agent.log import swallow
from raysleuth.shared.paths import debug_dir_prefix

if TYPE_CHECKING:
    from raysleuth.agent.port import AgentPort

_listener: dict | None = None
"""This worker's debugpy listener once opened ({path} or {host, port}; one per process)."""

_listener_lock = threading.Lock()

_access_token: str | None = None
"""The secret a client must send (`pydevdAuthorize`) before debugpy answers anything else; the
broker gets it with the listener's port, through Ray, never through a file or the network."""

# --- the listener ----------------------------------------------------------------------------


def access_token() -> str | None:
    """The listener's secret (None before it opened)."""
    return _access_token


def open_listener() -> dict:
    """This worker's debugpy, opened once: {"path": an AF_UNIX socket in a folder only this user
    can enter} (ours), or {"host", "port"} when Ray's own breakpoint() listened first. Either way
    debugpy answers only a client that first sends `access_token()`.
    """
    global _listener, _access_token
    with _listener_lock:
        if _listener is not None:
            return dict(_listener)
        import ray

        token = secrets.token_hex(32)
        w = ray._private.worker.global_worker
        ray_port = w.debugger_port  # a GCS lookup: set when Ray's breakpoint() listens already
        if ray_port:  # Ray's breakpoint() already listens, on the node's address: lock it too
            tune_debugger_sockets()
            pydevd_wake.install()
            if not require_token(token):
                raise RuntimeError("Ray's debugger listens in this worker and cannot be locked")
            _access_token, _listener = token, {"host": w.node_ip_address, "port": int(ray_port)}
            return dict(_listener)
        path = listen_locked(token)
        _access_token, _listener = token, {"path": path}
        keep_rays_breakpoint_on_ours()
        return dict(_listener)


def keep_rays_breakpoint_on_ours() -> None:
    """Ray's breakpoint() opens a TCP listener on the node's address unless one is open: ours is
    (on a private socket), so Ray's set_trace goes straight to waiting for a client."""
    import ray.util.debugpy as ray_debugpy

    def _ensure_debugger_port_open_thread_safe():
        return None

    ray_debugpy._ensure_debugger_port_open_thread_safe = _ensure_debugger_port_open_thread_safe


UNIX_HOST = "unix:"
"""The `host` that makes pydevd's server socket an AF_UNIX one at the path that follows."""


def listen_locked(token: str) -> str:
    """debugpy's in-process server on an AF_UNIX socket in a new 0700 folder (no other user can
    even connect), whose pydevd refuses every request of every connection until the client sent
    `token` (a `pydevdAuthorize` request). Returns the socket's path."""
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # no warning in the worker's log
    import debugpy
    import debugpy.server.api as api
    import pydevd

    tune_debugger_sockets()
    pydevd_wake.install()
    unix_server_sockets(pydevd)
    # 0700, this user's, a random name carrying our pid: removed at exit, and by the node's relay
    # (raysleuth/broker/debug/relay_actor.py) once this pid is gone (a killed worker)
    folder = tempfile.mkdtemp(prefix=debug_dir_prefix(os.getpid()))
    path = os.path.join(folder, "dap.sock")
    atexit.register(_remove, folder, path)
    threading.Thread(target=_sweep_gone, name="raysleuth-dbg-sweep", daemon=True).start()
    api.ensure_logging()
    hidden = os.path.dirname(os.path.abspath(debugpy.__file__))
    # What debugpy.listen(in_process_debug_adapter=True) passes, with the secret and the socket:
    # pydevd takes the secret with the listening socket, so there is no moment without it.
    api._settrace(
        host=UNIX_HOST + path,
        port=0,
        suspend=False,
        patch_multiprocessing=False,
        dont_trace_start_patterns=(hidden,),
        dont_trace_end_patterns=("debugpy_launcher.py",),
        wait_for_ready_to_run=False,
        block_until_connected=False,
        access_token=token,
    )
    py_db = pydevd.get_global_debugger()
    py_db.wait_for_server_socket_ready()
    api.listen.called = True  # a later debugpy.listen() fails instead of tracing twice
    if py_db._server_socket_name != path or not require_token(token):
        raise RuntimeError("debugpy did not take the private socket and its token")
    return path


def unix_server_sockets(pydevd) -> None:
    """pydevd's server socket, for a `host` of UNIX_HOST + path: AF_UNIX at that path, 0600."""
    original = pydevd.create_server_socket
    if getattr(original, "raysleuth_unix", False):
        return

    @functools.wraps(original)
    def create_server_socket(host, port):
        if not (isinstance(host, str) and host.startswith(UNIX_HOST)):
            return original(host, port)
        path = host[len(UNIX_HOST) :]
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.bind(path)
            os.chmod(path, 0o600)
            server.settimeout(None)
        except Exception:
            server.close()
            raise
        return server

    create_server_socket.raysleuth_unix = True  # type: ignore[attr-defined]
    pydevd.create_server_socket = create_server_socket


def _sweep_gone() -> None:
    """The folders that killed workers of this user left in the temp folder go (their pid ended)."""
    try:
        from raysleuth.shared.dbgdirs import sweep_debug_dirs

        sweep_debug_dirs()
    except Exception:  # noqa: BLE001 - the relay sweeps them too
        swallow("removing the debugger folders of gone workers")


def _remove(folder: str, path: str) -> None:
    for remove, target in ((os.unlink, path), (os.rmdir, folder)):
        try:
            remove(target)
        except OSError:
            pass


class _TokenGate:
    """pydevd's `authentication` of one process: a client is let in after it sent the token
    (compared in constant time), and every new connection starts logged out."""

    __slots__ = ("access_token", "client_access_token", "_ok")

    def __init__(self, token: str) -> None:
        self.access_token = token
        self.client_access_token = None
        self._ok = False

    def is_authenticated(self) -> bool:
        return self._ok

    def login(self, access_token) -> None:
        given = access_token if isinstance(access_token, str) else ""
        self._ok = hmac.compare_digest(given.encode("utf-8", "replace"), self.access_token.encode())

    def logout(self) -> None:
        self._ok = False


def require_token(token: str) -> bool:
    """Make this process's pydevd refuse every request until a client sends `token` (True when
    in place)."""
    import pydevd

    py_db = pydevd.get_global_debugger()
    if py_db is None:
        return False
    py_db.authentication = _TokenGate(token)
    return True


def tune_debugger_sockets() -> bool:
    """On every connection pydevd takes: log the client out (it must send the token again) and
    turn Nagle's algorithm off (True once in place).

    pydevd keeps who logged in per process, not per connection: without the logout a client
    reconnecting after the broker's connection dropped would be let in. pydevd writes a response
    and the events after it as separate small sends; with Nagle on, the second waits for the
    client's delayed ACK (about 40 ms on Linux), so every request to a stopped worker took ~44 ms.
    """
    cls = getattr(sys.modules.get("pydevd"), "PyDB", None)
    original = getattr(cls, "initialize_network", None)
    if cls is None or original is None:
        return False
    if getattr(original, "raysleuth_no_delay", False):
        return True

    @functools.wraps(original)
    def initialize_network(self, sock, *args, **kwargs):
        self.authentication.logout()
        if getattr(sock, "family", None) in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except Exception:  # noqa: BLE001 - closed already: nothing to tune
                swallow("setting TCP_NODELAY on the debugger's socket")
        return original(self, sock, *args, **kwargs)

    initialize_network.raysleuth_no_delay = True  # type: ignore[attr-defined]
    cls.initialize_network = initialize_network
    return True


# --- the paused state ------------------------------------------------------------------------


# --- waiting for a client ----------------------------------------------------------------------


def wait_for_client(timeout: float | None = None) -> bool:
    """Wait until a debugger is attached (True), or the wait is cancelled or times out (False)."""
    import pydevd

    if pydevd._is_attached():
        return True
    ev = stops.new_wait()
    timer = None
    if timeout is not None:
        timer = threading.Timer(timeout, stops.resume_one, (ev,))
        timer.daemon = True
        timer.start()
    try:
        w = getattr(sys.modules.get("ray._private.worker"), "global_worker", None)
        paused = getattr(w, "worker_paused_by_debugger", None) if getattr(w, "connected", False) else None
        if paused is not None:  # Ray's State API then counts this thread as paused
            with paused():
                pydevd._wait_for_attach(cancel=ev)
        else:
            pydevd._wait_for_attach(cancel=ev)
    finally:
        stops.wait_ended(ev)
        if timer is not None:
            timer.cancel()
    return not ev.resumed and pydevd._is_attached()


# --- stopping ----------------------------------------------------------------------------------


def debugpy_will_stop(frame, line: int) -> bool:
    """A session attached with its own breakpoint on this line, or stepping: debugpy stops there."""
    pydevd = sys.modules.get("pydevd")
    if pydevd is None:
        return False
    try:
        py_db = pydevd.get_global_debugger()
        if py_db is None or not py_db.is_attached():
            return False
        info = getattr(threading.current_thread(), "additional_info", None)
        if info is not None and getattr(info, "pydev_step_cmd", -1) not in (-1, None):
            return True
        filename = frame.f_code.co_filename
        for path, lines in list(getattr(py_db, "breakpoints", {}).items()):
            if line in lines and os.path.normcase(os.path.realpath(path)) == os.path.normcase(
                os.path.realpath(filename)
            ):
                return True
    except Exception:  # noqa: BLE001 - pydevd internals: if unsure, stop ourselves
        swallow("asking pydevd whether it stops at line %s", line)
        return False
    return False


def stop_here(agent: AgentPort, frame, point_id: str | None) -> None:
    """Stop this thread at `frame` in debugpy, waiting for a client (the broker) first.

    `agent` is told (`poke`) when the pause starts and ends, so the worker table shows it.
    """
    line = frame.f_lineno
    if debugpy_will_stop(frame, line):
        return
    try:
        open_listener()
    except Exception:  # noqa: BLE001
        agent.log.exception("opening the debugger for a breakpoint failed")
        return
    stops.set_paused(
        {"path": frame.f_code.co_filename, "line": line, "reason": "breakpoint", "breakpoint": point_id},
        frame,
    )
    agent.poke()
    try:
        if wait_for_client():
            suspend(frame)
    except Exception:  # noqa: BLE001
        agent.log.exception("stopping in debugpy failed")
    finally:
        stops.set_paused(None)
        agent.poke()


def suspend(frame) -> None:
    """Suspend in pydevd with `frame` as the top frame, at its current line (not the next one)."""
    import pydevd
    from _pydevd_bundle.pydevd_comm_constants import CMD_SET_BREAK

    py_db = pydevd.get_global_debugger()
    thread = threading.current_thread()
    # Tracing on for this thread (as Ray's set_trace does), so that stepping works afterwards.
    pydevd.settrace(suspend=False, trace_only_current_thread=False, patch_multiprocessing=False)
    info = py_db.set_additional_thread_info(thread)
    info.is_tracing += 1  # pydevd's tracer must not stop in these frames of ours first (3.11)
    try:
        py_db.set_trace_for_frame_and_parents(thread.ident, frame)
        py_db.set_suspend(thread, CMD_SET_BREAK)
        py_db.do_wait_suspend(thread, frame, "line", None)
    finally:
        info.is_tracing -= 1


def stop_at_exception(exc_info) -> bool:
    """Stop in debugpy at the traceback's innermost frame, as an unhandled exception stops.

    False where this debugpy has no way to (pydevd without trigger_exception_handler)."""
    import pydevd

    py_db = pydevd.get_global_debugger()
    trigger_handler = getattr(py_db, "trigger_exception_handler", None)
    if trigger_handler is None:
        return False
    trigger_handler(exc_info, as_uncaught=False)
    return True
