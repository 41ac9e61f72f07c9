"""Roles and worker groups of verl-style programs (issue 38), read without importing verl.

verl 0.9.1 (`verl/single_controller/ray/base.py`) makes its workers this way:
- a `RayWorkerGroup` names each actor `f"{name_prefix}{ClassName}_{pg_idx}:{local_rank}"`
  (`criticCriticWorker_0:1`; the prefix is 6 random letters and digits unless given) and sets
  `WG_PREFIX=<name_prefix>`, `RANK`, `WORLD_SIZE` in its runtime_env: every group of a job has
  ranks 0..N-1, so a rank alone does not say which worker;
- `create_colocated_worker_cls` hosts several roles in one `WorkerDict` actor whose methods are
  `<role>_<method>` closures over `key` (the role) and `name` (the method), its instance keeping
  `worker_dict = {role: instance}`;
- `create_colocated_worker_cls_fused` makes `FusedWorker_<role>_<role>` with a class attribute
  `raw_cls_dict = {role: class}`; every call runs `_fuw_execute("<role>_fwmn_<method>", ...)`.

Pure and standard library only: the agent (in every worker) and the broker both use it.
"""

from __future__ import annotations

import re

FUSED_CLASS_PREFIX = "FusedWorker"
FUSED_METHOD = "_fuw_execute"
FUSED_SEPARATOR = "_fwmn_"
COLOCATED_CLASS = "WorkerDict"
PREFIX_ENV = "WG_PREFIX"
"""verl's worker group name prefix, set in each worker's environment."""
MAX_ROLES = 32
MAX_NAME = 128
_ACTOR_NAME_TAIL = re.compile(r"_\d+:\d+$")
"""`_<pg_idx>:<local_rank>`, the end of a verl actor name."""
_FRAMES = 128
"""How far out a stack is searched for the role running now."""


def worker_group_of(
    actor_class: str | None, actor_name: str | None, env_prefix: str | None = None
) -> str | None:
    """The worker group: verl's `WG_PREFIX` where the worker says it, else the prefix of a verl
    actor name (`criticCriticWorker_0:1` of class `CriticWorker` → `critic`); None otherwise."""
    if env_prefix:
        return env_prefix[:MAX_NAME]
    if not actor_class or not actor_name:
        return None
    m = _ACTOR_NAME_TAIL.search(actor_name)
    if m is None:
        return None
    head = actor_name[: m.start()]
    if not head.endswith(actor_class):
        return None
    return head[: -len(actor_class)][:MAX_NAME] or None


def role(name: str, class_name: str | None) -> dict:
    """One hosted role as the worker object carries it."""
    return {"name": str(name)[:MAX_NAME], "class_name": class_name[:MAX_NAME] if class_name else None}


def roles_of(cls, instance=None) -> list[dict]:
    """The roles an actor class hosts ([] for an ordinary actor): a fused class's `raw_cls_dict`,
    or a `WorkerDict`'s role closures, with each role's class from the instance's `worker_dict`
    once its `__init__` made them. Reads class and instance dicts only: no user `__getattr__`."""
    try:
        found = _fused_roles(cls) or _colocated_roles(cls)
        if not found:
            return []
        made = _instance_dict(instance, "worker_dict") or _instance_dict(instance, "fused_worker_dict")
        out = []
        for name, class_name in found[:MAX_ROLES]:
            if class_name is None and made and name in made:
                class_name = type(made[name]).__name__
            out.append(role(name, class_name))
        return out
    except Exception:  # noqa: BLE001 - a class made by other means: no roles
        return []


def _class_attr(cls, name: str):
    for klass in getattr(cls, "__mro__", ()):
        if name in vars(klass):
            return vars(klass)[name]
    return None


def _fused_roles(cls) -> list[tuple[str, str | None]]:
    raw = _class_attr(cls, "raw_cls_dict")
    if not isinstance(raw, dict) or not _class_attr(cls, FUSED_METHOD):
        return []
    out = []
    for name, klass in list(raw.items()):
        klass = _class_attr(klass, "__ray_actor_class__") or klass
        out.append((str(name), getattr(klass, "__name__", None)))
    return out


