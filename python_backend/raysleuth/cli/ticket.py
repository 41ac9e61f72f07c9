"""`raysleuth ticket`: a single-use attach ticket (`POST /v1/tickets`) for a DAP client of another
editor, which puts it in `attach` where it would have put the broker's token."""

from __future__ import annotations

import argparse
import json

EXAMPLES = """\
A ticket works for one attach, within 60 s (RAYSLEUTH_TICKET_TTL_S on the broker), and only on
the target it names (none: any). A process that took a stale DAP port gets one spent ticket, never
the token. Print it, or with --json {"ticket", "expires_in", "single_use", "dap"}: "dap" is the
DAP address of the broker you reached (its port checked to be yours).

examples:
  raysleuth ticket --rank 0
  raysleuth ticket --worker 3f2a --json

nvim-dap (a fresh ticket each time the configuration runs; a fixed DAP port from
`raysleuth broker --dap-port 7312`):
  local dap = require("dap")
  dap.adapters.raysleuth = { type = "server", host = "127.0.0.1", port = 7312 }
  dap.configurations.python = { {
    type = "raysleuth", request = "attach", name = "Ray: rank 0", rank = 0,
    ticket = function() return vim.trim(vim.fn.system({ "raysleuth", "ticket", "--rank", "0" })) end,
  } }

Emacs dape:
  (add-to-list 'dape-configs
    `(raysleuth host "127.0.0.1" port 7312 :request "attach" :rank 0
      :ticket ,(lambda () (string-trim (shell-command-to-string "raysleuth ticket --rank 0")))))
"""


def add_ticket_parser(sub, client_opts, fn) -> None:
    t = sub.add_parser(
        "ticket",
        help="a single-use attach ticket for nvim-dap, dape and other DAP clients",
        description="Print a single-use attach ticket: DAP `attach {ticket: T, ...}` in place of the token.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = t.add_mutually_exclusive_group()
    which.add_argument("--worker", help="bind it to this worker id (as attach names it)")
    which.add_argument("--rank", type=int, help="bind it to the worker of this rank")
    which.add_argument("--crash", help="bind it to this crash record (a read-only replay)")
    t.add_argument("--job", help="with --rank: the job, when ranks of two jobs collide")
    t.add_argument("--json", action="store_true", help="print the JSON, with the broker's DAP address")
    client_opts(t)
    t.set_defaults(fn=fn)


def ticket_body(args) -> dict:
    body: dict = {}
    for key in ("worker", "rank", "crash", "job"):
        value = getattr(args, key, None)
        if value is not None:
            body[key] = value
    return body


def run_ticket(client, args) -> int:
    answer = client.post("/v1/tickets", ticket_body(args))
    if args.json:
        answer = {**answer, "dap": client.get("/v1/status").get("dap")}
        print(json.dumps(answer))
    else:
        print(answer["ticket"])
    return 0
