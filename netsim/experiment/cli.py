"""The ``netsim`` command line.

Exit codes: 0 ok, 2 bad input (one line on stderr, no traceback; bare ``netsim`` too, naming
the commands), 1 internal error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from netsim.engine import __version__
from netsim.engine.errors import InputError

# Trials are single-threaded; parallelism comes from --jobs / executors. Multi-threaded BLAS on
# the small matrices of these simulations only adds contention (FedUCB's batched d x d products
# ran 100x slower with the default thread count on a 2-core machine). Set before numpy loads
# (none of the imports above loads it).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

EPILOG = """\
examples:
  netsim study                             UCB1, a cooperative protocol and central UCB side by side
  netsim study li2022-fig10 --scale paper --jobs 2   a paper figure at the paper's size
  netsim run                               run the bundled quickstart scenario
  netsim run li2022-fig10-ring --trials 4 --jobs 2 --out results/ring
  netsim run my.toml --set network.agents=20 --set protocol.epsilon=0.5
  netsim list                              bundled scenarios and protocols
  netsim show quickstart --set run.horizon=500
  netsim show quickstart --doc             every key with its meaning, unit and accepted values
  netsim explain network.delay             what a key (or a result column such as comm_cost) means
  netsim schema --out netsim-scenario.schema.json   a JSON Schema of scenario files for editors
  netsim run li2022-fig10-ring --plots      a run with regret.png / communication.png
  netsim plot results/quickstart           draw the figures of a results folder
  netsim trace li2022-gis-path5 --until 250 --out trace.html   replay the messages in a browser
  netsim sweep quickstart --grid network.agents=5,10 --grid network.topology=ring,complete --trials 4
  netsim run quickstart --executor dask --scheduler tcp://SCHEDULER-HOST:8786
  netsim audit laplace --epsilon 0.5       empirical privacy audit (netsim audit --all: every mechanism)
  netsim run my.toml --plugin my_protocol.py   a protocol from a file (or NETSIM_PLUGINS=my_protocol.py)
"""


TRACE_HELP = """\
Run trial 0 of a scenario with tracing on and write its messages: every send, delivery, drop and
corruption. The suffix of each --out file chooses what it holds:

  .html   a self-contained page (works offline) that replays the trace: the graph with messages
          moving along their links by kind, drops crossed, corruptions dashed in vermillion, the
          sequence diagram beside it; play / pause, step, speed, a time slider
  .jsonl  one JSON object per event; payloads as JSON data (lists, numbers, objects)
  .png    the sequence diagram beside the graph with its link-built counts

--out repeats; without it, all three go to results/<name>/trace.html, trace.jsonl, trace.png.
The legends list message kinds in protocol order (the order the trial first sent them).

