"""Finding code: the functions reachable from a class or module, the code objects nested in a
function, the lines a code object covers. Pure and read-only; used while arming, never per line.
"""

from __future__ import annotations

import types


def nested_codes(code: types.CodeType):
    """`code` and every code object defined inside it (nested functions, lambdas, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from nested_codes(const)


def code_lines(code: types.CodeType) -> set[int]:
    """The source lines `code` has instructions on."""
    return {line for _s, _e, line in code.co_lines() if line is not None}


def all_lines(code: types.CodeType) -> set[int]:
    """The lines of `code` and of every code object nested in it."""
    return set().union(*(code_lines(c) for c in nested_codes(code)))


def functions_in(obj, seen: set[int], depth: int = 0):
    """Functions reachable from a class or function (methods, properties, static/class methods)."""
    if id(obj) in seen or depth > 4:
        return
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, (staticmethod, classmethod)):
        yield from functions_in(obj.__func__, seen, depth + 1)
    elif isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            if f is not None:
                yield from functions_in(f, seen, depth + 1)
    elif isinstance(obj, type):
        for value in list(vars(obj).values()):
            yield from functions_in(value, seen, depth + 1)
    wrapped = getattr(obj, "__wrapped__", None) if not isinstance(obj, type) else None
    if wrapped is not None:
        yield from functions_in(wrapped, seen, depth + 1)


def loaded_objects(obj) -> list:
    """What to look through when Ray loads `obj` (a class, a function) or a module is imported."""
    if isinstance(obj, types.ModuleType):
        return list(vars(obj).values())
    if isinstance(obj, types.FunctionType):
        # A function pickled by value carries the helpers it calls in its globals.
        return [obj] + [
            v for v in list(obj.__globals__.values()) if isinstance(v, (type, types.FunctionType))
        ]
    return [obj]
