"""The requests of the Debug Adapter Protocol, by name (the specification's list, 1.68): what a
client may ask a debug adapter. Standard library only."""

from __future__ import annotations

DAP_REQUESTS = frozenset(
    {
        "attach", "breakpointLocations", "cancel", "completions", "configurationDone", "continue",
        "dataBreakpointInfo", "disassemble", "disconnect", "evaluate", "exceptionInfo", "goto",
        "gotoTargets", "initialize", "launch", "loadedSources", "locations", "modules", "next",
        "pause", "readMemory", "restart", "restartFrame", "reverseContinue", "scopes",
        "setBreakpoints", "setDataBreakpoints", "setExceptionBreakpoints", "setExpression",
        "setFunctionBreakpoints", "setInstructionBreakpoints", "setVariable", "source",
        "stackTrace", "stepBack", "stepIn", "stepInTargets", "stepOut", "terminate",
        "terminateThreads", "threads", "variables", "writeMemory",
    }
)  # fmt: skip
"""A name outside it, before an attach, is answered "unknown command" (after one, the worker's
debugpy answers it: it has requests of its own)."""
