"""The language server's unbounded-expression check: the pure check lives in the model
(raysleuth/model/unbounded.py), where the broker uses the same one to refuse such an expression
with a 400 before it reaches a worker (#37)."""

from __future__ import annotations

from raysleuth.model.unbounded import unbounded_reason

__all__ = ["unbounded_reason"]
