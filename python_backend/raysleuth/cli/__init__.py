"""`raysleuth` command line: subcommands only, each delegating to its module."""

from __future__ import annotations

import argparse
import json
import os
import sys

from raysleuth.shared.errors import SleuthError


def _client(args):
    from raysleuth.cli.argcheck import check_url_syntax
    from raysleuth.client import BrokerClient

    if url := args.broker or os.environ.get("RAYSLEUTH_BROKER"):
        check_url_syntax(url, "--broker" if args.broker else "RAYSLEUTH_BROKER")
    return BrokerClient.discover(args.broker, args.state_dir)


def cmd_broker(args) -> int:
    from raysleuth.shared.versions import check_versions

    check_versions()  # an unsupported Python or Ray: a clear error now, not a strange one later
    from raysleuth.broker.app import main
    from raysleuth.shared.paths import state_dir

    return main(args.address, args.host, args.port, args.dap_port, state_dir(args.state_dir))


def cmd_list(args) -> int:
    from raysleuth.cli.table import format_workers

    workers = _client(args).workers()
    if args.json:
        print(json.dumps(workers, indent=1))
    elif not workers:
        print("No workers yet. Start a Ray program (with RAYSLEUTH=1 for the agent).")
    else:
        print(format_workers(workers))
    return 0


def cmd_attach(args) -> int:
    import asyncio

    from raysleuth.cli.attach import run_attach, split_target
    from raysleuth.shared.errors import BadRequest

    if not args.worker and args.rank is None:
        raise BadRequest(
            "Say which worker: raysleuth attach WORKER_ID, or --rank N.",
            "`raysleuth list` shows worker ids and ranks.",
        )
    client = _client(args)
    dap = client.get("/v1/status").get("dap")
    target = split_target(args.worker, args.rank, args.job)
    ticket = client.post("/v1/tickets", target)["ticket"]  # single-use, bound: never the token on DAP
    return asyncio.run(run_attach(dap, ticket, target))


def cmd_ticket(args) -> int:
    from raysleuth.cli.ticket import run_ticket

    return run_ticket(_client(args), args)


def cmd_evaluate(args) -> int:
    from raysleuth.cli.evaluate import run_evaluate

    return run_evaluate(_client(args), args)


def cmd_kill(args) -> int:
    from raysleuth.cli.evaluate import run_kill

    return run_kill(_client(args), args)


def cmd_audit(args) -> int:
    from raysleuth.cli.audit import run_audit

    return run_audit(_client(args), args)


def cmd_break(args) -> int:
    from raysleuth.cli.breaks import run_break

    return run_break(_client(args), args)


def cmd_logs(args) -> int:
    from raysleuth.cli.breaks import follow_logs

    return follow_logs(_client(args), json_out=args.json, follow=args.follow)


def cmd_crashes(args) -> int:
    from raysleuth.cli.crashes import run_crashes

    return run_crashes(_client(args), args.id, args.json)


def cmd_cases(args) -> int:
    from raysleuth.cli.cases import run_cases

    return run_cases(_client(args), args.id, args.json)


def cmd_collectives(args) -> int:
    from raysleuth.cli.collectives import run_collectives

    return run_collectives(_client(args), args.job, args.json)


def cmd_watch(args) -> int:
    from raysleuth.cli.watch import run_watch

    return run_watch(_client(args), args)


def cmd_events(args) -> int:
    from raysleuth.cli.events import run_events

    return run_events(_client(args), args.since, args.name, args.json, args.export)


def cmd_inspect(args) -> int:
    from raysleuth.cli.inspect import run_inspect

    return run_inspect(_client(args), args.name, args.step, args.rtol, args.json)


def cmd_stacks(args) -> int:
    from raysleuth.cli.stacks import run_stacks

    return run_stacks(_client(args), args)


def cmd_rerun(args) -> int:
    from raysleuth.cli.rerun import run_rerun

    return run_rerun(_client(args), args.id, args.json)


def cmd_group(args) -> int:
    from raysleuth.cli.groups import run_group

    return run_group(_client(args), args)


def cmd_doctor(args) -> int:
    from raysleuth.cli.doctor import run_doctor

    return run_doctor(_client(args), args.json)


def cmd_lsp(args) -> int:
    from raysleuth.lsp.server import run_server

    return run_server(args.broker, args.state_dir, args.token_file)


