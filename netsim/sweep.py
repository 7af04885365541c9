"""Parameter sweeps: a Cartesian grid of scenario overrides x trials, resumable.

A sweep is planned from a scenario, its ``--set`` overrides, ``--grid KEY=V1,V2,...`` options
and a number of trials. Every grid point is validated up front (an unknown key or a bad value
fails before anything runs). Each (point, trial) pair is a *unit*:

- its **seed** is ``SeedSequence(seed, spawn_key=(*point_key(point), trial))`` where
  :func:`point_key` is a stable hash of the point's sorted ``key = value`` pairs; it depends on
  neither the executor, the number of jobs, the order of the grid options nor the order in which
  units finish;
- its **identity** (:func:`unit_id`) is a hash of the fully resolved scenario of its point
  (``run.trials`` aside), the point and the trial; a unit stored under one command is reused by
  any later command that asks for the same unit (more trials, a longer grid), never by one that
  changed the scenario, an override or the seed.

Finished units are kept in ``OUT/units/`` (:class:`UnitStore`), one small file per unit written
to a temporary name, flushed to disk and renamed into place, so that a unit is either stored
completely or not at all, whatever interrupts the sweep (Ctrl-C, ``kill -9``, a lost worker). A
rerun of the same command runs only the missing units. The combined tables
(``sweep.csv``, ``sweep_agents.csv``, ``sweep_timeseries.csv``: the per-run tables with one
column per grid key and a ``point`` index in front) are rebuilt from the store once every unit
is there, so a table never holds a partial row or a unit twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netsim import results as R
from netsim import runner
from netsim import scenario as S
from netsim.errors import InputError
from netsim.sim import TrialResult

STORE_FORMAT = 1
FORBIDDEN_KEYS = {"run.trials": "use --trials"}


# ---------------------------------------------------------------------- grid syntax
@dataclass(frozen=True)
class Axis:
    """One ``--grid`` option: a dotted scenario key and its values, in the order given."""

    key: str
    values: tuple[Any, ...]


def _split_top_level(text: str) -> list[str]:
    """Split at commas outside quotes, brackets and braces."""
    items, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced {ch!r}")
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
        i += 1
    if quote or depth:
        raise ValueError("unbalanced quote or bracket")
    items.append(text[start:])
    return items


def _value(item: str) -> Any:
    """One grid value: a TOML value when it parses as one, else a bare word (as ``--set`` does)."""
    try:
        return tomllib.loads(f"v = {item}")["v"]
    except tomllib.TOMLDecodeError:
        if any(ch in item for ch in "[]{}\"'=") or any(ch.isspace() for ch in item):
            raise ValueError(f"{item!r} is neither a TOML value nor a bare word") from None
        return item


def parse_axis(text: str) -> Axis:
    """``protocol.epsilon=0.1,0.5,1`` → ``Axis("protocol.epsilon", (0.1, 0.5, 1))``.

    Values are TOML values like those of ``--set`` (numbers, booleans, quoted strings, arrays,
    inline tables) or bare words (``ring``), separated by commas outside brackets.
    """
    usage = "accepted: KEY=V1,V2,... with a dotted KEY, e.g. --grid protocol.epsilon=0.1,0.5,1"
    if "=" not in text:
        raise InputError(f"--grid {text!r}: no '='; {usage}")
    key, raw = (part.strip() for part in text.split("=", 1))
    if not key or any(not part or part.strip() != part for part in key.split(".")):
        raise InputError(f"--grid {text!r}: bad key {key!r}; {usage}")
    if key in FORBIDDEN_KEYS:
        raise InputError(f"--grid {text!r}: {key} cannot be swept ({FORBIDDEN_KEYS[key]}); {usage}")
    try:
        items = [item.strip() for item in _split_top_level(raw)]
        if any(not item for item in items):
            raise ValueError("empty value")
        values = tuple(_value(item) for item in items)
    except ValueError as exc:
        raise InputError(f"--grid {text!r}: {exc}; {usage}") from None
    return Axis(key, values)


def parse_grid(texts: Sequence[str]) -> list[Axis]:
    """Every ``--grid`` option; a key may appear once."""
    if not texts:
        raise InputError("no --grid given; accepted: at least one --grid KEY=V1,V2,...")
    axes = [parse_axis(text) for text in texts]
    seen: set[str] = set()
    for axis in axes:
        if axis.key in seen:
            raise InputError(f"--grid {axis.key} given twice; accepted: each key once, with all its values")
        seen.add(axis.key)
    return axes


def toml_value(value: Any) -> str:
    """``value`` written as a TOML value (the inverse of ``_value`` for what TOML can hold)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def _toml_key(key: str) -> str:
    return key if key and all(ch.isascii() and (ch.isalnum() or ch in "_-") for ch in key) else _toml_string(key)


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, the rest literal."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


