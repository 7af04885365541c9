"""The ``netsim`` command line.

Exit codes: 0 ok, 2 bad input (one line on stderr, no traceback), 1 internal error,
130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from netsim import __version__
from netsim.errors import InputError

EPILOG = """\
examples:
  netsim run                               run the bundled quickstart scenario
  netsim run li2022-fig10-ring --trials 4 --jobs 2 --out results/ring
  netsim run my.toml --set network.agents=20 --set protocol.epsilon=0.5
  netsim list                              bundled scenarios and protocols
  netsim show quickstart --set run.horizon=500
  netsim plot results/quickstart
  netsim trace SCENARIO --until 20 --kinds ADV,REQ,DATA --out trace.jsonl
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own usage errors: one line, exit 2
        raise InputError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="netsim", description="Discrete-event network simulator for multi-agent bandits.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"netsim {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser("run", help="run a scenario and write its result files",
                         description="Run every trial of a scenario; write trials/agents/timeseries tables, "
                                     "meta.json and figures to --out; print a summary.")
    run.add_argument("scenario", nargs="?", default=None,
                     help="scenario file or bundled name (default: quickstart)")
    run.add_argument("--trials", type=int, help="number of trials (default: the scenario's run.trials)")
    run.add_argument("--seed", type=int, help="root seed (default: the scenario's run.seed)")
    run.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    run.add_argument("--executor", choices=("serial", "process"), default=None,
                     help="serial, or process (default: process when --jobs > 1)")
    run.add_argument("--out", type=Path, default=None, help="results folder (default: results/<scenario name>)")
    run.add_argument("--format", choices=("csv", "parquet"), default="csv", help="table format (default csv)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a scenario key, e.g. --set network.agents=20 (repeatable)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--no-plots", action="store_true", help="skip regret.png / communication.png")

    sub.add_parser("list", help="bundled scenarios and registered protocols",
                   description="List bundled scenarios and registered protocols, one line each.")

    show = sub.add_parser("show", help="print the fully resolved scenario as TOML",
                          description="Print a scenario with every default filled in, as TOML.")
    show.add_argument("scenario", help="scenario file or bundled name")
    show.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a scenario key (repeatable)")

    trace = sub.add_parser("trace", help="message-level timeline (JSON lines) and a sequence diagram",
                           description="Run trial 0 of a scenario with tracing on; write every send, delivery, "
                                       "drop and corruption as JSON lines to --out and a sequence diagram with "
                                       "the graph's link-built counts to --out + '.png'.")
    trace.add_argument("scenario", help="scenario file or bundled name")
    trace.add_argument("--until", type=float, help="stop at this time (default: the horizon)")
    trace.add_argument("--agents", help="comma-separated node ids: keep messages from or to them")
    trace.add_argument("--kinds", help="comma-separated message kinds to keep, e.g. ADV,REQ,DATA")
    trace.add_argument("--out", type=Path, default=None, help="JSON-lines file (default: results/<name>/trace.jsonl)")
    trace.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a scenario key (repeatable)")

    plot = sub.add_parser("plot", help="(re)draw the figures of a results folder",
                          description="Redraw regret.png (and communication.png) from a results folder.")
    plot.add_argument("folder", type=Path, help="a folder written by 'netsim run'")
    return parser


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def cmd_run(args: argparse.Namespace) -> int:
    from netsim import results as R
    from netsim import runner
    from netsim import scenario as S

    scenario = runner.with_run_options(S.load(args.scenario, args.overrides), trials=args.trials, seed=args.seed)
    if args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: accepted: an integer >= 1")
    executor = args.executor or ("process" if args.jobs > 1 else "serial")
    out = args.out or Path("results") / scenario.name
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {str(out)!r} exists and is not a folder")
    started = _stamp()
    progress = False if args.quiet else None
    print(f"netsim: running {scenario.name} ({scenario.run['trials']} trial(s), protocol "
          f"{scenario.protocol['name']}, {scenario.network['agents']} agents, horizon {scenario.run['horizon']:g})",
          file=sys.stderr)
    results = runner.run_scenario(scenario, executor=executor, jobs=args.jobs, progress=progress)
    written = R.write_results(out, scenario, results, fmt=args.format, started=started, finished=_stamp(),
                              argv=["netsim", *sys.argv[1:]])
    if not args.no_plots:
        from netsim.plots import plot_folder

        for path in plot_folder(out, title=scenario.name):
            written[path.name] = path
    table = R.summary(results)
    with_pd_options(lambda: print(table.to_string(float_format=lambda v: f"{v:,.4g}")))
    print(f"\nwrote {', '.join(sorted(written))} to {out}/")
    return 0


def with_pd_options(fn):
    import pandas as pd

    with pd.option_context("display.width", 120, "display.max_columns", 20):
        fn()


def cmd_list(args: argparse.Namespace) -> int:
    import tomllib

    from netsim import registry
    from netsim import scenario as S

    print("scenarios:")
    for name, path in S.bundled().items():
        try:
            description = tomllib.loads(path.read_text()).get("description", "")
        except tomllib.TOMLDecodeError:
            description = "(unreadable)"
        print(f"  {name:32s} {description}")
    print("\nprotocols:")
    for name, cls in registry.protocols.items():
        print(f"  {name:32s} {cls.description}")
    print("\nbandit kinds:")
    for name, cls in registry.bandits.items():
        print(f"  {name:32s} {cls.description}")
    print("\ntopologies:")
    for name, topology in registry.topologies.items():
        print(f"  {name:32s} {topology.description}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from netsim import scenario as S

    print(S.resolved_toml(S.load(args.scenario, args.overrides)), end="")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from netsim.plots import plot_folder

    if not args.folder.is_dir():
        raise InputError(f"results folder {str(args.folder)!r} not found")
    try:
        written = plot_folder(args.folder)
    except FileNotFoundError as exc:
        raise InputError(f"{args.folder}: no timeseries table ({Path(exc.args[0]).name}); "
                         "accepted: a folder written by 'netsim run'") from None
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _id_list(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{flag} {text!r}: accepted: comma-separated node ids, e.g. 0,1,2") from None


def cmd_trace(args: argparse.Namespace) -> int:
    from netsim import scenario as S
    from netsim import trace as T
    from netsim.results import atomic_write

    if args.until is not None and args.until <= 0:
        raise InputError(f"--until {args.until:g}: accepted: a time > 0")
    scenario = S.load(args.scenario, args.overrides)
    agents = _id_list(args.agents, "--agents")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else None
    events, sim = T.record(scenario, until=args.until, agents=agents, kinds=kinds)
    out = args.out or Path("results") / scenario.name / "trace.jsonl"
    atomic_write(out, T.to_json_lines(events))
    picture = out.with_name(out.name + ".png")
    atomic_write(picture, T.draw(events, sim, title=scenario.name))
    fates = {fate: sum(1 for e in events if e["event"] == fate) for fate in ("send", "deliver", "drop", "corrupt")}
    print(", ".join(f"{n} {fate}" for fate, n in fates.items()) + f"; wrote {out} and {picture}")
    return 0


COMMANDS = {"run": cmd_run, "list": cmd_list, "show": cmd_show, "plot": cmd_plot, "trace": cmd_trace}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:
            build_parser().print_help()
            return 2
        return COMMANDS[args.command](args)
    except InputError as exc:
        print(f"netsim: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("netsim: interrupted; result files are written only when a run completes, so none were "
              "written or changed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
