"""The :class:`Results` of a run or a sweep: three tidy tables, their files and their figures.

A :class:`Results` holds pandas DataFrames, one row per observation:

- ``trials``: one row per trial (per grid point and trial for a sweep);
- ``agents``: one row per trial and agent;
- ``timeseries``: one row per trial and checkpoint.

Every table carries ``scenario`` and ``protocol`` columns and, for a sweep, one column per grid
key and the ``point`` index in front, so that tables of several runs can be concatenated and
plotted by any of them without further labelling.

Parameter columns are named for pandas: the dotted scenario key with its dots replaced by
underscores (:func:`column_name`: ``network.agents`` → ``network_agents``), so that
``trials.query("network_agents == 5")`` and ``trials.network_agents`` work; the dotted key of
each is kept in :attr:`Results.params` and in every table's ``attrs["params"]`` (column → key).
The files keep the dotted keys as column names (``sweep.csv``, ``study.csv``): they are the keys
``--grid`` and study files name, what the figures read and what earlier result folders hold;
:meth:`Results.save` and :meth:`Results.load` translate.

On disk a run is ``trials``, ``agents``, ``timeseries`` and ``timings`` tables and ``meta.json``
(the files of ``netsim run``); a sweep is ``sweep``, ``sweep_agents``, ``sweep_timeseries`` and
``meta.json`` (those of ``netsim sweep``); a study is ``study``, ``study_agents``,
``study_timeseries``, ``meta.json``, its figures and ``report.html`` (those of ``netsim study``),
with ``study`` and ``variant`` columns in front of the parameters. The agents and time-series files keep their layout of
before the Python API: without the ``scenario`` and ``protocol`` columns, which :meth:`Results.load`
takes back from the trials table (they are constant per trial, or per point of a sweep).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from netsim.engine import files
from netsim.engine.errors import InputError
from netsim.experiment import results as R
from netsim.experiment.results import read_meta

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: File names (without extension) of the three tables, by kind of results.
LAYOUTS: dict[str, dict[str, str]] = {
    "run": {"trials": "trials", "agents": "agents", "timeseries": "timeseries"},
    "sweep": {"trials": "sweep", "agents": "sweep_agents", "timeseries": "sweep_timeseries"},
    "study": {"trials": "study", "agents": "study_agents", "timeseries": "study_timeseries"},
}
#: columns in front of a study's tables that are not parameters
STUDY_FRONT = ("study", "variant")
#: Columns of ``agents`` and ``timeseries`` taken from ``trials`` (not stored in their files).
LABELS = ("scenario", "protocol")
YLABELS = {"group_regret": "group pseudo-regret", "mean_agent_regret": "per-agent pseudo-regret",
           "comm_cost": "communication cost C(t) (li2022 Eq. 2)"}


def _is_figure(relative: str, *, study: bool) -> bool:
    """A figure (or a study's report) that a save draws: what an earlier save's figures are called."""
    top = "/" not in relative and relative.endswith(".png") and relative.startswith(("regret", "communication"))
    drawn = relative == "report.html" or (relative.startswith("figures/") and relative.count("/") == 1)
    return top or (study and drawn)


#: the summary's statistics columns, after the group columns and ``metric``
SUMMARY_STATS = ("trials", "unfinished", "failed", "n", "mean", "std", "lo", "hi")


def column_name(key: str) -> str:
    """The DataFrame column of the dotted scenario key ``key``: ``network.agents`` → ``network_agents``."""
    return key.replace(".", "_")


class FiguresInterrupted(KeyboardInterrupt):
    """Ctrl-C while the figures were drawn: the tables of the folder (``args[0]``) are complete."""


class Results:
    """The tables of a run or a sweep (see the module docstring).

    Parameters
    ----------
    trials, agents, timeseries:
        The three tables, each with ``scenario`` and ``protocol`` columns.
    kind:
        ``"run"``, ``"sweep"`` or ``"study"``: the file layout :meth:`save` writes (:data:`LAYOUTS`).
    params:
        The parameter columns (a sweep's grid keys; a study's grid keys and the scenario keys its
        figures use), in front of every table: column name → dotted scenario key (e.g.
        ``{"network_agents": "network.agents"}``; see :func:`column_name`).
    meta:
        What ``meta.json`` holds (plain JSON data): the resolved scenario or the sweep's plan,
        seed, versions, times, command.
    timings:
        Wall-clock seconds per trial (kept out of the other tables so that they are
        reproducible to the byte).
    """

    def __init__(self, trials: pd.DataFrame, agents: pd.DataFrame, timeseries: pd.DataFrame, *, kind: str = "run",
                 params: Mapping[str, str] | None = None, meta: Mapping[str, Any] | None = None,
                 timings: pd.DataFrame | None = None):
        if kind not in LAYOUTS:
            raise ValueError(f"kind {kind!r}: accepted: {', '.join(LAYOUTS)}")
        self.trials = trials
        self.agents = agents
        self.timeseries = timeseries
        self.kind = kind
        self.params: dict[str, str] = dict(params or {})
        for frame in (trials, agents, timeseries):
            frame.attrs["params"] = dict(self.params)
        self.meta = dict(meta or {})
        self.timings = timings

    @classmethod
    def from_tables(cls, kind: str, tables: Mapping[str, pd.DataFrame], meta: Mapping[str, Any],
                    params: Sequence[str] = ()) -> Results:
        """Results from tables in their file layout (``agents`` and ``timeseries`` without labels,
        parameter columns named by their dotted keys ``params``)."""
        columns = {key: column_name(key) for key in params}
        renamed = {column for key, column in columns.items() if column != key}
        if len(set(columns.values())) < len(columns) or renamed & set(tables["trials"].columns):
            raise ValueError(f"parameters {list(params)}: two of them, or one and a table column, share a name "
                             "once their dots are underscores")
        tables = {name: frame.rename(columns=columns) if name != "timings" else frame
                  for name, frame in tables.items()}
        trials = tables["trials"].reset_index(drop=True)
        key = "point" if "point" in trials.columns else "trial"
        lookup = trials.drop_duplicates(key).set_index(key)

        def labelled(frame: pd.DataFrame) -> pd.DataFrame:
            frame = frame.reset_index(drop=True)
            at = frame.columns.get_loc("trial")
            for offset, label in enumerate(LABELS):
                frame.insert(at + offset, label, frame[key].map(lookup[label]))
            return frame

        return cls(trials, labelled(tables["agents"]), labelled(tables["timeseries"]), kind=kind,
                   params={column: key for key, column in columns.items()}, meta=meta, timings=tables.get("timings"))

    # ------------------------------------------------------------------ files
    def tables(self) -> dict[str, pd.DataFrame]:
        """File name (without extension) → table, in the layout of :meth:`save` (parameter columns
        named by their dotted keys)."""
        names = LAYOUTS[self.kind]
        dotted = dict(self.params)
        out = {names["trials"]: self.trials.rename(columns=dotted),
               names["agents"]: self.agents.drop(columns=list(LABELS)).rename(columns=dotted),
               names["timeseries"]: self.timeseries.drop(columns=list(LABELS)).rename(columns=dotted)}
        if self.timings is not None:
            out["timings"] = self.timings
        return out

    def save(self, folder: str | Path, *, format: str = "csv", plots: bool = True) -> dict[str, Path]:
        """Write the tables, ``meta.json`` and (with ``plots``) the figures into ``folder``.

        The files are those of ``netsim run`` / ``netsim sweep``: tables as CSV (or Parquet
        with ``format="parquet"``), written together so that an interruption leaves the old
        set or the new one; then ``regret.png`` and ``communication.png`` (a run) or one
        ``regret_by_<key>.png`` per grid key (a sweep), or the study's figures (``figures/``: PNG, SVG
        and the plotted data as CSV) and ``report.html``. Figures left by an earlier save are removed
        once the new tables are in place. Returns file name → path.
        """
        folder = Path(folder)
        if folder.exists() and not folder.is_dir():
            raise InputError(f"results folder {str(folder)!r} exists and is not a folder")
        written = files.write_together(folder, R.file_contents(self.tables(), self.meta, format))
        # figures of earlier tables never sit beside these (even if drawing is interrupted); only files that
        # netsim's manifest lists are deleted, never one the user put there
        files.remove_written(folder, lambda relative: _is_figure(relative, study=self.kind == "study"))
        if plots:
            try:
                for path in self._figures(folder):
                    written[path.name] = path
            except KeyboardInterrupt:
                raise FiguresInterrupted(folder) from None
        return written

    def _figures(self, folder: Path) -> list[Path]:
        if self.kind == "study":
            from netsim.experiment.studies import draw_folder

            return draw_folder(folder, self)
        if self.kind == "sweep":
            from netsim.experiment.sweeps import draw

            keys = list(self.params.values())
            points = [{key: point[key] for key in keys} for point in self.meta["points"]]
            return draw(folder, keys, points, self.tables()["sweep_timeseries"], self.title)
        from netsim.experiment.plots import write_figures

        return write_figures(folder, self.timeseries, self.title)

    @classmethod
    def load(cls, folder: str | Path) -> Results:
        """The results saved in ``folder`` (by :meth:`save`, ``netsim run`` or ``netsim sweep``)."""
        folder = Path(folder)
        for kind, names in LAYOUTS.items():
            try:
                trials = R.read_table(folder, names["trials"])
            except FileNotFoundError:
                continue
            tables = {"trials": trials, "agents": R.read_table(folder, names["agents"]),
                      "timeseries": R.read_table(folder, names["timeseries"])}
            if kind == "run" and any((folder / f"timings.{ext}").is_file() for ext in R.FORMATS):
                tables["timings"] = R.read_table(folder, "timings")
            meta = read_meta(folder) if (folder / "meta.json").is_file() else {}
            columns = list(trials.columns)
            params = [c for c in columns[: columns.index("point")] if kind != "study" or c not in STUDY_FRONT] \
                if "point" in columns else []
            return cls.from_tables(kind, tables, meta, params)
        accepted = ", ".join(f"{names['trials']}.csv" for names in LAYOUTS.values())
        raise InputError(f"results folder {str(folder)!r}: no trials table; accepted: a folder with one of "
                         f"{accepted} (written by netsim run, netsim sweep or Results.save)")

    # ------------------------------------------------------------------ looking
    @property
    def title(self) -> str:
        """The scenario's name (a sweep's base scenario), as figures are titled."""
        if self.kind == "sweep" and "sweep" in self.meta:
            return str(self.meta["sweep"]["scenario"])
        if self.kind == "study" and "study" in self.meta:
            return f"{self.meta['study']['study']} ({self.meta['study']['scale']} scale)"
        if "scenario" in self.meta:
            return str(self.meta["scenario"]["name"])
        return ", ".join(map(str, self.trials["scenario"].unique()))

    def summary(self, metrics: Sequence[str] | None = None) -> pd.DataFrame:
        """One row per point and metric: how many trials, how they ended, and the metric's statistics.

        The same shape for a run (one point), a sweep and a study: the group columns (a study's
        ``variant``; the parameter columns; ``scenario``, ``protocol``), then ``metric``, ``trials``,
        ``unfinished``, ``failed``, and over the trials that did not fail: ``n`` (those with a
        value: a protocol leaves some columns empty in unfinished trials), ``mean``, ``std``
        (sample standard deviation) and ``lo``, ``hi`` (the 95 % Student-t interval of the mean;
        with one value, the value). A tidy table: ``summary().query("metric == 'group_regret'")``,
        ``.pivot_table(index="variant", columns="metric", values="mean")``.

        Parameters
        ----------
        metrics:
            Columns of ``trials`` to summarise. Default: a run's headline columns (regret,
            communication, links, messages, rounds) and a sweep's (regret, communication cost,
            messages), each followed by the protocol's numeric columns; a study's figure metrics
            and communication columns.
        """
        from netsim.experiment.studies.stats import interval

        frame = self.trials
        if metrics is None:
            metrics = self._default_metrics()
        unknown = [m for m in metrics if m not in frame.columns]
        if unknown:
            raise InputError(f"summary metrics {unknown}: accepted: columns of trials, e.g. group_regret, comm_cost")
        front = (["variant"] if self.kind == "study" else []) + list(self.params) + list(LABELS)
        groups = frame.groupby("point", sort=True) if "point" in frame.columns else [(0, frame)]
        rows = []
        for _, group in groups:
            first = group.iloc[0]
            counts = {"trials": len(group), "unfinished": int((group["status"] == "unfinished").sum()),
                      "failed": int((group["status"] == "failed").sum())}
            kept = group[group["status"] != "failed"]
            for metric in metrics:
                values = pd.to_numeric(kept[metric], errors="coerce").to_numpy(dtype=float)
                mean, lo, hi, n = interval(values)
                std = float(np.nanstd(values, ddof=1)) if n > 1 else float("nan")
                rows.append({**{c: first[c] for c in front}, "metric": metric, **counts, "n": n, "mean": mean,
                             "std": std, "lo": lo, "hi": hi})
        table = pd.DataFrame(rows, columns=[*front, "metric", *SUMMARY_STATS])
        table.attrs["params"] = dict(self.params)
        return table

    def _default_metrics(self) -> list[str]:
        if self.kind == "study":
            from netsim.experiment.studies import metrics, study_from_meta

            return [m for m in metrics(study_from_meta(self.meta)) if m in self.trials.columns]
        from netsim.experiment.studies.tables import HEADLINE

        headline = list(HEADLINE) if self.kind == "sweep" else [
            "group_regret", "mean_agent_regret", "comm_cost", "links_agent_agent", "links_server_agent",
            "messages_sent", "messages_corrupted", "rounds"]
        front = set(self.params) | {"point", "variant", "study"}
        return headline + [c for c in self.trials.columns if c not in R.TRIAL_COLUMNS and c not in front
                           and not c.startswith("sent_") and pd.api.types.is_numeric_dtype(self.trials[c])]

    def plot(self, y: str = "group_regret", *, by: str | None = None, ax: Axes | None = None) -> Figure:
        """``y`` over time: the mean over trials with a min-max band, one line per value of ``by``.

        Parameters
        ----------
        y:
            A column of ``timeseries``: ``group_regret``, ``mean_agent_regret`` or ``comm_cost``.
        by:
            The column whose values get one line each, or a parameter's dotted key (default: the
            first grid key of a sweep, else ``scenario`` when the tables hold several scenarios,
            else one line); rows differing only in other columns are pooled.
        ax:
            Draw on these axes (default: a new figure).

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on (a notebook shows it).
        """
        import seaborn as sns

        from netsim.experiment.plots import ShownFigure, style

        data = self.timeseries
        by = {key: column for column, key in self.params.items()}.get(by, by)
        for column, what in ((y, "y"), (by, "by")):
            if column is not None and column not in data.columns:
                raise InputError(f"plot {what}={column!r}: accepted: {', '.join(map(str, data.columns))}")
        if by is None:
            if self.kind == "study":
                by = "variant"
            elif self.params:
                by = next(iter(self.params))
            elif data["scenario"].nunique() > 1:
                by = "scenario"
        hue: dict[str, Any] = {}
        if by is not None:
            data = data.assign(**{by: data[by].map(str)})
            hue = {"hue": by, "hue_order": list(dict.fromkeys(data[by]))}
        with style():
            if ax is None:
                ax = ShownFigure(figsize=(6.4, 4.2), layout="tight").subplots()
            # errorbar=("pi", 100): the band spans the 0th to the 100th percentile, min to max over trials.
            sns.lineplot(data=data, x="time", y=y, errorbar=("pi", 100), ax=ax, **hue)
            ax.set_xlabel("time (slots)")
            ax.set_ylabel(YLABELS.get(y, y))
            ax.set_title(f"{self.title} (band: min-max over trials)", fontsize=10)
        return ax.figure

    def __repr__(self) -> str:
        what = {"sweep": f"sweep over {', '.join(self.params.values())}", "study": "study"}.get(self.kind, "run")
        return (f"<Results: {what} of {self.title}; {len(self.trials)} trial row(s), {len(self.agents)} agent row(s), "
                f"{len(self.timeseries)} time-series row(s)>")
