import json

import pytest

from raysleuth.client import BrokerClient
from raysleuth.errors import BrokerUnreachable


def test_discovers_broker_from_state_dir(tmp_path, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_BROKER", raising=False)
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    (tmp_path / "tok").write_text("abc\n")
    (tmp_path / "broker.json").write_text(
        json.dumps(
            {
                "ready": True,
                "http": "http://127.0.0.1:9",
                "dap": "127.0.0.1:10",
                "token_file": str(tmp_path / "tok"),
            }
        )
    )
    c = BrokerClient.discover(state_dir=tmp_path)
    assert (c.url, c.token) == ("http://127.0.0.1:9", "abc")


def test_flag_and_env_win_over_broker_file(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYSLEUTH_TOKEN", "envtok")
    monkeypatch.setenv("RAYSLEUTH_BROKER", "http://env:1")
    assert BrokerClient.discover(state_dir=tmp_path).url == "http://env:1"
    c = BrokerClient.discover("http://flag:2", state_dir=tmp_path)
    assert (c.url, c.token) == ("http://flag:2", "envtok")


def test_missing_broker_file_says_how_to_start_one(tmp_path, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_BROKER", raising=False)
    with pytest.raises(BrokerUnreachable) as err:
        BrokerClient.discover(state_dir=tmp_path)
    assert "raysleuth broker" in err.value.hint


def test_connection_refused_is_a_clear_error():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(BrokerUnreachable) as err:
        BrokerClient(f"http://127.0.0.1:{port}", "t", timeout=2).workers()
    assert "Cannot reach the broker" in err.value.message and "raysleuth broker" in err.value.hint