# ---------------------------------------------------------------------- identities
def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=True, default=_plain_default)


def _plain_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON data: {value!r}")


def point_key(assignments: Mapping[str, Any]) -> tuple[int, int]:
    """Spawn-key prefix of a grid point: two 32-bit words of SHA-256 of its sorted pairs."""
    digest = hashlib.sha256(_canonical(sorted(assignments.items())).encode()).digest()
    return int.from_bytes(digest[:4], "big"), int.from_bytes(digest[4:8], "big")


def unit_id(scenario: S.Scenario, assignments: Mapping[str, Any], trial: int) -> str:
    """Identity of a stored unit: hash of the resolved scenario (``run.trials`` aside), point and trial."""
    return _unit_ids(scenario, assignments, [trial])[0]


def _unit_ids(scenario: S.Scenario, assignments: Mapping[str, Any], trials: Sequence[int]) -> list[str]:
    resolved = scenario.as_dict()
    resolved["run"] = {k: v for k, v in resolved["run"].items() if k != "trials"}
    prefix = _canonical({"scenario": resolved, "point": sorted(assignments.items())})[:-1]
    return [hashlib.sha256(f'{prefix},"trial":{int(t)}}}'.encode()).hexdigest()[:32] for t in trials]


def _resolved_value(scenario: S.Scenario, key: str, raw: Any) -> Any:
    """The value of dotted ``key`` after validation (so ``1`` and ``1.0`` are one point)."""
    node: Any = scenario.as_dict()
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return raw
        node = node[part]
    return node


# ---------------------------------------------------------------------- plan
@dataclass(frozen=True)
class Point:
    """One grid point: its index in the grid, ``key → value`` pairs and validated scenario."""

    index: int
    assignments: Mapping[str, Any]
    scenario: S.Scenario

    @property
    def key(self) -> tuple[int, int]:
        return point_key(self.assignments)

    def label(self) -> str:
        return ", ".join(f"{k}={toml_value(v)}" for k, v in self.assignments.items())


@dataclass(frozen=True)
class PlannedUnit:
    id: str
    point: Point
    trial: int

    def unit(self) -> runner.Unit:
        return runner.Unit(self.point.scenario, self.trial, self.point.key)


@dataclass(frozen=True)
class Plan:
    scenario: str
    overrides: tuple[str, ...]
    axes: tuple[Axis, ...]
    trials: int
    seed: int
    points: tuple[Point, ...]

    @property
    def keys(self) -> list[str]:
        return [axis.key for axis in self.axes]

    def units(self) -> list[PlannedUnit]:
        """Every (point, trial) unit, point-major."""
        return [PlannedUnit(uid, p, t) for p in self.points
                for t, uid in enumerate(_unit_ids(p.scenario, p.assignments, range(self.trials)))]

    def describe(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "overrides": list(self.overrides),
                "grid": {axis.key: list(axis.values) for axis in self.axes},
                "trials": self.trials, "seed": self.seed, "points": len(self.points)}