example:
  netsim trace li2022-gis-path5 --until 250 --out trace.html --out trace.jsonl
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
                         description="Run every trial of a scenario; write trials/agents/timeseries tables "
                                     "and meta.json to --out (figures with --plots, or later with 'netsim plot "
                                     "OUT'); print a summary.")
    run.add_argument("scenario", nargs="?", default=None,
                     help="scenario file or bundled name (default: quickstart)")
    run.add_argument("--trials", type=int, help="number of trials (default: the scenario's run.trials)")
    run.add_argument("--seed", type=int, help="root seed (default: the scenario's run.seed)")
    run.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    _executor_options(run)
    run.add_argument("--out", type=Path, default=None, help="results folder (default: results/<scenario name>)")
    run.add_argument("--format", choices=("csv", "parquet"), default="csv", help="table format (default csv)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a scenario key, e.g. --set network.agents=20 (repeatable)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    figures = run.add_mutually_exclusive_group()
    figures.add_argument("--plots", action="store_true",
                         help="also draw regret.png / communication.png (default: tables only; 'netsim plot OUT' "
                              "draws them later)")
    figures.add_argument("--no-plots", action="store_true", help="no figures (the default; kept for scripts)")

    sweep = sub.add_parser("sweep", help="run a Cartesian parameter grid, resumable",
                           description="Run every (grid point, trial) unit of a Cartesian grid of scenario "
                                       "overrides. Finished units are stored in OUT/units as they complete; "
                                       "rerunning the same command runs only what is missing. Writes "
                                       "sweep.csv (one column per grid key), sweep_agents.csv, "
                                       "sweep_timeseries.csv, meta.json and one figure per grid key.")
    sweep.add_argument("scenario", help="scenario file or bundled name")
    sweep.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...", required=True,
                       help="a scenario key and its values, read as TOML like --set "
                            "(e.g. --grid protocol.epsilon=0.1,0.5,1); repeat for more keys")
    sweep.add_argument("--trials", type=int, help="trials per grid point (default: the scenario's run.trials)")
    sweep.add_argument("--seed", type=int, help="root seed (default: the scenario's run.seed)")
    sweep.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    _executor_options(sweep)
    sweep.add_argument("--out", type=Path, default=None, help="results folder (default: results/<scenario>-sweep)")
    sweep.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a scenario key for every point (repeatable)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.add_argument("--no-plots", action="store_true", help="skip the figures")

    study = sub.add_parser("study", help="run a study: variants side by side, a paper's figures, report.html",
                           description="Run every variant of a study (a scenario plus overrides each; protocols "
                                       "may differ) at every grid point, resumably (finished units are kept in "
                                       "OUT/units), then write study.csv (study, variant, parameter columns, point, "
                                       "then the trials columns), study_agents.csv, study_timeseries.csv, "
                                       "meta.json, the figures (figures/NAME.png, .svg and the plotted data as "
                                       ".csv; means with 95%% Student-t intervals) and report.html.")
    study.add_argument("study", nargs="?", default=None,
                       help="study file or bundled study name (default: quickstart; see netsim list)")
    study.add_argument("--scale", choices=("quick", "paper"), default="quick",
                       help="quick (about a minute) or paper (the paper's size where this machine allows); "
                            "default quick")
    study.add_argument("--trials", type=int, help="trials per variant and grid point (default: the scale's)")
    study.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a scenario key of every variant, after the study's own overrides, e.g. "
                            "--set bandit.file=data/diabetic_data.csv (repeatable)")
    study.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    _executor_options(study)
    study.add_argument("--out", type=Path, default=None, help="results folder (default: results/<study>-<scale>)")
    study.add_argument("--quiet", action="store_true", help="no progress bar")
    study.add_argument("--no-plots", action="store_true", help="skip the figures and report.html")

    sub.add_parser("list", help="bundled scenarios, studies and registered protocols",
                   description="List bundled scenarios, studies and registered protocols, one line each.")

    show = sub.add_parser("show", help="print the fully resolved scenario as TOML",
                          description="Print a scenario with every default filled in, as TOML.")
    show.add_argument("scenario", help="scenario file or bundled name")
    show.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                      help="override a scenario key (repeatable)")
    show.add_argument("--doc", action="store_true",
                      help="a comment above every key: its label, unit, meaning, accepted values and default")

    explain = sub.add_parser("explain", help="what a scenario key or result column means",
                             description="Print what a dotted scenario key (network.delay, protocol.epsilon) or a "
                                         "result column (comm_cost) means: its label, unit, default, accepted "
                                         "values, where it applies (a protocol, topology, bandit kind or law) and "
                                         "the keys under it.")
    explain.add_argument("keys", nargs="+", metavar="KEY", help="a dotted scenario key or a result column")

    schema = sub.add_parser("schema", help="write a JSON Schema of scenario files, for editors",
                            description="Write the JSON Schema (draft 2020-12) of scenario files: every key with its "
                                        "label, unit, meaning, default and accepted values, built from the "
                                        "definitions netsim validates with. Point an editor's TOML plug-in at it.")
    schema.add_argument("--out", type=Path, default=None, help="file to write (default: standard output)")

    trace = sub.add_parser("trace", help="replay one trial's messages: a viewer page, JSON lines, a sequence diagram",
                           description=TRACE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    trace.add_argument("scenario", help="scenario file or bundled name")
    trace.add_argument("--from", dest="start", type=float, default=None, metavar="T",
                       help="keep the messages sent at or after T (the trial still runs from 0; default 0)")
    trace.add_argument("--until", type=float, metavar="T", help="stop the trial at T (default: the horizon)")
    trace.add_argument("--agents", help="comma-separated node ids: keep messages from or to them")
    trace.add_argument("--kinds", help="comma-separated message kinds to keep, e.g. gis-adv,gis-req,gis-data")
    trace.add_argument("--out", type=Path, action="append", default=None, metavar="FILE",
                       help="FILE.html (viewer page), FILE.jsonl (JSON lines) or FILE.png (sequence diagram); "
                            "repeatable (default: results/<name>/trace.html, .jsonl and .png)")
    trace.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a scenario key (repeatable)")

    plot = sub.add_parser("plot", help="(re)draw the figures of a results folder",
                          description="Redraw the figures of a results folder: regret.png (and communication.png) "
                                      "of a run, the per-key figures of a sweep, or a study's figures and "
                                      "report.html.")
    plot.add_argument("folder", type=Path, help="a folder written by 'netsim run', 'netsim sweep' or 'netsim study'")
    audit = sub.add_parser("audit", help="empirical privacy audit of a privacy mechanism",
                           description="Run a mechanism many times on two neighbouring inputs and bound its privacy "
                                       "loss from below (Clopper-Pearson); print claimed eps, eps_hat, eps_lo, "
                                       "verdict.")
    audit.add_argument("mechanism", nargs="?", default=None, help="audit target name (see --all for every one)")
    audit.add_argument("--all", action="store_true", help="audit every registered mechanism")
    audit.add_argument("--epsilon", type=float, default=None, help="the mechanism's privacy parameter")
    audit.add_argument("--trials", type=int, default=100_000, help="runs per input and phase (default 100000)")
    audit.add_argument("--seed", type=int, default=0, help="root seed (default 0)")
    audit.add_argument("--confidence", type=float, default=0.95, help="confidence of eps_lo (default 0.95)")
    for command in sub.choices.values():
        command.add_argument("--plugin", dest="plugins", action="append", default=[], type=Path, metavar="FILE.py",
                             help="load the protocols (bandit kinds, topologies) a Python file registers "
                                  "(repeatable; NETSIM_PLUGINS=FILE.py:... does the same)")
    return parser


def _executor_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--executor", choices=("serial", "process", "dask"), default=None,
                        help="serial, process (local pool of --jobs processes) or dask (default: dask with "
                             "--scheduler, else process when --jobs > 1, else serial)")
    parser.add_argument("--scheduler", default=None, metavar="ADDR",
                        help="address of a running dask scheduler, e.g. tcp://SCHEDULER-HOST:8786 (implies --executor "
                             "dask; without it, --executor dask starts a local cluster of --jobs workers)")
    parser.add_argument("--scheduler-timeout", type=float, default=10.0, metavar="SECONDS",
                        help="how long to wait for --scheduler to answer (default 10)")


