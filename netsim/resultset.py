"""The :class:`Results` of a run or a sweep: three tidy tables, their files and their figures.

A :class:`Results` holds pandas DataFrames, one row per observation:

- ``trials``: one row per trial (per grid point and trial for a sweep);
- ``agents``: one row per trial and agent;
- ``timeseries``: one row per trial and checkpoint.

Every table carries ``scenario`` and ``protocol`` columns and, for a sweep, one column per grid
key and the ``point`` index in front, so that tables of several runs can be concatenated and
plotted by any of them without further labelling.

On disk a run is ``trials``, ``agents``, ``timeseries`` and ``timings`` tables and ``meta.json``
(the files of ``netsim run``); a sweep is ``sweep``, ``sweep_agents``, ``sweep_timeseries`` and
``meta.json`` (those of ``netsim sweep``); a study is ``study``, ``study_agents``,
``study_timeseries``, ``meta.json``, its figures and ``report.html`` (those of ``netsim study``),
with ``study`` and ``variant`` columns in front of the parameters. The agents and time-series files keep their layout of
before the Python API: without the ``scenario`` and ``protocol`` columns, which :meth:`Results.load`
takes back from the trials table (they are constant per trial, or per point of a sweep).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from netsim import files
from netsim import results as R
from netsim.errors import InputError

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


class FiguresInterrupted(KeyboardInterrupt):
    """Ctrl-C while the figures were drawn: the tables of the folder (``args[0]``) are complete."""


def read_meta(folder: Path) -> dict[str, Any]:
    """``folder/meta.json`` as a dict (a file that is not a JSON object is one InputError naming it)."""
    path = folder / "meta.json"
    try:
        meta = json.loads(files.read_text(path, what="results file", limit=files.MAX_DATA))
    except (json.JSONDecodeError, RecursionError):
        meta = None
    if not isinstance(meta, dict):
        raise InputError(f"results file {str(path)!r} is not a JSON object; accepted: the meta.json netsim wrote")
    return meta


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
        figures use), in front of every table.
    meta:
        What ``meta.json`` holds (plain JSON data): the resolved scenario or the sweep's plan,
        seed, versions, times, command.
    timings:
        Wall-clock seconds per trial (kept out of the other tables so that they are
        reproducible to the byte).
    """

    def __init__(self, trials: pd.DataFrame, agents: pd.DataFrame, timeseries: pd.DataFrame, *, kind: str = "run",
                 params: Sequence[str] = (), meta: Mapping[str, Any] | None = None,
                 timings: pd.DataFrame | None = None):
        if kind not in LAYOUTS:
            raise ValueError(f"kind {kind!r}: accepted: {', '.join(LAYOUTS)}")
        self.trials = trials
        self.agents = agents
        self.timeseries = timeseries
        self.kind = kind
        self.params = list(params)
        self.meta = dict(meta or {})
        self.timings = timings

    @classmethod
    def from_tables(cls, kind: str, tables: Mapping[str, pd.DataFrame], meta: Mapping[str, Any],
                    params: Sequence[str] = ()) -> Results:
        """Results from tables in their file layout (``agents`` and ``timeseries`` without labels)."""
        trials = tables["trials"].reset_index(drop=True)
        key = "point" if "point" in trials.columns else "trial"
        lookup = trials.drop_duplicates(key).set_index(key)

        def labelled(frame: pd.DataFrame) -> pd.DataFrame:
            frame = frame.reset_index(drop=True)
            at = frame.columns.get_loc("trial")
            for offset, label in enumerate(LABELS):
                frame.insert(at + offset, label, frame[key].map(lookup[label]))
            return frame

        return cls(trials, labelled(tables["agents"]), labelled(tables["timeseries"]), kind=kind, params=params,
                   meta=meta, timings=tables.get("timings"))

    # ------------------------------------------------------------------ files
    def tables(self) -> dict[str, pd.DataFrame]:
        """File name (without extension) → table, in the layout of :meth:`save`."""
        names = LAYOUTS[self.kind]
        out = {names["trials"]: self.trials,
               names["agents"]: self.agents.drop(columns=list(LABELS)),
               names["timeseries"]: self.timeseries.drop(columns=list(LABELS))}
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
            from netsim.studies import draw_folder

            return draw_folder(folder, self)
        if self.kind == "sweep":
            from netsim.sweeps import draw

            points = [{key: point[key] for key in self.params} for point in self.meta["points"]]
            return draw(folder, self.params, points, self.tables()["sweep_timeseries"], self.title)
        from netsim.plots import write_figures

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

    def summary(self) -> pd.DataFrame:
        """The terminal summary: per headline column mean, std, min, max and n (a run), per-point means
        (a sweep), or per variant and point means with their 95 % t intervals (a study)."""
        if self.kind == "study":
            from netsim.studies import metrics, study_from_meta
            from netsim.studies.tables import summary

            return summary(self.trials, metrics(study_from_meta(self.meta)), self.params)
        if self.kind == "sweep":
            from netsim.sweeps import summary

            return summary(self.params, self.trials)
        return R.summary(self.trials)

    def plot(self, y: str = "group_regret", *, by: str | None = None, ax: Axes | None = None) -> Figure:
        """``y`` over time: the mean over trials with a min-max band, one line per value of ``by``.

        Parameters
        ----------
        y:
            A column of ``timeseries``: ``group_regret``, ``mean_agent_regret`` or ``comm_cost``.
        by:
            The column whose values get one line each (default: the first grid key of a sweep,
            else ``scenario`` when the tables hold several scenarios, else one line); rows
            differing only in other columns are pooled.
        ax:
            Draw on these axes (default: a new figure).

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn on (a notebook shows it).
        """
        import seaborn as sns

        from netsim.plots import ShownFigure, style

        data = self.timeseries
        for column, what in ((y, "y"), (by, "by")):
            if column is not None and column not in data.columns:
                raise InputError(f"plot {what}={column!r}: accepted: {', '.join(map(str, data.columns))}")
        if by is None:
            if self.kind == "study":
                by = "variant"
            else:
                by = self.params[0] if self.params else ("scenario" if data["scenario"].nunique() > 1 else None)
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
        what = {"sweep": f"sweep over {', '.join(self.params)}", "study": "study"}.get(self.kind, "run")
        return (f"<Results: {what} of {self.title}; {len(self.trials)} trial row(s), {len(self.agents)} agent row(s), "
                f"{len(self.timeseries)} time-series row(s)>")