def plan(scenario: str | None, grid: Sequence[str], *, overrides: Sequence[str] = (), trials: int | None = None,
         seed: int | None = None) -> Plan:
    """Parse the grid and validate the scenario of every point (errors name the point)."""
    axes = parse_grid(grid)
    base = runner.with_run_options(S.load(scenario, list(overrides)), trials=trials, seed=seed)
    sweeps_seed = any(axis.key == "run.seed" for axis in axes)
    if sweeps_seed and seed is not None:
        raise InputError("--seed and --grid run.seed=... both given; accepted: one of them")
    run_flags = [f"run.trials={base.run['trials']}"] + ([] if sweeps_seed else [f"run.seed={base.run['seed']}"])
    points, seen = [], {}
    for index, combo in enumerate(itertools.product(*(axis.values for axis in axes))):
        sets = [f"{axis.key}={toml_value(value)}" for axis, value in zip(axes, combo)]
        try:
            point_scenario = S.load(scenario, [*overrides, *run_flags, *sets])
        except InputError as exc:
            raise InputError(f"--grid point {', '.join(sets)}: {exc}") from None
        assignments = {axis.key: _resolved_value(point_scenario, axis.key, value) for axis, value in zip(axes, combo)}
        identity = unit_id(point_scenario, assignments, 0)
        if identity in seen:
            raise InputError(f"--grid points {seen[identity]} and {', '.join(sets)} are the same scenario; "
                             "accepted: distinct values for each key")
        seen[identity] = ", ".join(sets)
        points.append(Point(index, assignments, point_scenario))
    return Plan(scenario or S.DEFAULT_SCENARIO, tuple(overrides), tuple(axes), base.run["trials"],
                base.run["seed"], tuple(points))


