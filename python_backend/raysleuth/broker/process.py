"""Start a broker as a child process and wait for its ready line (used by the demo and tests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from raysleuth.shared.errors import SleuthError
from raysleuth.shared.privfiles import open_private_append, secure_state_dir


class BrokerProcess:
    def __init__(self, proc: subprocess.Popen, ready: dict, log_path: Path) -> None:
        self.proc = proc
        self.ready = ready
        self.log_path = log_path

    @property
    def http(self) -> str:
        return self.ready["http"]

    @property
    def token(self) -> str:
        return Path(self.ready["token_file"]).read_text().strip()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def start_broker(
    state_dir: Path,
    address: str | None = None,
    env: dict | None = None,
    timeout: float = 90.0,
    extra_args: list[str] | None = None,
) -> BrokerProcess:
    secure_state_dir(state_dir)
    log_path = state_dir / "broker.log"
    cmd = [sys.executable, "-m", "raysleuth", "broker", "--state-dir", str(state_dir)]
    if address:
        cmd += ["--address", address]
    cmd += extra_args or []
    child_env = dict(os.environ if env is None else env)
    child_env.pop("RAYSLEUTH", None)  # the broker is no Ray worker
    log = open_private_append(log_path)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=child_env, start_new_session=True)
    log.close()
    line: list[bytes] = []
    stdout = proc.stdout
    assert stdout is not None  # stdout=PIPE
    reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not line or not line[0]:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
        tail = log_path.read_text(errors="replace")[-2000:]
        raise SleuthError(
            f"The broker did not become ready within {timeout:.0f} s "
            f"(exit status {proc.returncode}).\n{tail}",
            f"See {log_path} for the broker's log.",
        )
    return BrokerProcess(proc, json.loads(line[0]), log_path)
