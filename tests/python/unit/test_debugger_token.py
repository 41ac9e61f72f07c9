"""No token-less way into a worker's debugger (#23): the agent's debugpy listens on an AF_UNIX
socket in a 0700 folder, and answers a connection only after it sent the listener's secret, on
every connection, also after another one ended.
Real debugpy in a fresh interpreter (no Ray: `listen_locked` is what the agent's listener does)."""

from __future__ import annotations

import pytest
from helpers import run_probe

PROBE = r"""
import json, os, socket
from raysleuth.agent.debugger import listen_locked
TOKEN = "ab" * 32
path = listen_locked(TOKEN)
st = os.stat(os.path.dirname(path))

def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s, [0]

def ask(c, command, arguments):
    sock, seq = c
    seq[0] += 1
    body = json.dumps({"seq": seq[0], "type": "request", "command": command, "arguments": arguments}).encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        head, _, rest = buf.partition(b"\r\n\r\n")
        n = int(head.split(b":")[1])
        while len(rest) < n:
            rest += sock.recv(65536)
        msg, buf = json.loads(rest[:n]), rest[n:]
        if msg.get("type") == "response" and msg.get("request_seq") == seq[0]:
            return {"success": msg["success"], "message": msg.get("message")}

init = {"adapterID": "probe"}
out = {}
a = conn()
out["no_token"] = ask(a, "initialize", init)
out["wrong_token"] = ask(a, "pydevdAuthorize", {"debugServerAccessToken": "cd" * 32})
out["after_wrong"] = ask(a, "evaluate", {"expression": "open('/etc/hostname').read()"})
out["not_a_string"] = ask(a, "pydevdAuthorize", {"debugServerAccessToken": 12345})
out["right_token"] = ask(a, "pydevdAuthorize", {"debugServerAccessToken": TOKEN})
out["after_right"] = ask(a, "initialize", init)
a[0].close()  # dropped without a DAP disconnect: who comes next must log in again
b = conn()
out["next_connection"] = ask(b, "initialize", init)
c = conn()  # a second client while one is connected: pydevd takes it, logged out
out["second_client"] = ask(c, "initialize", init)
out["socket"] = {"folder_mode": oct(st.st_mode & 0o777), "sock_mode": oct(os.stat(path).st_mode & 0o777)}
print(json.dumps(out))
import shutil; shutil.rmtree(os.path.dirname(path))  # os._exit skips the agent's atexit removal
os._exit(0)
"""


def test_debugpy_answers_only_a_client_that_sent_the_token():
    pytest.importorskip("debugpy")
    res = run_probe(PROBE, timeout=60)
    refused = {"success": False, "message": "Client not authenticated."}
    for step in ("no_token", "after_wrong", "next_connection", "second_client"):
        assert res[step] == refused, (step, res)
    assert res["right_token"]["success"] and res["after_right"]["success"], res
    assert res["socket"] == {"folder_mode": "0o700", "sock_mode": "0o600"}
