"""The worker's debugpy answers without Nagle's delay: TCP_NODELAY on the socket pydevd talks
DAP on (the latency itself is measured by bench/step_latency.py, not here)."""

from __future__ import annotations

import pytest
from helpers import run_probe

PROBE = """
import json, os, socket
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
import debugpy, debugpy.server.api
from raysleuth.agent.debugger import tune_debugger_sockets
patched = tune_debugger_sockets() if {patch} else False
again = tune_debugger_sockets() if {patch} else False
host, port = debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
c = socket.create_connection((host, port))
body = json.dumps({{"seq": 1, "type": "request", "command": "initialize",
                    "arguments": {{"adapterID": "probe"}}}}).encode()
c.sendall(b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)
buf = b""
while b'"request_seq": 1' not in buf:
    buf += c.recv(65536)
import pydevd
sock = pydevd.get_global_debugger().writer.sock
print(json.dumps({{"patched": patched, "again": again, "answered": b'"success": true' in buf,
                  "nodelay": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)}}))
os._exit(0)
"""


@pytest.mark.parametrize("patch", [True, False], ids=["ours", "debugpy-default"])
def test_the_socket_pydevd_answers_on_has_nagle_off(patch):
    pytest.importorskip("debugpy")
    res = run_probe(PROBE.format(patch=patch), timeout=60)
    assert res["answered"]
    if patch:
        assert (res["patched"], res["again"], res["nodelay"]) == (True, True, 1)
    else:  # the control: what debugpy does by itself
        assert res["nodelay"] == 0
