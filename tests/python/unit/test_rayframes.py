"""Ray's executor frames told apart in responses the DAP front door passes on (issue #13)."""

from __future__ import annotations

from raysleuth.broker.debug.rayframes import is_ray_path, tidy

RAY = "/venv/lib/python3.12/site-packages/ray"
USER = "/home/me/app/train.py"


def test_stack_trace_dims_ray_frames_and_leaves_the_users_alone():
    body = {
        "stackFrames": [
            {"id": 1, "name": "_divide", "line": 12, "source": {"path": USER, "name": "train.py"}},
            {
                "id": 2,
                "name": "actor_method_executor",
                "line": 700,
                "source": {"path": f"{RAY}/_private/function_manager.py"},
            },
            {"id": 3, "name": "ray._raylet.execute_task", "line": 0},
        ],
        "totalFrames": 3,
    }
    out = tidy("stackTrace", body)
    user, wrapper, executor = out["stackFrames"]
    assert user == body["stackFrames"][0]
    assert wrapper["presentationHint"] == "subtle"
    assert wrapper["source"]["presentationHint"] == "deemphasize"
    assert executor["presentationHint"] == "subtle"
    assert out["totalFrames"] == 3
    assert "presentationHint" not in body["stackFrames"][1], "the forwarded body is not changed in place"


def test_exception_info_loses_the_paused_at_note_and_rays_traceback_entries():
    tb = (
        "Traceback (most recent call last):\n"
        f'  File "{RAY}/_private/function_manager.py", line 700, in actor_method_executor\n'
        "    return method(__ray_actor, *args, **kwargs)\n"
        f'  File "{USER}", line 12, in _divide\n'
        "    return total / 0\n"
        "ZeroDivisionError: float division by zero\n"
    )
    note = "(note: full exception trace is shown but execution is paused at: ray._raylet.execute_task)"
    name = f"ZeroDivisionError       {note}"
    body = {
        "exceptionId": name,
        "description": "float division by zero",
        "breakMode": "unhandled",
        "details": {"typeName": name, "message": "float division by zero", "stackTrace": tb},
    }
    out = tidy("exceptionInfo", body)
    assert out["exceptionId"] == "ZeroDivisionError"
    assert out["details"]["typeName"] == "ZeroDivisionError"
    assert out["details"]["stackTrace"] == (
        "Traceback (most recent call last):\n"
        f'  File "{USER}", line 12, in _divide\n'
        "    return total / 0\n"
        "ZeroDivisionError: float division by zero\n"
    )


def test_other_bodies_pass_unchanged():
    assert tidy("variables", {"variables": []}) == {"variables": []}
    assert tidy("stackTrace", {"stackFrames": None}) == {"stackFrames": None}
    assert tidy("exceptionInfo", {}) == {}


def test_ray_paths():
    assert is_ray_path(f"{RAY}/_private/worker.py")
    assert is_ray_path("/src/ray/python/ray/_raylet.pyx")
    assert not is_ray_path(USER)
    assert not is_ray_path("/venv/lib/python3.12/site-packages/raysleuth/agent/postmortem.py")
    assert not is_ray_path(None)