# ---------------------------------------------------------------------- store
def _encode_result(unit: PlannedUnit, result: TrialResult) -> dict[str, Any]:
    def columns(table: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return {k: {"dtype": str(np.asarray(v).dtype), "values": np.asarray(v).tolist()} for k, v in table.items()}

    return {
        "format": STORE_FORMAT, "unit": unit.id, "point": [[k, v] for k, v in unit.point.assignments.items()],
        "trial": unit.trial, "row": result.row, "agents": columns(result.agents),
        "timeseries": columns(result.timeseries), "wall_s": result.wall_s, "info": result.info,
    }


def decode_result(record: Mapping[str, Any]) -> TrialResult:
    """The :class:`TrialResult` stored in ``record`` (arrays with their original dtypes)."""
    def columns(table: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {k: np.asarray(v["values"], dtype=v["dtype"]) for k, v in table.items()}

    return TrialResult(dict(record["row"]), columns(record["agents"]), columns(record["timeseries"]),
                       float(record["wall_s"]), dict(record["info"]))


class UnitStore:
    """Append-only store of finished units: ``DIR/<unit id>.json``, one file per unit.

    A file holds two lines: the unit's record as JSON, then the SHA-256 of that line. It is
    written to a hidden temporary name in the same folder, flushed and fsync'ed, then renamed
    into place (atomic on POSIX), so a reader sees a whole unit or none; a file whose checksum
    does not match (a damaged disk, a hand edit) counts as missing and is redone. Leftover
    temporary files of a killed sweep are removed by :meth:`clean`.
    """

    SUFFIX = ".json"

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path(self, uid: str) -> Path:
        return self.folder / f"{uid}{self.SUFFIX}"

    def clean(self) -> int:
        """Remove temporary files left by an interrupted writer (call while holding the lock)."""
        removed = 0
        if self.folder.is_dir():
            for path in self.folder.glob(".*.tmp"):
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def put(self, uid: str, record: Mapping[str, Any]) -> None:
        line = _canonical(record)
        data = f"{line}\n{hashlib.sha256(line.encode()).hexdigest()}\n".encode()
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.path(uid)
        tmp = self.folder / f".{uid}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def get(self, uid: str) -> dict[str, Any] | None:
        """The record of ``uid``, or ``None`` when it is absent or damaged."""
        try:
            text = self.path(uid).read_text()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        lines = text.split("\n")
        if len(lines) != 3 or lines[2] != "" or hashlib.sha256(lines[0].encode()).hexdigest() != lines[1]:
            return None
        try:
            record = json.loads(lines[0])
        except json.JSONDecodeError:
            return None
        return record if record.get("unit") == uid and record.get("format") == STORE_FORMAT else None

    def ids(self) -> set[str]:
        """Ids of every stored file (not checked; use :meth:`get`)."""
        if not self.folder.is_dir():
            return set()
        return {p.name[: -len(self.SUFFIX)] for p in self.folder.glob(f"*{self.SUFFIX}") if not p.name.startswith(".")}


@contextlib.contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out`` so that two sweeps never write one folder at once."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield
        return
    with open(out / ".sweep.lock", "a+") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise InputError(f"--out {str(out)!r}: another sweep is writing to this folder; accepted: wait "
                             "for it to finish, or use another --out") from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


# ---------------------------------------------------------------------- running
@dataclass
class Outcome:
    total: int
    reused: int
    ran: int
    results: dict[str, TrialResult]


def run(plan_: Plan, out: Path, *, executor: runner.Executor | str | None = "serial", jobs: int = 1,
        scheduler: str | None = None, progress: bool | None = None,
        on_stored: Callable[[PlannedUnit], None] | None = None) -> Outcome:
    """Run the units of ``plan_`` missing from ``out/units`` and store each as it finishes.

    Returns the results of every unit (stored earlier or now). Stored units are never deleted;
    an error or an interruption leaves every unit finished so far in the store.
    """
    store = UnitStore(out / "units")
    units = plan_.units()
    with locked(out):
        store.clean()
        results: dict[str, TrialResult] = {}
        for unit in units:
            record = store.get(unit.id)
            if record is not None:
                results[unit.id] = decode_result(record)
        missing = [unit for unit in units if unit.id not in results]
        reused = len(units) - len(missing)
        if missing:
            pool = executor if isinstance(executor, runner.Executor) else runner.make_executor(
                executor, jobs=jobs, scheduler=scheduler)
            try:
                stream = runner.iter_results([u.unit() for u in missing], executor=pool, progress=progress,
                                             total=len(units), initial=reused)
                for index, result in stream:
                    unit = missing[index]
                    store.put(unit.id, _encode_result(unit, result))
                    # What the tables use is what the store holds (JSON round trip), whatever ran it.
                    results[unit.id] = decode_result(json.loads(_canonical(_encode_result(unit, result))))
                    if on_stored is not None:
                        on_stored(unit)
            finally:
                if pool is not executor:
                    pool.close()
    return Outcome(len(units), reused, len(missing), results)


# ---------------------------------------------------------------------- tables
def _cell(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else toml_value(value)


def tables(plan_: Plan, results: Mapping[str, TrialResult]) -> dict[str, pd.DataFrame]:
    """``sweep``, ``sweep_agents`` and ``sweep_timeseries``: grid columns, ``point``, then the run tables."""
    keys = plan_.keys
    units = plan_.units()
    ordered = [results[u.id] for u in units]
    out = {}
    for name, build in (("sweep", R.trials_table), ("sweep_agents", R.agents_table),
                        ("sweep_timeseries", R.series_table)):
        frames = []
        for unit, result in zip(units, ordered):
            frame = build([result]).reset_index(drop=True)
            front = pd.DataFrame({key: [_cell(unit.point.assignments[key])] * len(frame) for key in keys})
            front["point"] = unit.point.index
            frames.append(pd.concat([front, frame], axis=1))
        combined = pd.concat(frames, ignore_index=True)
        if name == "sweep":
            fixed = keys + ["point"] + [c for c in R.TRIAL_COLUMNS]
            extras = sorted(c for c in combined.columns if c not in fixed)
            for column in extras:
                if column.startswith("sent_"):
                    combined[column] = combined[column].fillna(0).astype(np.int64)
            combined = combined[fixed + extras]
        out[name] = combined.reset_index(drop=True)
    return out


def write_tables(out: Path, frames: Mapping[str, pd.DataFrame]) -> list[Path]:
    written = []
    for name, frame in frames.items():
        path = out / f"{name}.csv"
        R.atomic_write(path, frame.to_csv(index=False, lineterminator="\n").encode())
        written.append(path)
    return written


def write_meta(out: Path, plan_: Plan, outcome: Outcome, *, argv: Sequence[str], started: str,
               finished: str, executor: str) -> Path:
    meta = {
        "sweep": plan_.describe(),
        "points": [{"point": p.index, **{k: v for k, v in p.assignments.items()}, "seed_key": list(p.key)}
                   for p in plan_.points],
        "units": outcome.total, "units_reused": outcome.reused, "units_run": outcome.ran,
        "executor": executor, "versions": R.versions(), "git_revision": R.git_revision(),
        "command": list(argv), "started": started, "finished": finished,
    }
    path = out / "meta.json"
    R.atomic_write(path, json.dumps(meta, indent=2, default=_plain_default).encode())
    return path


def summary(plan_: Plan, frame: pd.DataFrame) -> pd.DataFrame:
    """Per point: mean of the headline columns over trials."""
    columns = ["group_regret", "comm_cost", "messages_sent"]
    grouped = frame.groupby("point", sort=True)
    table = grouped[columns].mean()
    table.insert(0, "trials", grouped.size())
    for key in reversed(plan_.keys):
        table.insert(0, key, grouped[key].first())
    return table.reset_index(drop=True)


# ---------------------------------------------------------------------- figures
def _label(value: Any) -> str:
    if isinstance(value, np.generic):  # a cell read back by pandas
        value = value.item()
    return value if isinstance(value, str) else toml_value(value)


def _safe(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in key)


def plot(out: Path, plan_: Plan, series: pd.DataFrame, title: str | None = None) -> list[Path]:
    """The figures of a sweep just run (see :func:`draw`)."""
    points = [dict(p.assignments) for p in plan_.points]
    return draw(out, plan_.keys, points, series, title or plan_.scenario)


def plot_folder(folder: Path) -> list[Path]:
    """Redraw the figures of a folder written by ``netsim sweep`` (its meta.json and sweep_timeseries)."""
    meta = json.loads((folder / "meta.json").read_text())
    keys = list(meta["sweep"]["grid"])
    points = [{key: point[key] for key in keys} for point in meta["points"]]
    series = pd.read_csv(folder / "sweep_timeseries.csv")
    return draw(folder, keys, points, series, meta["sweep"]["scenario"])


def draw(out: Path, keys: Sequence[str], points: Sequence[Mapping[str, Any]], series: pd.DataFrame,
         title: str) -> list[Path]:
    """One faceted figure per grid key: group regret over time, one line per value of that key
    (mean over trials, band min-max), one panel per value of the next key and one row per value
    of the key after that (keys with one value are not faceted; later keys are pooled).

    ``points`` gives each point's ``key → value`` in grid order (it orders legends and panels).
    Written as ``regret_by_<key>.png``; with a communication cost, ``communication_by_<key>.png`` too.
    """

    import matplotlib.pyplot as plt
    import seaborn as sns

    from netsim.plots import png, style

    frame = series.copy()
    labels = {}
    for key in keys:
        frame[key] = [_label(v) for v in frame[key]]
        labels[key] = list(dict.fromkeys(_label(_cell(p[key])) for p in points))
    written = []
    measures = [("group_regret", "group pseudo-regret", "regret")]
    if frame["comm_cost"].max() > 0:
        measures.append(("comm_cost", "communication cost C(t)", "communication"))
    for key in keys:
        others = [k for k in keys if k != key and len(labels[k]) > 1][:2]
        facet = {}
        if others:
            facet["col"] = others[0]
            facet["col_order"] = labels[others[0]]
        if len(others) > 1:
            facet["row"] = others[1]
            facet["row_order"] = labels[others[1]]
        for column, ylabel, stem in measures:
            with style():  # relplot makes its own pyplot figure; it is closed right after
                grid = sns.relplot(data=frame, x="time", y=column, hue=key, hue_order=labels[key], kind="line",
                                   errorbar=("pi", 100), height=3.2, aspect=1.3, facet_kws={"margin_titles": True},
                                   **facet)
                grid.set_axis_labels("time (slots)", ylabel)
                figure = grid.figure
                figure.suptitle(f"{title}: by {key} (band: min-max over trials)", fontsize=10)
                figure.subplots_adjust(top=1 - 0.8 / figure.get_figheight())
                data = png(figure, dpi=100)
                plt.close(figure)
            path = out / f"{stem}_by_{_safe(key)}.png"
            R.atomic_write(path, data)
            written.append(path)
    return written
