"""A step or continue in a worker with several threads took ~200 ms (issue 27): pydevd wakes the
wrong thread after it resumes one. `_update_stepping_info(info)` reuses its argument as the loop
variable of `for info in _all_infos` (pydevd_additional_thread_info_regular.py, and its Cython
copy), so the `notify_event.set()` at its end goes to whichever thread the set lists last; the
resumed thread then sleeps in `notify_event.wait(TIMEOUT_SLOW)` (0.2 s) before it runs. With
one Python thread the last one is the right one; a Ray worker always has several.

`install()` wraps pydevd's resume paths (continue, the steps, set-next-statement) so that each
also sets the event of the thread it resumed: one extra wake costs at most one more pass of the
wait loop. It changes no file of debugpy, leaves a pydevd it does not recognise alone, and
never raises.
"""

from __future__ import annotations

import sys

from raysleuth.agent.log import swallow

_MARK = "raysleuth_wakes_its_thread"


def install() -> bool:
    """True when the resume paths wake their own thread (now or already)."""
    try:
        return _install()
    except Exception:  # noqa: BLE001 - a pydevd of another shape: steps stay slow, nothing breaks
        swallow("making pydevd wake the thread it resumes")
        return False


def _install() -> bool:
    pydevd = sys.modules.get("pydevd")
    if pydevd is None:
        return False
    from _pydevd_bundle import pydevd_api, pydevd_comm, pydevd_thread_lifecycle
    from _pydevd_bundle.pydevd_constants import get_thread_id

    if getattr(pydevd_thread_lifecycle.internal_run_thread, _MARK, False):
        return True
    find_thread = pydevd_thread_lifecycle.pydevd_find_thread_by_id

    def wake(thread) -> None:
        py_db = pydevd.get_global_debugger()
        if py_db is not None and thread is not None:
            py_db.get_internal_queue_and_event(get_thread_id(thread))[1].set()

    def after(fn, thread_of):
        def wrapped(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            finally:
                try:
                    wake(thread_of(*args))
                except Exception:  # noqa: BLE001 - the resume itself went through
                    swallow("waking the resumed thread")

        setattr(wrapped, _MARK, True)
        return wrapped

    # continue (and the other threads a step lets run)
    pydevd_thread_lifecycle.internal_run_thread = after(
        pydevd_thread_lifecycle.internal_run_thread, lambda thread, *_: thread
    )
    # next / stepIn / stepOut, and step into a target: pydevd_api looks them up as its globals
    by_id = lambda py_db, thread_id, *_: find_thread(thread_id)  # noqa: E731
    pydevd_api.internal_step_in_thread = after(pydevd_comm.internal_step_in_thread, by_id)
    pydevd_api.internal_smart_step_into = after(pydevd_comm.internal_smart_step_into, by_id)
    # set next statement / run to line
    cls = pydevd_comm.InternalSetNextStatementThread
    cls.do_it = after(cls.do_it, lambda self, *_: find_thread(self.thread_id))
    return True