def _executor(args: argparse.Namespace):
    from netsim.experiment import runner

    return runner.make_executor(args.executor, jobs=args.jobs, scheduler=args.scheduler,
                                timeout=args.scheduler_timeout)


def output_path(path: Path | None, default: Path, flag: str = "--out", *, folder: bool = True) -> Path:
    """Where a command writes: ``path`` (the user's ``--out``) or ``default`` under ``results/``.

    Refused, with one line: a filesystem root or the home folder (a run would scatter its files
    there), a default that would leave ``results/`` (a scenario ``name`` such as ``../../x``), a
    folder that is a file (or, for a file output, a folder).
    """
    from netsim.engine import files

    if path is None:
        if default.is_absolute() or ".." in default.parts:
            raise InputError(f"scenario name {str(default.parent if not folder else default)!r} would write "
                             "outside results/; accepted: a name without '/' or '..', or give --out")
        files.check_path(default, where="name (the default output folder is results/NAME; or give --out)")
        path = default
    files.check_path(path, where=flag)
    resolved = path.expanduser().resolve()
    if resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
        raise InputError(f"{flag} {str(path)!r}: a filesystem root or the home folder; accepted: a folder of "
                         "its own, e.g. results/NAME")
    if folder and path.exists() and not path.is_dir():
        raise InputError(f"{flag} {str(path)!r} exists and is not a folder")
    if not folder and path.is_dir():
        raise InputError(f"{flag} {str(path)!r} is a folder; accepted: a file path, e.g. trace.jsonl")
    if folder:  # a link at a folder netsim writes into is refused now, not after the run
        files.check(path, folders=("units", "figures"), where=flag)
    else:  # a device node, pipe or link named as the file is never replaced
        files.check(path.parent, names=(path.name, path.name + ".png"), where=flag)
    _check_writable(path if folder else path.parent, flag, path)
    return path


