"""DAP's hitCondition, parsed once: the broker validates it, the agent counts hits with it.

Loaded in every armed worker: standard library only.
"""

from __future__ import annotations


class HitCondition:
    """`5` (the 5th hit), `>5`, `>=5`, `<5`, `<=5`, `==5`, `%5`, as debugpy reads them."""

    OPS = (">=", "<=", "==", ">", "<", "%")

    def __init__(self, text: str) -> None:
        t = str(text).strip()
        op = next((o for o in self.OPS if t.startswith(o)), "==")
        num = t[len(op) :].strip() if t.startswith(op) else t
        self.text = t
        self.op, self.n = op, int(num)  # ValueError on nonsense: the broker checks it first
        if self.op == "%" and self.n <= 0:
            raise ValueError("% needs a positive number")

    def __call__(self, hits: int) -> bool:
        n, op = self.n, self.op
        if op == "%":
            return hits % n == 0
        return {">=": hits >= n, "<=": hits <= n, "==": hits == n, ">": hits > n, "<": hits < n}[op]

    def __repr__(self) -> str:
        return f"HitCondition({self.text!r})"
