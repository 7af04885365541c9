"""The Python API: run a scenario or a sweep and get a :class:`Results` object back.

``netsim.run`` and ``netsim.sweep`` do what ``netsim run`` and ``netsim sweep`` do, and the
command line is a thin layer over them: for the same scenario, overrides and seed, the tables
of a :class:`Results` are those of the command's files, and :meth:`Results.save` writes the
same files, byte for byte.

```python
import netsim

results = netsim.run("quickstart", trials=2, set={"run.horizon": 200})
results.trials[["scenario", "protocol", "trial", "group_regret"]]
```

Scenarios are given by bundled name, by file or as a :class:`~netsim.engine.scenario.Scenario`
(``netsim.Scenario.load(name).with_(**{"network.agents": 20})``); overrides (``set=``) are a
mapping of dotted keys to Python values, or ``KEY=VALUE`` strings read like ``--set``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from netsim.engine.errors import InputError
from netsim.engine.scenario import Overrides, Scenario, plain_value
from netsim.engine.scenario import load as load_scenario
from netsim.experiment import runner
from netsim.experiment.results import stamp

if TYPE_CHECKING:
    from netsim.experiment.resultset import Results
    from netsim.experiment.studies.plan import StudyPlan
    from netsim.experiment.sweeps import Plan

ScenarioLike = str | Path | Scenario | None
#: A sweep grid: dotted key → values, or ``KEY=V1,V2,...`` strings as ``--grid`` takes them.
Grid = Mapping[str, Sequence[Any]] | Sequence[str]


def prepare(scenario: ScenarioLike = None, *, set: Overrides | None = None, trials: int | None = None,
            seed: int | None = None) -> Scenario:
    """The validated scenario a run would use: ``scenario`` with overrides, ``run.trials`` and ``run.seed``.

    Parameters
    ----------
    scenario:
        A bundled name, a scenario file or a :class:`~netsim.engine.scenario.Scenario` (``None``:
        the quickstart).
    set:
        Overrides, applied before ``trials`` and ``seed``.
    trials, seed:
        Replace ``run.trials`` and ``run.seed`` when given.
    """
    return runner.with_run_options(load_scenario(scenario, set), trials=trials, seed=seed)


@contextlib.contextmanager
def _executor(executor: str | runner.Executor | None, jobs: int, scheduler: str | None,
              timeout: float) -> Iterator[runner.Executor]:
    """The executor to use: ``executor`` itself when it is one (left open), else a new one, closed after."""
    if isinstance(executor, runner.Executor):
        yield executor
        return
    with runner.make_executor(executor, jobs=jobs, scheduler=scheduler, timeout=timeout) as pool:
        yield pool


def run(scenario: ScenarioLike = None, *, trials: int | None = None, seed: int | None = None, jobs: int = 1,
        executor: str | runner.Executor | None = None, scheduler: str | None = None,
        scheduler_timeout: float = runner.DEFAULT_SCHEDULER_TIMEOUT, set: Overrides | None = None,
        progress: bool = False) -> Results:
    """Run every trial of a scenario, as ``netsim run`` does.

    Parameters
    ----------
    scenario:
        A bundled name, a scenario file or a :class:`~netsim.engine.scenario.Scenario` (``None``: the
        quickstart).
    trials, seed:
        Number of trials and root seed (default: the scenario's ``run.trials`` and ``run.seed``).
        Trial ``i`` uses ``SeedSequence(seed, spawn_key=(i,))`` whatever the executor.
    jobs, executor, scheduler, scheduler_timeout:
        Where the trials run: ``"serial"``, ``"process"`` (``jobs`` local processes), ``"dask"``
        (a local cluster of ``jobs`` workers, or the scheduler at ``scheduler``), or an open
        :class:`~netsim.experiment.runner.Executor` (left open). Default: dask with a scheduler, process
        with ``jobs > 1``, else serial.
    set:
        Scenario overrides: ``{"network.agents": 20}`` or ``["network.agents=20"]``.
    progress:
        Show a progress bar on stderr.

    Returns
    -------
    Results
        ``trials``, ``agents`` and ``timeseries`` tables with ``scenario`` and ``protocol``
        columns, and ``meta`` (what ``meta.json`` holds).

    Raises
    ------
    InputError
        Bad scenario, override or option, before any trial runs.
    """
    from netsim.experiment import results as R
    from netsim.experiment.resultset import Results

    prepared = prepare(scenario, set=set, trials=trials, seed=seed)
    started = stamp()
    with _executor(executor, jobs, scheduler, scheduler_timeout) as pool:
        outcome = runner.run_scenario(prepared, executor=pool, progress=progress)
    meta = R.run_meta(prepared, outcome, started=started, finished=stamp())
    return Results.from_tables("run", R.run_tables(outcome), meta)


def plan(scenario: ScenarioLike, grid: Grid, *, set: Overrides | None = None, trials: int | None = None,
         seed: int | None = None) -> Plan:
    """The plan of a sweep: every grid point validated, before anything runs (see :func:`sweep`)."""
    from netsim.experiment import sweeps as W

    return W.plan(scenario, _grid_options(grid), overrides=_set_options(set), trials=trials, seed=seed)


def sweep(scenario: ScenarioLike, grid: Grid, *, trials: int | None = None, seed: int | None = None,
          jobs: int = 1, executor: str | runner.Executor | None = None, scheduler: str | None = None,
          scheduler_timeout: float = runner.DEFAULT_SCHEDULER_TIMEOUT, set: Overrides | None = None,
          out: str | Path | None = None, progress: bool = False) -> Results:
    """Run a Cartesian grid of scenario overrides, ``trials`` trials per point, as ``netsim sweep`` does.

    Parameters
    ----------
    scenario:
        A bundled name, a scenario file or a :class:`~netsim.engine.scenario.Scenario`.
    grid:
        Dotted key → values, e.g. ``{"network.agents": [5, 10], "network.topology": ["ring", "complete"]}``
        (or ``["network.agents=5,10", ...]`` as ``--grid`` takes them). Trial ``i`` of a point
        has its own seed, set by the point's values, not by their order or the executor.
    trials, seed, jobs, executor, scheduler, scheduler_timeout, set, progress:
        As for :func:`run` (``set`` applies to every point).
    out:
        Keep finished units in ``out/units`` as they complete, so that the same call after an
        interruption runs only the missing ones (default: a temporary folder, removed after).
        Tables and figures are written by :meth:`Results.save`.

    Returns
    -------
    Results
        One column per grid key and a ``point`` index in front of the run tables' columns.
    """
    return run_plan(plan(scenario, grid, set=set, trials=trials, seed=seed), jobs=jobs, executor=executor,
                    scheduler=scheduler, scheduler_timeout=scheduler_timeout, out=out, progress=progress)


def run_plan(plan_: Plan, *, jobs: int = 1, executor: str | runner.Executor | None = None,
             scheduler: str | None = None, scheduler_timeout: float = runner.DEFAULT_SCHEDULER_TIMEOUT,
             out: str | Path | None = None, progress: bool = False) -> Results:
    """Run the units of a sweep plan (from :func:`plan`) missing from ``out`` (see :func:`sweep`)."""
    from netsim.experiment import sweeps as W
    from netsim.experiment.resultset import Results

    started = stamp()
    with _executor(executor, jobs, scheduler, scheduler_timeout) as pool:
        if out is None:
            with tempfile.TemporaryDirectory(prefix="netsim-sweep-") as folder:
                outcome = W.run(plan_, Path(folder), executor=pool, progress=progress)
        else:
            outcome = W.run(plan_, Path(out), executor=pool, progress=progress)
        name = pool.name
    meta = W.meta(plan_, outcome, argv=sys.argv, started=started, finished=stamp(), executor=name)
    frames = W.tables(plan_, outcome.results)
    return Results.from_tables("sweep", {"trials": frames["sweep"], "agents": frames["sweep_agents"],
                                         "timeseries": frames["sweep_timeseries"]}, meta, params=plan_.keys)


def study(name: str | Path | None = None, *, scale: str = "quick", trials: int | None = None, jobs: int = 1,
          executor: str | runner.Executor | None = None, scheduler: str | None = None,
          scheduler_timeout: float = runner.DEFAULT_SCHEDULER_TIMEOUT, set: Overrides | None = None,
          out: str | Path | None = None, progress: bool = False) -> Results:
    """Run a study (variants side by side, a grid, figure specs) at one scale, as ``netsim study`` does.

    Parameters
    ----------
    name:
        A bundled study (``scenarios/studies/``) or a study file (``None``: the quickstart study).
    scale:
        ``"quick"`` (about a minute) or ``"paper"`` (the paper's size where this machine allows);
        each study says what its scales change.
    trials:
        Trials per variant and grid point (default: the scale's).
    set:
        Overrides of every variant, after the study's own (``{"bandit.file": "data/x.csv"}``).
    jobs, executor, scheduler, scheduler_timeout, progress:
        As for :func:`run`.
    out:
        Keep finished units in ``out/units`` as they complete, so that the same call after an
        interruption runs only the missing ones (default: a temporary folder, removed after).
        :meth:`Results.save` writes the tables, the figures and ``report.html``.

    Returns
    -------
    Results
        ``study``, ``variant``, parameter and ``point`` columns in front of the run tables'
        columns; trial ``i`` of every variant at one grid point shares its seed (common random numbers).
    """
    from netsim.experiment import studies

    plan_ = studies.plan(studies.load(name), scale, trials=trials,
                         overrides=studies.set_options(_set_options(set)))
    started = stamp()
    with _executor(executor, jobs, scheduler, scheduler_timeout) as pool:
        if out is None:
            with tempfile.TemporaryDirectory(prefix="netsim-study-") as folder:
                return run_study(plan_, Path(folder), executor=pool, progress=progress, started=started)
        return run_study(plan_, Path(out), executor=pool, progress=progress, started=started)


def _toml(value: Any, where: str) -> str:
    from netsim.experiment.sweeps import toml_value

    try:
        return toml_value(plain_value(value))  # np.linspace(...) values and the like are numbers
    except TypeError:
        raise InputError(f"{where}: {value!r} cannot be a scenario value; accepted: numbers, booleans, strings, "
                         "lists and tables of those") from None


def _set_options(overrides: Overrides | None) -> list[str]:
    """Overrides as ``KEY=VALUE`` strings (how a sweep plan records them)."""
    if overrides is None:
        return []
    if isinstance(overrides, Mapping):
        return [f"{key.replace('__', '.')}={_toml(value, f'set {key!r}')}" for key, value in overrides.items()]
    return [overrides] if isinstance(overrides, str) else list(overrides)


def _grid_options(grid: Grid) -> list[str]:
    """A grid as ``KEY=V1,V2,...`` strings (as ``--grid`` takes them)."""
    if not isinstance(grid, Mapping):
        return [grid] if isinstance(grid, str) else list(grid)
    options = []
    for key, values in grid.items():
        try:
            values = [] if isinstance(values, (str, bytes, Mapping)) else list(values)
        except TypeError:
            values = []
        if not values:
            raise InputError(f"grid {key!r}: got {grid[key]!r}; accepted: a non-empty list of values")
        options.append(f"{key}=" + ",".join(_toml(value, f"grid {key!r}") for value in values))
    return options


def run_study(plan_: StudyPlan, out: Path, *, executor: runner.Executor, progress: bool | None = None,
              started: str = "", argv: list[str] | None = None) -> Results:
    """Run the units of ``plan_`` missing from ``out/units``; return the study's :class:`~netsim.Results`."""
    from netsim.experiment import results as R
    from netsim.experiment import sweeps as W
    from netsim.experiment.resultset import Results
    from netsim.experiment.studies.tables import tables
    from netsim.experiment.sweeps.store import plain_default

    outcome = W.run(plan_, out, executor=executor, progress=progress)
    frames = tables(plan_, outcome.results)
    meta: dict[str, Any] = {
        "study": plan_.describe(), "study_text": plan_.study.text,
        "points": [{"point": p.index, "variant": p.variant, "scenario": p.scenario.name,
                    "protocol": p.scenario.protocol["name"], **p.params, "seed_key": list(p.key),
                    "resolved": p.scenario.as_dict()}
                   for p in plan_.points],
        "units": outcome.total, "units_reused": outcome.reused, "units_run": outcome.ran,
        "executor": executor.name, "versions": R.versions(), "git_revision": R.git_revision(),
        "command": list(argv if argv is not None else sys.argv), "started": started, "finished": stamp(),
    }
    meta = json.loads(json.dumps(meta, default=plain_default))
    return Results.from_tables("study", {"trials": frames["study"], "agents": frames["study_agents"],
                                         "timeseries": frames["study_timeseries"]}, meta,
                               params=plan_.study.parameters())