def _check_writable(folder: Path, flag: str, shown: Path) -> None:
    """Create ``folder`` and a scratch file in it now, so that a run never ends unable to save."""
    import tempfile

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"{flag} {str(shown)!r}: cannot write there ({exc.strerror or type(exc).__name__}); "
                         "accepted: a folder this user can create and write") from None


def check_format(fmt: str) -> None:
    """Refuse a table format whose writer is not installed, before any trial runs."""
    import importlib.util

    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise InputError("--format parquet needs pyarrow, which is not installed; accepted: --format csv, or "
                         "pip install 'netsim[parquet]'")


def _check_trials(trials: int | None) -> None:
    """The same cap on --trials for run, sweep and study (per grid point and variant), before anything loads."""
    from netsim.engine.budget import MAX_TRIALS

    if trials is not None and not 1 <= trials <= MAX_TRIALS:
        raise InputError(f"--trials {trials}: accepted: 1 .. {MAX_TRIALS:,}")


def cmd_run(args: argparse.Namespace) -> int:
    from netsim.experiment import api

    _check_trials(args.trials)
    scenario = api.prepare(args.scenario, set=args.overrides, trials=args.trials, seed=args.seed)
    check_format(args.format)
    out = output_path(args.out, Path("results") / scenario.name)
    with _executor(args) as executor:
        print(f"netsim: running {scenario.name} ({scenario.run['trials']} trial(s), protocol "
              f"{scenario.protocol['name']}, {scenario.network['agents']} agents, horizon "
              f"{scenario.run['horizon']:g}, executor {executor.name})", file=sys.stderr)
        results = api.run(scenario, executor=executor, progress=None if not args.quiet else False)
    results.meta["command"] = ["netsim", *sys.argv[1:]]
    written = _save(results, out, format=args.format, plots=args.plots)
    if written is None:
        return 130
    print_summary(results)
    from netsim.experiment.results import status_line

    print(f"\n{status_line(results.trials)}")
    print(f"wrote {', '.join(sorted(written))} to {out}/")
    return 0


def _save(results, out: Path, **options) -> dict[str, Path] | None:
    """``results.save``; on Ctrl-C, say exactly what the folder holds (None: interrupted)."""
    from netsim.experiment.resultset import FiguresInterrupted

    try:
        return results.save(out, **options)
    except FiguresInterrupted:
        state = f"its tables are complete, its figures are not (redraw them with `netsim plot {out}`)"
    except KeyboardInterrupt:
        state = "the tables are written all at once, so it holds the previous files or none"
    print(f"netsim: interrupted while saving to {out}: {state}", file=sys.stderr)
    return None