def _colocated_roles(cls) -> list[tuple[str, str | None]]:
    """A WorkerDict's roles: the `key` each of its bound role methods closes over."""
    names: list[str] = []
    for klass in getattr(cls, "__mro__", ())[:4]:
        for fn in list(vars(klass).values()):
            code = getattr(fn, "__code__", None)
            if code is None or "key" not in code.co_freevars or "name" not in code.co_freevars:
                continue
            if "generate_function.<locals>." not in getattr(fn, "__qualname__", ""):
                continue  # a closure of the user's own: verl's are made by `generate_function`
            cell = fn.__closure__[code.co_freevars.index("key")]
            key = cell.cell_contents
            if isinstance(key, str) and key not in names:
                names.append(key)
    return [(n, None) for n in names]


def _instance_dict(instance, name: str) -> dict | None:
    if instance is None:
        return None
    try:
        value = object.__getattribute__(instance, "__dict__").get(name)
        return dict(value) if isinstance(value, dict) else None
    except (AttributeError, TypeError, RuntimeError):  # a dict still being filled: next time
        return None


def complete(roles: list[dict]) -> bool:
    """Every role's class is known (nothing more to read later)."""
    return all(r.get("class_name") for r in roles)


def names_of(roles) -> set[str]:
    """Every name a `[role X]` scope may use for these roles: role names and role classes."""
    out: set[str] = set()
    for r in roles or ():
        if isinstance(r, dict):
            out.update(x for x in (r.get("name"), r.get("class_name")) if x)
    return out


def user_task(task: str | None, roles, call: dict | None = None) -> tuple[str | None, str | None]:
    """Ray's task name → (the user's method, the role running it) for a worker hosting roles:
    `WorkerDict.actor_rollout_update_actor` → `ActorRolloutRefWorker.update_actor`, role
    `actor_rollout`; `FusedWorker_actor_critic._fuw_execute` → the call its agent saw running
    (`call`: {role, task}). Anything else comes back as it is, role None."""
    roles = [r for r in roles or () if isinstance(r, dict) and r.get("name")]
    if not roles:
        return task, None
    if not task:
        return (call.get("task"), call.get("role")) if call else (task, None)
    _, _, method = task.rpartition(".")
    if method == FUSED_METHOD:
        return (call.get("task") or task, call.get("role")) if call else (task, None)
    for r in sorted(roles, key=lambda r: -len(r["name"])):  # `actor_rollout_ref` before `actor`
        if method.startswith(r["name"] + "_"):
            return f"{r.get('class_name') or r['name']}.{method[len(r['name']) + 1 :]}", r["name"]
    return task, None


def call_in(frame, roles: list[dict]) -> dict | None:
    """The role call running in a stack (its innermost frame given): {role, task}, from verl's
    fused `_fuw_execute` frame or a WorkerDict role method's frame; None when none is on it."""
    classes = {r["name"]: r.get("class_name") for r in roles}
    f = frame
    for _ in range(_FRAMES):
        if f is None:
            return None
        code = f.f_code
        found: tuple | None = None
        if code.co_name == FUSED_METHOD:
            local = f.f_locals
            found = (local.get("cls_name"), local.get("method_name"))
            if isinstance(found[1], str) and FUSED_SEPARATOR in found[1]:  # before its split
                found = tuple(found[1].split(FUSED_SEPARATOR, 1))
        elif (
            "key" in code.co_freevars
            and "name" in code.co_freevars
            and code.co_name in ("func", "async_func")
            and "generate_function.<locals>." in getattr(code, "co_qualname", "generate_function.<locals>.")
        ):
            local = f.f_locals
            found = (local.get("key"), local.get("name"))
        if found is not None and isinstance(found[0], str) and found[0] in classes:
            name = found[0]
            method = found[1] if isinstance(found[1], str) else None
            owner = classes.get(name) or name
            return {"role": name, "task": f"{owner}.{method}"[:MAX_NAME] if method else None}
        f = f.f_back
    return None


def role_in(frame, roles: list[dict]) -> str | None:
    """The role whose code runs in a stack now: the innermost frame whose `self` is an instance
    of a hosted role's class (a method shared by several roles counts for the one it runs for;
    a class hosted by two roles does not tell), else the role call on it (`call_in`)."""
    classes = [r.get("class_name") for r in roles]
    by_class = {
        r["class_name"]: r["name"]
        for r in roles
        if r.get("class_name") and classes.count(r["class_name"]) == 1
    }
    f = frame
    for _ in range(_FRAMES):
        if f is None:
            break
        code = f.f_code
        if by_class and code.co_argcount and code.co_varnames[0] == "self":
            owner = type(f.f_locals.get("self")).__name__
            if owner in by_class:
                return by_class[owner]
        f = f.f_back
    call = call_in(frame, roles)
    return call["role"] if call else None
