"""Token checks: the token file's mode, the bearer compare, and the HTTP API's 401 answer."""

import os
import stat

import pytest
from aiohttp.test_utils import TestClient, TestServer

from raysleuth.broker.auth import check_bearer, load_or_create_token
from raysleuth.broker.events import EventHub
from raysleuth.broker.http_api import Services, make_app


def test_token_file_is_owner_only_and_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    token, path = load_or_create_token(tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(token) >= 32
    again, _ = load_or_create_token(tmp_path)
    assert again == token


def test_token_file_readable_by_others_is_replaced(tmp_path, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    token, path = load_or_create_token(tmp_path)
    os.chmod(path, 0o644)
    fresh, _ = load_or_create_token(tmp_path)
    assert fresh != token and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_env_token_is_used(tmp_path, monkeypatch):
    monkeypatch.setenv("RAYSLEUTH_TOKEN", "from-env")
    token, path = load_or_create_token(tmp_path)
    assert token == "from-env" and path.read_text().strip() == "from-env"


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer wrong", "Basic s3cret", "s3cret"])
def test_bearer_check_rejects(header):
    assert not check_bearer(header, "s3cret")


def test_bearer_check_accepts_scheme_case_insensitively():
    assert check_bearer("bearer s3cret", "s3cret") and check_bearer("Bearer s3cret", "s3cret")


class FakeTable:
    """Only the table's seam that the HTTP layer reads."""

    def workers_json(self):
        return [{"id": "w1"}]

    def get(self, wid):
        return None

    def nodes(self):
        raise RuntimeError("boom")


@pytest.fixture
async def client():
    c = TestClient(TestServer(make_app(Services("s3cret", "/state/token", EventHub(), FakeTable(), dict))))
    await c.start_server()
    yield c
    await c.close()


async def test_request_without_token_gets_401_json_with_hint(client):
    resp = await client.get("/v1/workers")
    assert resp.status == 401
    body = await resp.json()
    assert "token" in body["error"].lower() and "/state/token" in body["hint"]


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