def cmd_sweep(args: argparse.Namespace) -> int:
    from netsim.experiment import api
    from netsim.experiment import sweeps as W

    _check_trials(args.trials)
    plan = api.plan(args.scenario, args.grid, set=args.overrides, trials=args.trials, seed=args.seed)
    out = output_path(args.out, Path("results") / f"{Path(plan.points[0].scenario.name).name}-sweep")
    total = len(plan.points) * plan.trials
    try:
        with _executor(args) as executor:
            print(f"netsim: sweep of {plan.points[0].scenario.name}: {len(plan.points)} point(s) x {plan.trials} "
                  f"trial(s) = {total} unit(s), executor {executor.name}, store {out / 'units'}", file=sys.stderr)
            results = api.run_plan(plan, executor=executor, out=out, progress=None if not args.quiet else False)
    except KeyboardInterrupt:
        store = W.UnitStore(out / "units")
        stored = sum(store.path(unit.id).is_file() for unit in plan.units())
        print(f"netsim: interrupted; {stored} of {total} unit(s) are stored in {out / 'units'}; "
              "rerun the same command to run only the missing ones", file=sys.stderr)
        return 130
    print(f"netsim: {results.meta['units_reused']} unit(s) found in the store, {results.meta['units_run']} run now",
          file=sys.stderr)
    results.meta["command"] = ["netsim", *sys.argv[1:]]
    written = _save(results, out, plots=not args.no_plots)
    if written is None:
        return 130
    print_summary(results)
    print(f"\nwrote {', '.join(written)} to {out}/")
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    from netsim.experiment import api, studies
    from netsim.experiment import sweeps as W

    _check_trials(args.trials)
    study = studies.load(args.study)
    plan = studies.plan(study, args.scale, trials=args.trials, overrides=studies.set_options(args.overrides))
    out = output_path(args.out, Path("results") / f"{Path(study.name).name}-{args.scale}")
    units = plan.units()
    started = api.stamp()
    try:
        with _executor(args) as executor:
            print(f"netsim: study {study.name} at {args.scale} scale: {len(study.variants)} variant(s), "
                  f"{len(plan.points)} point(s) x {plan.trials} trial(s) = {len(units)} unit(s), executor "
                  f"{executor.name}, store {out / 'units'}", file=sys.stderr)
            results = api.run_study(plan, out, executor=executor, progress=None if not args.quiet else False,
                                  started=started, argv=["netsim", *sys.argv[1:]])
    except KeyboardInterrupt:
        store = W.UnitStore(out / "units")
        stored = sum(store.path(unit.id).is_file() for unit in units)
        print(f"netsim: interrupted; {stored} of {len(units)} unit(s) are stored in {out / 'units'}; "
              "rerun the same command to run only the missing ones", file=sys.stderr)
        return 130
    print(f"netsim: {results.meta['units_reused']} unit(s) found in the store, {results.meta['units_run']} run now",
          file=sys.stderr)
    written = _save(results, out, plots=not args.no_plots)
    if written is None:
        return 130
    print_summary(results)
    figures = sorted(p.name for p in written.values() if p.suffix == ".png")
    print(f"wrote study.csv, study_agents.csv, study_timeseries.csv, meta.json to {out}/")
    if figures:
        print(f"figures: {', '.join(str(out / 'figures' / f) for f in figures)}")
        print(f"report:  {out / 'report.html'}")
    print("next: netsim list (every study and scenario); netsim study NAME --scale paper --jobs 2 (a paper figure "
          "at the paper's size); netsim show SCENARIO (every key a variant can set)")
    return 0


def print_summary(results) -> None:
    """Print ``results.summary()`` with its group columns and ``metric`` as the index (repeats not shown)."""
    from netsim.experiment.resultset import SUMMARY_STATS

    table = results.summary()
    groups = [c for c in table.columns if c not in ("metric", *SUMMARY_STATS)]
    shown = table.set_index([*groups, "metric"])
    with_pd_options(lambda: print(shown.to_string(float_format=lambda v: f"{v:,.4g}")))
    print("(n: trials with a value, failed ones left out; lo, hi: the 95% Student-t interval of the mean)")


def with_pd_options(fn):
    import pandas as pd

    with pd.option_context("display.width", 120, "display.max_columns", 20):
        fn()


def cmd_list(args: argparse.Namespace) -> int:

    from netsim.bandits import bandits
    from netsim.engine import registry
    from netsim.engine import scenario as S
    from netsim.engine.topology import topologies

    print("scenarios:")
    for name, path in S.bundled().items():
        print(f"  {name:32s} {_described(path, 'description')}")
    from netsim.experiment import studies

    print("\nstudies (netsim study NAME):")
    for name, path in studies.bundled().items():
        print(f"  {name:32s} {_described(path, 'title', 'description')}")
    # a plug-in's class may lack a description: it is listed without one
    for title, registered in (("protocols", registry.protocols), ("bandit kinds", bandits),
                              ("topologies", topologies)):
        print(f"\n{title}:")
        for name, item in registered.items():
            print(f"  {name:32s} {getattr(item, 'description', '') or ''}")
    return 0


def _described(path: Path, *keys: str) -> str:
    """The first of ``keys`` a bundled TOML file gives (a plug-in's file that does not read: "(unreadable)")."""
    from netsim.engine.files import read_toml

    try:
        document = read_toml(path)
    except InputError:
        return "(unreadable)"
    return next((str(document[key]).strip() for key in keys if document.get(key)), "")


