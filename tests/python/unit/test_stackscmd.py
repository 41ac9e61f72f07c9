"""`raysleuth stacks`: the query it sends, what it prints, and its watch mode leaving the broker's
sampler as it found it."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

from raysleuth.cli import build_parser
from raysleuth.cli import stacks as stackscmd

RESULT = {"workers": [{"worker": "w0"}], "elapsed_ms": 41.7, "text": "job 01: 1 worker(s)\n  rank 0 (1): f"}


def args_of(*argv):
    return build_parser().parse_args(["stacks", *argv])


class Client:
    def __init__(self, watch_on=False):
        self.calls = []
        self.url, self.token = "http://x", "t"
        self.watch = {"on": watch_on, "interval": 5.0, "samples": 2}

    def get(self, path):
        self.calls.append(("GET", path))
        return self.watch if path == "/v1/stacks/watch" else RESULT

    def put(self, path, body):
        self.calls.append(("PUT", path, body))
        return {"on": True, "interval": body["interval"], "samples": body["samples"]}

    def delete(self, path):
        self.calls.append(("DELETE", path))


def test_the_query_carries_only_the_options_given():
    assert stackscmd.query_path(args_of()) == "/v1/stacks"
    a = args_of("--job", "01", "--ranks", "0-7,9", "--workers", "a,b", "--native", "--timeout", "3")
    assert stackscmd.query_path(a) == "/v1/stacks?job=01&ranks=0-7%2C9&workers=a%2Cb&timeout=3.0&native=1"


def test_it_prints_the_brokers_text_or_its_json():
    out = io.StringIO()
    assert stackscmd.run_stacks(Client(), args_of(), out) == 0
    assert out.getvalue() == RESULT["text"] + "\n(1 worker(s) in 42 ms)\n"
    out = io.StringIO()
    stackscmd.run_stacks(Client(), args_of("--json"), out)
    assert json.loads(out.getvalue()) == RESULT


def test_watch_turns_the_sampler_on_prints_hangs_and_turns_it_off_again(monkeypatch):
    hang = {"job_id": "01", "ranks_text": "0-3", "samples": 3, "text": "job 01: ..."}
    events = [("stacks", RESULT), ("hang", hang)]
    monkeypatch.setattr(Client, "events", lambda self, names=None, timeout=60: iter(events), raising=False)
    client, out = Client(), io.StringIO()
    assert stackscmd.run_stacks(client, args_of("--watch", "2", "--samples", "4"), out) == 0
    assert client.calls[1] == ("PUT", "/v1/stacks/watch", {"interval": 2.0, "samples": 4})
    assert client.calls[-1] == ("DELETE", "/v1/stacks/watch")
    text = out.getvalue()
    assert "watching every 2 s" in text and "SUSPECTED HANG: job 01 ranks 0-3" in text
    client = Client(watch_on=True)  # someone else's sampler: put back as it was
    stackscmd.run_stacks(client, SimpleNamespace(watch=10.0, samples=3, json=False), io.StringIO())
    assert client.calls[-1] == ("PUT", "/v1/stacks/watch", {"interval": 5.0, "samples": 2})
    assert args_of("--watch").watch == 10.0