def cmd_demo(args) -> int:
    from raysleuth.cli.demo import run_demo

    return run_demo(state_dir=args.state_dir, steps=args.steps, forever=args.forever)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="raysleuth", description="Debug a Ray cluster like one process.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def client_opts(sp):
        sp.add_argument("--broker", help="broker URL (default: RAYSLEUTH_BROKER, else broker.json)")
        sp.add_argument("--state-dir", help="Ray Sleuth state dir (default: ~/.raysleuth)")

    b = sub.add_parser("broker", help="run the broker for a Ray cluster (on its head node)")
    b.add_argument("--address", help="Ray address (default: RAY_ADDRESS, else a running local cluster)")
    b.add_argument("--host", default="127.0.0.1", help="interface for HTTP and DAP (default 127.0.0.1)")
    b.add_argument("--port", type=int, default=0, help="HTTP port (default: any free port)")
    b.add_argument("--dap-port", type=int, default=0, help="DAP port (default: any free port)")
    b.add_argument("--state-dir", help="where broker.json, the token and crash records live")
    b.set_defaults(fn=cmd_broker)

    ls = sub.add_parser("list", help="list the cluster's workers")
    ls.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(ls)
    ls.set_defaults(fn=cmd_list)

    a = sub.add_parser("attach", help="a terminal debugger on one worker (by id, or --rank N)")
    a.add_argument("worker", nargs="?", help="worker id (or a unique prefix of it)")
    a.add_argument("--rank", type=int, help="attach to the worker with this rank")
    a.add_argument("--job", help="job id, when ranks of two jobs collide")
    client_opts(a)
    a.set_defaults(fn=cmd_attach)

    from raysleuth.cli.ticket import add_ticket_parser

    add_ticket_parser(sub, client_opts, cmd_ticket)

    br = sub.add_parser("break", help="set a breakpoint in every matching worker of the cluster")
    br.add_argument("location", nargs="?", help="FILE:LINE")
    br.add_argument("--if", dest="cond", help="condition, optionally scoped: '[rank 0] step %% 100 == 0'")
    br.add_argument("--ranks", help="only these ranks: 0,2-3")
    br.add_argument("--group", help="only the members of this rank group (raysleuth group)")
    br.add_argument("--hit", help="hit condition: 5, >5, %%10")
    br.add_argument("--log", help="a logpoint: print this message ({expr} is evaluated) instead of stopping")
    br.add_argument("--remove", action="store_true", help="remove the breakpoint at FILE:LINE")
    br.add_argument(
        "--clear", action="store_true", help="remove the breakpoints set from the terminal (all, or FILE's)"
    )
    br.add_argument("--all", action="store_true", help="with --clear: every owner's, the editors' too")
    br.add_argument("--list", action="store_true", help="list the cluster's breakpoints")
    br.add_argument("--follow", action="store_true", help="then print logpoint lines as they come")
    br.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(br)
    br.add_argument("--force", action="store_true", help="send a condition or {expr} that looks unbounded")
    br.set_defaults(fn=cmd_break)

    from raysleuth.cli.audit import add_audit_parser
    from raysleuth.cli.evaluate import add_parsers as add_evaluate_parsers

    add_evaluate_parsers(sub, client_opts, cmd_evaluate, cmd_kill)
    add_audit_parser(sub, client_opts, cmd_audit)

    lg = sub.add_parser("logs", help="logpoint lines from every rank, tagged [rank N]")
    lg.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    lg.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(lg)
    lg.set_defaults(fn=cmd_logs)

    cr = sub.add_parser("crashes", help="crash records, newest first; or one record in full")
    cr.add_argument("id", nargs="?", help="a crash id: print its stack, locals and evidence")
    cr.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(cr)
    cr.set_defaults(fn=cmd_crashes)

    cs = sub.add_parser("cases", help="every failure as a case (rank, step, line), newest first; or one")
    cs.add_argument("id", nargs="?", help="a case id: print its summary, hint and evidence")
    cs.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(cs)
    cs.set_defaults(fn=cmd_cases)

    co = sub.add_parser("collectives", help="each rank's last collective per process group; who is behind")
    co.add_argument("--job", help="only this job (an id or a prefix)")
    co.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(co)
    co.set_defaults(fn=cmd_collectives)

    rr = sub.add_parser(
        "rerun", help="run a failed task again, stopped at its first line, to step to the raise"
    )
    rr.add_argument("id", help="the crash record's id (raysleuth crashes)")
    rr.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(rr)
    rr.set_defaults(fn=cmd_rerun)

    gr = sub.add_parser("group", help="rank groups: list them, make one, show or delete one")
    gr.add_argument("name", nargs="?", help="the group (none: list every group)")
    gr.add_argument("--ranks", help="make it of these ranks: 0,2-3")
    gr.add_argument("--workers", help="make it of these worker ids (prefixes, comma-separated)")
    gr.add_argument("--expression", help="make it of the workers where this holds: 'rank %% 8 == 0'")
    gr.add_argument("--job", help="only workers of this job")
    gr.add_argument("--delete", action="store_true", help="delete the group")
    gr.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(gr)
    gr.set_defaults(fn=cmd_group)

    wa = sub.add_parser("watch", help="name the first pass where a rank's value diverges from the others")
    wa.add_argument("location", help="FILE:LINE every rank passes")
    wa.add_argument("expressions", nargs="*", help="expressions to compare across ranks: grad loss")
    wa.add_argument("--ranks", help="only these ranks: 0-7")
    wa.add_argument("--every", type=int, help="compare every N-th pass (default 1)")
    wa.add_argument("--rtol", type=float, help="relative tolerance on norm/mean (default 1e-5)")
    wa.add_argument("--step", help="line ranks up by this local (e.g. step) instead of pass counts")
    wa.add_argument("--stop", action="store_true", help="stop the ranks at the line at the divergence")
    client_opts(wa)
    wa.add_argument("--force", action="store_true", help="send an expression that looks unbounded")
    wa.set_defaults(fn=cmd_watch)

    ev = sub.add_parser("events", help="the cluster's timeline: raysleuth.event() of every rank, and crashes")
    ev.add_argument("--since", type=int, default=0, help="only events after this seq")
    ev.add_argument("--name", help="only events of this name")
    ev.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    ev.add_argument("--export", metavar="FILE", help="write a trace (chrome://tracing, ui.perfetto.dev)")
    client_opts(ev)
    ev.set_defaults(fn=cmd_events)

    ins = sub.add_parser("inspect", help="raysleuth.inspect() values across ranks; the odd rank marked")
    ins.add_argument("name", nargs="?", help="an inspect name or one entry of it (default: every name)")
    ins.add_argument("--step", help="this step (default: the latest of each name; 'all': every step kept)")
    ins.add_argument("--rtol", type=float, help="relative tolerance on norm/mean (default 1e-5)")
    ins.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(ins)
    ins.set_defaults(fn=cmd_inspect)

    st = sub.add_parser("stacks", help="every worker's stack, grouped; the rank holding the others back")
    st.add_argument("--job", help="only this job (an id or a prefix)")
    st.add_argument("--ranks", help="only these ranks: 0-7,9")
    st.add_argument("--workers", help="only these workers: ids or prefixes, comma-separated")
    st.add_argument("--native", action="store_true", help="read with py-spy --native (C frames too)")
    st.add_argument("--tree", action="store_true", help="the ranks' stacks merged into one tree per job")
    st.add_argument(
        "--all-frames", action="store_true",
        help="every frame: verl's wrappers, Ray's executor, the standard library (folded by default)",
    )  # fmt: skip
    st.add_argument("--timeout", type=float, help="seconds for the whole request (default 2)")
    st.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    st.add_argument(
        "--watch", type=float, nargs="?", const=10.0, metavar="S",
        help="sample every S seconds (default 10) and report suspected hangs until Ctrl-C",
    )  # fmt: skip
    st.add_argument("--samples", type=int, default=3, help="with --watch: equal samples that make a hang")
    client_opts(st)
    st.set_defaults(fn=cmd_stacks)

    dr = sub.add_parser(
        "doctor", help="check every node (Python, Ray, debugpy, the agent, NVML, clock, disk)"
    )
    dr.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(dr)
    dr.set_defaults(fn=cmd_doctor)

    lsp = sub.add_parser("lsp", help="the language server (LSP on stdin/stdout) for editors")
    lsp.add_argument("--stdio", action="store_true", help="serve on stdin/stdout (the default and only mode)")
    lsp.add_argument("--token-file", help="broker token file (default: the state dir's)")
    client_opts(lsp)
    lsp.set_defaults(fn=cmd_lsp)

    d = sub.add_parser("demo", help="run a ranked training demo on an embedded local Ray cluster")
    d.add_argument("--state-dir", help="state dir for the demo's broker (default: ~/.raysleuth)")
    d.add_argument("--steps", type=int, default=60, help="training steps to run (default 60)")
    d.add_argument("--forever", action="store_true", help="keep training until Ctrl-C / SIGTERM")
    d.set_defaults(fn=cmd_demo)
    return p


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        from raysleuth.shared.textsafe import one_line

        super().error(one_line(message))  # `unrecognized arguments: ...` echoes argv raw (#37)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        from raysleuth.cli.argcheck import check_args

        check_args(vars(args), local_paths=("state_dir", "export", "token_file"))
        return args.fn(args) or 0
    except SleuthError as exc:
        return _error(exc.message, exc.hint)
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a file or folder named on the command line
        where = f" ({exc.filename})" if exc.filename else ""
        return _error(f"{exc.strerror or exc}{where}.", "Check the paths and options you gave.")
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback (RAYSLEUTH_DEBUG=1 shows it)
        if os.environ.get("RAYSLEUTH_DEBUG") == "1":
            raise
        return _error(
            f"internal error: {type(exc).__name__}: {exc}",
            "This is a Ray Sleuth bug: run again with RAYSLEUTH_DEBUG=1 for the traceback and report it.",
        )


def _error(message: str, hint: str | None) -> int:
    from raysleuth.shared.textsafe import one_line

    # Escaped: a message may echo an argument or the broker's words (an id, a path) (#37).
    print(f"error: {one_line(message)}", file=sys.stderr)
    if hint:
        print(f"hint: {one_line(hint)}", file=sys.stderr)
    return 2