def cmd_show(args: argparse.Namespace) -> int:
    from netsim.engine import budget
    from netsim.engine import scenario as S
    from netsim.engine.registry import protocols

    scenario = S.load(args.scenario, args.overrides)
    work = budget.estimate(scenario, protocols.get(scenario.protocol["name"], key="protocol.name"))
    print(f"# work: {work.describe()}; limits run.max_events = {scenario.run['max_events']:.3g}, run.max_memory = "
          f"{scenario.run['max_memory']:.3g} bytes (docs/engine.md, Limits)")
    if args.doc:
        from netsim.experiment.catalog import annotated_toml

        print(annotated_toml(scenario), end="")
    else:
        print(S.resolved_toml(scenario), end="")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from netsim.experiment.catalog import explain

    texts = [explain(key) for key in args.keys]  # every key checked before anything is printed
    print("\n".join(texts), end="")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    import json

    from netsim.experiment.results import atomic_write
    from netsim.experiment.schema import scenario_schema

    text = json.dumps(scenario_schema(), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if args.out is None:
        print(text, end="")
        return 0
    out = output_path(args.out, args.out, folder=False)
    atomic_write(out, text.encode())
    print(f"wrote {out}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    """Redraw a results folder. Its files are input like a scenario: a table or meta.json that is missing,
    damaged or edited so that drawing fails is one line naming the folder, never a traceback."""
    from netsim.engine import files

    files.check_path(args.folder, where="netsim plot FOLDER")
    if not args.folder.is_dir():
        raise InputError(f"results folder {str(args.folder)!r} not found")
    try:
        written = _plot(args.folder)
    except InputError:
        raise
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, FileNotFoundError) as exc:
        raise InputError(f"results folder {str(args.folder)!r} is damaged or not written by this netsim "
                         f"({type(exc).__name__} while drawing); accepted: a folder written by 'netsim run', "
                         "'netsim sweep' or 'netsim study'") from None
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _plot(folder: Path) -> list[Path]:
    if (folder / "study.csv").is_file():
        from netsim.experiment.resultset import Results
        from netsim.experiment.studies import draw_folder

        return draw_folder(folder, Results.load(folder))
    if (folder / "sweep_timeseries.csv").is_file():
        from netsim.experiment import sweeps as W

        return W.plot_folder(folder)
    from netsim.experiment.plots import plot_folder

    try:
        return plot_folder(folder)
    except FileNotFoundError as exc:
        raise InputError(f"{folder}: no timeseries table ({Path(exc.args[0]).name}); "
                         "accepted: a folder written by 'netsim run'") from None


def _id_list(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{flag} {text!r}: accepted: comma-separated node ids, e.g. 0,1,2") from None


def cmd_trace(args: argparse.Namespace) -> int:
    from netsim.engine import scenario as S
    from netsim.experiment import trace as T
    from netsim.experiment import viewer as V

    start = 0.0 if args.start is None else args.start
    if not (math.isfinite(start) and start >= 0):
        raise InputError(f"--from {start:g}: accepted: a finite time >= 0")
    if args.until is not None and not (math.isfinite(args.until) and args.until > start):
        raise InputError(f"--until {args.until:g}: accepted: a finite time > 0 and after --from ({start:g})")
    for path in args.out or []:
        if path.suffix.lower() not in T.FORMATS:
            accepted = ", ".join(f"{suffix} ({what})" for suffix, what in T.FORMATS.items())
            raise InputError(f"--out {str(path)!r}: unknown suffix {path.suffix or '(none)'!r}; accepted: {accepted}")
    scenario = S.load(args.scenario, args.overrides)
    if args.out:
        outs = [output_path(path, path, folder=False) for path in dict.fromkeys(args.out)]
    else:
        folder = output_path(None, Path("results") / scenario.name / "trace.html", folder=False).parent
        outs = [folder / f"trace{suffix}" for suffix in T.FORMATS]
    agents = _id_list(args.agents, "--agents")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()] if args.kinds else None
    events, sim = T.record(scenario, start=start, until=args.until, agents=agents, kinds=kinds)
    for path in outs:
        write_trace(path, V.render(path.suffix.lower(), events, sim, title=scenario.name, start=start))
    fates = {fate: sum(1 for e in events if e["event"] == fate) for fate in ("send", "deliver", "drop", "corrupt")}
    print(", ".join(f"{n} {fate}" for fate, n in fates.items()) + f"; wrote {', '.join(map(str, outs))}")
    from netsim.experiment.viewer import LARGE

    messages = len({e["message"] for e in events})
    if messages > LARGE and any(path.suffix.lower() == ".html" for path in outs):
        print(f"netsim: the page holds {messages:,} messages and may be slow; narrow the trace with --from, --until, "
              "--agents or --kinds", file=sys.stderr)
    return 0


def write_trace(path: Path, data: bytes) -> None:
    """Write one ``netsim trace`` output file (the one place the command writes)."""
    from netsim.experiment.results import atomic_write

    atomic_write(path, data)


def cmd_audit(args: argparse.Namespace) -> int:
    from netsim.engine.registry import audit_targets

    if args.all == (args.mechanism is not None):
        raise InputError(f"netsim audit: give one MECHANISM or --all; accepted: {', '.join(audit_targets.names())}")
    targets = [t for _, t in audit_targets.items()] if args.all else [audit_targets.get(args.mechanism, key="audit")]
    from netsim.engine.params import MAX_REAL, MIN_POSITIVE

    if args.epsilon is not None and not MIN_POSITIVE <= args.epsilon <= MAX_REAL:
        raise InputError(f"--epsilon {args.epsilon:g}: accepted: a number in [{MIN_POSITIVE:g}, {MAX_REAL:g}] (a "
                         "privacy parameter the mechanisms can honour in double precision)")
    for target in targets:
        try:
            target.params(args.epsilon)
        except ValueError as exc:
            raise InputError(f"netsim audit {target.name}: {exc}") from None
    if not (10 <= args.trials <= MAX_AUDIT_TRIALS) or not 0 < args.confidence < 1 or args.seed < 0:
        raise InputError(f"netsim audit: --trials {args.trials}, --confidence {args.confidence:g}, --seed "
                         f"{args.seed}; accepted: --trials 10 .. {MAX_AUDIT_TRIALS:,}, --confidence in (0, 1), "
                         "--seed >= 0")
    head = (f"{'mechanism':<24} {'claimed eps':>11} {'delta':>6} {'eps_hat':>8} {'eps_lo':>8} {'exact':>6} "
            f"{'trials':>9}  verdict")
    print(head + "\n" + "-" * len(head))
    for target in targets:
        r = target.run(epsilon=args.epsilon, trials=args.trials, seed=args.seed, confidence=args.confidence)
        exact = "-" if r.exact is None else f"{r.exact:.3f}"
        print(f"{r.name:<24} {r.claimed_epsilon:>11.4g} {r.delta:>6.3g} {r.epsilon_hat:>8.3f} {r.epsilon_lo:>8.3f} "
              f"{exact:>6} {r.trials:>9,}  {r.verdict}", flush=True)
    print(f"eps_lo: lower confidence bound at {args.confidence:.0%}; trials: runs per input and phase (end-to-end "
          "targets run at most 20,000); VIOLATED: eps_lo > claimed eps; MISCALIBRATED: eps_lo > the exact loss "
          "of the claimed calibration")
    return 0


#: an audit draws about 4 x trials samples per mechanism: 10 million trials take minutes, more takes hours
MAX_AUDIT_TRIALS = 10_000_000

COMMANDS = {"run": cmd_run, "list": cmd_list, "show": cmd_show, "plot": cmd_plot, "sweep": cmd_sweep,
            "study": cmd_study, "trace": cmd_trace, "audit": cmd_audit, "explain": cmd_explain,
            "schema": cmd_schema}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command is None:  # a refusal like any other: one line on stderr, exit 2 (netsim --help: stdout)
            raise InputError(f"netsim: a COMMAND is required; accepted: {', '.join(COMMANDS)} (netsim --help "
                             "explains each)")
        if args.plugins:
            from netsim.engine.registry import load_plugin_files

            load_plugin_files(args.plugins, origin="--plugin")
        return COMMANDS[args.command](args)
    except InputError as exc:
        print(f"netsim: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader went away (netsim list | head): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # flushing at exit must not fail again
        return 0
    except KeyboardInterrupt:
        print("netsim: interrupted; result files are written only when a run completes, so none were "
              "written or changed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
