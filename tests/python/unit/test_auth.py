"""Token checks: the token file's mode, the bearer compare, and the HTTP API's 401 answer."""

import logging
import os
import stat

import pytest
from aiohttp.test_utils import TestClient, TestServer
from broker_fakes import services

from raysleuth.broker.auth import check_bearer, load_or_create_token
from raysleuth.broker.http_api import make_app
from raysleuth.shared.errors import SleuthError


def test_token_file_is_owner_only_and_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    token, path = load_or_create_token(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) >= 32
    again, _ = load_or_create_token(tmp_path)
    assert again == token


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_token_file_readable_by_others_is_refused_with_a_hint(tmp_path, monkeypatch, mode):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    token, path = load_or_create_token(tmp_path)
    os.chmod(path, mode)
    with pytest.raises(SleuthError, match="can be read by others") as err:
        load_or_create_token(tmp_path)
    assert f"chmod 600 {path}" in err.value.hint and path.read_text().strip() == token  # left as it was
    path.unlink()
    fresh, _ = load_or_create_token(tmp_path)
    assert fresh != token and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_env_token_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYSLEUTH_TOKEN", "from-env-" + "x" * 23)
    token, path = load_or_create_token(tmp_path)
    assert token == "from-env-" + "x" * 23 and path.read_text().strip() == token


def test_a_short_env_token_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYSLEUTH_TOKEN", "a")
    with pytest.raises(SleuthError, match="RAYSLEUTH_TOKEN is 1 characters: a token needs at least 32"):
        load_or_create_token(tmp_path)


def test_a_token_file_that_is_a_link_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    os.chmod(secret, 0o600)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "token").symlink_to(secret)
    with pytest.raises(SleuthError, match="is a symbolic link"):
        load_or_create_token(state)
    assert secret.read_text() == "PRIVATE KEY"


@pytest.mark.parametrize(
    "header",
    [None, "", "Bearer", "Bearer wrong", "Basic s3cret", "s3cret", "Bearer \udcff\udcfe", "Bearer \ud800"],
)
def test_bearer_check_rejects(header):
    assert not check_bearer(header, "s3cret")


def test_bearer_check_accepts_scheme_case_insensitively():
    assert check_bearer("bearer s3cret", "s3cret") and check_bearer("Bearer s3cret", "s3cret")


class FakeTable:
    """Only the table's seam that the HTTP layer reads."""

    def workers_json(self):
        return [{"id": "w1"}]

    def get(self, wid):
        if wid == "client-gone":  # as when the answer is written to a client that left
            raise ConnectionResetError("Cannot write to closing transport")
        return None

    def nodes(self):
        raise RuntimeError("boom")


@pytest.fixture
async def client():
    c = TestClient(TestServer(make_app(services("s3cret", FakeTable()))))
    await c.start_server()
    yield c
    await c.close()


async def test_request_without_token_gets_401_json_with_hint(client):
    resp = await client.get("/v1/workers")
    assert resp.status == 401
    body = await resp.json()
    assert "token" in body["error"].lower() and "/state/token" not in body["hint"]  # no path to strangers


async def test_request_with_token_gets_workers(client):
    resp = await client.get("/v1/workers", headers={"Authorization": "Bearer s3cret"})
    assert resp.status == 200 and await resp.json() == [{"id": "w1"}]


async def test_unknown_path_and_unknown_worker_get_404_json(client):
    h = {"Authorization": "Bearer s3cret"}
    for path in ("/v1/nope", "/v1/workers/zzz"):
        resp = await client.get(path, headers=h)
        assert resp.status == 404 and "hint" in await resp.json()


async def test_handler_failure_is_500_json_and_server_keeps_serving(client):
    h = {"Authorization": "Bearer s3cret"}
    resp = await client.get("/v1/nodes", headers=h)
    assert resp.status == 500 and "boom" in (await resp.json())["error"]
    assert (await client.get("/v1/workers", headers=h)).status == 200


def every_route(app) -> list[tuple[str, str]]:
    """(method, path) of every route in the router table, `{id}` filled in."""
    out = []
    for route in app.router.routes():
        info = route.resource.get_info()
        path = info.get("path") or info.get("formatter", "")
        out.append((route.method, path.replace("{id}", "x")))
    return out


async def test_every_route_in_the_router_table_refuses_a_request_without_the_token(client):
    routes = every_route(client.server.app)
    assert len(routes) >= 20 and ("GET", "/v1/workers/x/logs") in routes
    for method, path in routes:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            resp = await client.request(method, path, headers=headers)
            assert resp.status == 401, (method, path, headers)
            if method != "HEAD":  # aiohttp adds HEAD for every GET: no body
                hint = (await resp.json())["hint"]
                assert "/state/token" not in hint and "file `token` of the broker's state dir" in hint


@pytest.mark.parametrize(
    "host, exposed",
    [("127.0.0.1", False), ("127.0.0.2", False), ("::1", False), ("localhost", False), ("0.0.0.0", True),
     ("10.1.2.3", True), ("::", True), ("head-node", True)],
)  # fmt: skip
def test_the_broker_warns_when_it_listens_beyond_loopback(host, exposed):
    from raysleuth.broker.connect import exposure_warning

    warning = exposure_warning(host)
    assert (warning is not None) == exposed
    if exposed:
        assert host in warning and "--host 127.0.0.1" in warning and "token" in warning


async def test_a_client_that_left_is_not_logged_as_an_error_and_the_server_keeps_serving(client, caplog):
    h = {"Authorization": "Bearer s3cret"}
    with caplog.at_level(logging.DEBUG):
        resp = await client.get("/v1/workers/client-gone", headers=h)
        assert resp.status == 499
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert "the client left" in caplog.text
    assert (await client.get("/v1/workers", headers=h)).status == 200
