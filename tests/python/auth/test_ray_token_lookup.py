"""The broker finds Ray's token exactly where Ray 2.60's own loader does (its C++
`AuthenticationTokenLoader`, asked through ray._raylet), case by case: RAY_AUTH_TOKEN, then
RAY_AUTH_TOKEN_PATH, then $HOME/.ray/auth_token, with Ray's stripping and Ray's errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

COMPARE = r"""
import json, os, sys
from ray._raylet import AuthenticationTokenLoader
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.raytoken import find_token

def ray_says():
    loader = AuthenticationTokenLoader.instance()
    loader.reset_cache()
    try:
        if not loader.has_token(ignore_auth_mode=True):
            return None
        return loader.get_raw_token(ignore_auth_mode=True)
    except Exception:
        return "error"

def ours():
    try:
        t = find_token()
    except SleuthError:
        return "error"
    return t.value if t else None

out = []
for case in json.loads(sys.argv[1]):
    for k in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        os.environ.pop(k, None)
    os.environ.update(case["env"])
    home = os.path.join(os.environ["HOME"], ".ray", "auth_token")
    if case["home_file"] is None:
        os.path.exists(home) and os.remove(home)
    else:
        os.makedirs(os.path.dirname(home), exist_ok=True)
        open(home, "w").write(case["home_file"])
    out.append({"name": case["name"], "ray": ray_says(), "ours": ours()})
print(json.dumps(out))
"""


def test_find_token_agrees_with_rays_own_loader(tmp_path):
    named = tmp_path / "named_token"
    named.write_text("  from-path \n\n")
    blank = tmp_path / "blank_token"
    blank.write_text(" \n")
    cases = [
        {"name": "home file only", "env": {}, "home_file": "from-home\n"},
        {"name": "env wins over the file", "env": {"RAY_AUTH_TOKEN": " from-env "}, "home_file": "from-home"},
        {"name": "blank env falls through", "env": {"RAY_AUTH_TOKEN": ""}, "home_file": "from-home"},
        {
            "name": "named file, stripped",
            "env": {"RAY_AUTH_TOKEN_PATH": str(named)},
            "home_file": "from-home",
        },
        {
            "name": "named file missing",
            "env": {"RAY_AUTH_TOKEN_PATH": str(tmp_path / "nope")},
            "home_file": "x",
        },
        {"name": "named file blank", "env": {"RAY_AUTH_TOKEN_PATH": str(blank)}, "home_file": "from-home"},
        {"name": "empty path variable", "env": {"RAY_AUTH_TOKEN_PATH": ""}, "home_file": "from-home"},
        {"name": "blank home file", "env": {}, "home_file": "  \n"},
        {"name": "nothing anywhere", "env": {}, "home_file": None},
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    env["HOME"] = str(tmp_path / "home")
    out = subprocess.run(
        [sys.executable, "-c", COMPARE, json.dumps(cases)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads(out.stdout.strip().splitlines()[-1])
    assert [(r["name"], r["ours"]) for r in results] == [(r["name"], r["ray"]) for r in results]
    assert [r["ours"] for r in results] == [
        "from-home", "from-env", "from-home", "from-path", "error", "error", "from-home", None, None
    ]  # fmt: skip
