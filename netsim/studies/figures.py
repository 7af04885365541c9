"""A study's figures: the data each one plots (:func:`figure_data`), drawn by :func:`draw`.

Each figure is written three times into ``OUT/figures/``: ``NAME.csv`` (exactly the numbers it
plots: one row per curve point, bar or trade-off point, with its mean, 95 % interval and counts),
``NAME.png`` and ``NAME.svg``. Tests read the CSV and the matplotlib axes, not the pixels.

What a figure pools: rows that differ only in columns the figure does not name (not ``x``,
``hue`` or ``facet``) are pooled into one mean. Failed trials are left out (and counted).

References: a variant with ``grid = false`` has no value in the grid columns; where such a
column is a figure's ``x`` its row gets ``x`` empty and is drawn as a horizontal line with its
band across the panel; where it is the ``facet`` the row is drawn in every panel.

Baselines: with ``baseline = "NAME"`` the metric of every row is replaced by its difference from
the baseline variant's row of the same trial at the same grid point (or any grid point, when the
baseline does not run on the grid; and at the same time for a series), before the statistics: the
interval is then the paired one. Rows without a baseline partner are left out; the baseline
itself is not drawn.

Order and colours: curves follow the study's variant order (or the grid's value order), and a
hue value has the same colour in every figure of a study.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from netsim.files import write
from netsim.studies.spec import Figure, Study
from netsim.studies.stats import CONFIDENCE, pareto, slope, summarise

LABELS = {"group_regret": "group pseudo-regret", "mean_agent_regret": "per-agent pseudo-regret",
          "comm_cost": "communication cost C(t) (li2022 Eq. 2)", "messages_sent": "messages sent",
          "sample_complexity": "sample complexity (rounds)", "time": "time (slots)"}
NONE = "(all)"  # the label of a figure's single group when it has no hue or no facet


def _label(column: str) -> str:
    return LABELS.get(column, column)


def _text(value: Any) -> str:
    """A group label as legends and the CSV show it (an integral float without its .0)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _numeric(values: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _params(frame: pd.DataFrame) -> list[str]:
    """The parameter columns of a study table (between ``variant`` and ``point``)."""
    columns = list(frame.columns)
    return columns[columns.index("variant") + 1: columns.index("point")]


def _paired(figure: Figure, frame: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """``frame`` with ``figure.y`` replaced by its difference from the baseline variant's row that
    shares ``on`` (trial, time) and the grid values the baseline has (see the module docstring)."""
    base = frame[frame["variant"] == figure.baseline]
    # the grid columns: those that vary between the baseline's own points (a figure's other keys,
    # e.g. protocol.epsilon when variants are separate scenarios, are constant for the baseline)
    grid = [c for c in _params(frame) if base[c].nunique() > 1]
    keys = grid + on
    partner = base.set_index(keys)[figure.y]
    if partner.index.has_duplicates:
        partner = partner.groupby(level=list(range(len(keys)))).first()
    rows = frame[frame["variant"] != figure.baseline]
    index = pd.MultiIndex.from_frame(rows[keys]) if len(keys) > 1 else pd.Index(rows[keys[0]])
    other = partner.reindex(index).to_numpy(dtype=float)
    rows = rows.assign(**{figure.y: rows[figure.y].to_numpy(dtype=float) - other})
    return rows[~np.isnan(other)]


def _selected(figure: Figure, frame: pd.DataFrame, failed: set[tuple[int, int]], on: list[str]) -> pd.DataFrame:
    """The rows a figure draws: its variants, without failed trials, as baseline differences when
    asked; hue and facet as text columns (a reference's empty facet: one copy per panel)."""
    rows = frame[frame["variant"].isin([*figure.variants, figure.baseline])] if figure.variants else frame
    if failed:
        rows = rows[[(p, t) not in failed for p, t in zip(rows["point"], rows["trial"])]]
    if figure.baseline:
        rows = _paired(figure, rows, on)
    rows = rows.assign(_hue=rows[figure.hue].map(_text) if figure.hue else NONE,
                       _facet=rows[figure.facet].map(_text) if figure.facet else NONE)
    if figure.facet:
        empty = rows[figure.facet].isna()
        if empty.any():
            panels = [f for f in dict.fromkeys(rows.loc[~empty, "_facet"])]
            copies = [rows[empty].assign(_facet=panel) for panel in panels]
            rows = pd.concat([rows[~empty], *copies], ignore_index=True)
    return rows


def _counts(trials: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Per group: trials ending unfinished and failed."""
    grouped = trials.groupby(by, sort=False, dropna=False)["status"]
    return pd.DataFrame({"unfinished": grouped.agg(lambda s: int((s == "unfinished").sum())),
                         "failed": grouped.agg(lambda s: int((s == "failed").sum()))}).reset_index()


def figure_data(figure: Figure, tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The numbers ``figure`` plots, from the study's ``study`` and ``study_timeseries`` tables
    (with several metrics, one block per metric, its name in the ``facet`` column)."""
    if figure.panels:
        blocks = []
        for metric in figure.metrics:
            block = figure_data(replace(figure, y=metric, metrics=(metric,)), tables)
            blocks.append(block.assign(facet=metric))
        return pd.concat(blocks, ignore_index=True)
    trials = tables["study"]
    failed_rows = trials["status"] == "failed"
    failed = set(zip(trials.loc[failed_rows, "point"], trials.loc[failed_rows, "trial"]))
    if figure.kind == "series":
        rows = _selected(figure, tables["study_timeseries"], failed, ["trial", "time"])
        data = summarise(rows, ["_facet", "_hue", "time"], figure.y)
        return data.rename(columns={"_facet": "facet", "_hue": "hue"})
    all_rows = _selected(figure, trials, set(), ["trial"])
    rows = all_rows[all_rows["status"] != "failed"]
    if figure.kind == "tradeoff":
        by = ["_facet", "_hue", "point"]
        data = summarise(rows, by, figure.x, "x_").merge(summarise(rows, by, figure.y, "y_"), on=by)
        params = [key for key in _params(all_rows) if key != figure.facet]  # the panel's title gives the facet
        points = all_rows.drop_duplicates("point").set_index("point")
        details = [_point_detail(points, p, params) for p in data["point"]]
        variants = points.loc[data["point"], "variant"].astype(str).tolist()
        data.insert(3, "label", [f"{v} ({d})" if d else v for v, d in zip(variants, details)])
        data.insert(4, "detail", details)
        data["pareto"] = False
        for facet in data["_facet"].unique():
            here = data["_facet"] == facet
            data.loc[here, "pareto"] = pareto(data.loc[here, "x_mean"], data.loc[here, "y_mean"])
        data = data.merge(_counts(all_rows, by), on=by)
        return data.rename(columns={"_facet": "facet", "_hue": "hue"})
    by = ["_facet", "_hue", figure.x]
    data = summarise(rows, by, figure.y).merge(_counts(all_rows, by), on=by, how="left")
    data[["unfinished", "failed"]] = data[["unfinished", "failed"]].fillna(0).astype(int)
    if _numeric(data[figure.x]):  # ascending x within each curve, curves kept in their order
        data["_order"] = data.groupby(["_facet", "_hue"], sort=False).ngroup()
        data = data.sort_values(["_order", figure.x], kind="stable").drop(columns="_order")
    if figure.kind == "loglog":
        data["slope"] = np.nan
        for (facet, hue), group in data.groupby(["_facet", "_hue"], sort=False):
            here = (data["_facet"] == facet) & (data["_hue"] == hue)
            data.loc[here, "slope"] = slope(group[figure.x], group["mean"])
    return data.rename(columns={"_facet": "facet", "_hue": "hue", figure.x: "x"}).reset_index(drop=True)


def _point_detail(points: pd.DataFrame, point: int, params: list[str]) -> str:
    """The parameters that vary between the trade-off points of ``point``'s variant (``key=value, ...``)."""
    row = points.loc[point]
    same = points[points["variant"] == row["variant"]]
    return ", ".join(f"{key}={_text(row[key])}" for key in params if same[key].nunique() > 1)


# ---------------------------------------------------------------------- drawing
def order(column: str, study: Study, present: Sequence[str]) -> list[str]:
    """The values of a hue or facet ``column`` in the study's order: variants as listed, grid values
    as given, anything else in order of appearance."""
    if column == "variant":
        known = [v.name for v in study.variants]
    elif column in study.grid:
        known = [_text(v) for v in study.grid[column]]
    else:
        known = []
    present = list(dict.fromkeys(present))
    return [v for v in known if v in present] + [v for v in present if v not in known]


def colours(figure: Figure, study: Study, hues: Sequence[str]) -> dict[str, Any]:
    """One colour per hue value, the same in every figure of the study (by the study's order)."""
    import seaborn as sns

    if figure.hue == "variant":
        every = [v.name for v in study.variants]
    elif figure.hue in study.grid:
        every = [_text(v) for v in study.grid[figure.hue]]
    else:
        every = list(hues)
    palette = sns.color_palette("colorblind", max(len(every), 1))
    table = dict(zip(every, palette))
    extra = [h for h in hues if h not in table]
    table.update(zip(extra, sns.color_palette("dark", max(len(extra), 1))))
    return table


def draw(figure: Figure, data: pd.DataFrame, study: Study, trials: int) -> MplFigure:
    """The matplotlib figure of ``figure`` from its :func:`figure_data` (one panel per facet)."""
    facets = (list(figure.metrics) if figure.panels else order(figure.facet, study, data["facet"])) or [NONE]
    hues = order(figure.hue, study, data["hue"]) if figure.hue else [NONE]
    palette = colours(figure, study, hues)
    columns = min(3, len(facets))
    rows = -(-len(facets) // columns)
    canvas = MplFigure(figsize=(5.4 * columns, 4.0 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(canvas.subplots(rows, columns, squeeze=False)).ravel()
    painter = {"series": _series, "final": _final, "loglog": _final, "tradeoff": _tradeoff}[figure.kind]
    cut = False
    for ax, facet in zip(axes, facets):
        here = data[data["facet"] == facet]
        painter(ax, replace(figure, y=facet) if figure.panels else figure, here, hues, palette)
        if figure.panels:
            ax.set_title(_label(facet), fontsize=10)
        elif figure.facet:
            ax.set_title(f"{figure.facet} = {facet}", fontsize=10)
        if figure.baseline:
            ax.axhline(0.0, color="0.4", linewidth=0.8)
            ax.set_ylabel(f"{ax.get_ylabel()}\nminus {figure.baseline} (paired)")
        if figure.logy:
            ax.set_yscale("log")
        if figure.logx:
            ax.set_xscale("log")
        cut |= _floor_at_zero(ax, figure, here)
        if len(hues) > 1 or figure.kind in ("tradeoff", "loglog"):
            ax.legend(fontsize=8, title=figure.hue if figure.hue and figure.hue != "variant" else None,
                      title_fontsize=8)
    for ax in axes[len(facets):]:
        ax.set_visible(False)
    title = figure.title or study.title or study.name
    note = f"mean and {CONFIDENCE:.0%} Student-t interval over {trials} trial(s)"
    if "unfinished" in data.columns:  # counted once: in the first panel (the others repeat the trials)
        unfinished = int(data.loc[data["facet"] == facets[0], "unfinished"].sum())
        if unfinished:
            note += f"; {unfinished} trial(s) unfinished at the horizon"
    if cut:
        note += "; intervals cut at 0 where no trial value is negative"
    width = 75 * columns  # characters that fit above the panels
    lines = [*textwrap.wrap(title, width), *textwrap.wrap(note, width)]
    canvas.suptitle("\n".join(lines), fontsize=10)
    return canvas


def _floor_at_zero(ax: Any, figure: Figure, data: pd.DataFrame) -> bool:
    """Start a linear axis at 0 when no trial value on it is negative (a t interval of a few trials
    of a count or a regret can reach below 0, a value no trial can have); True if an interval was cut."""
    cut = False
    axes = [("y", "y_min" if figure.kind == "tradeoff" else "min", figure.logy or bool(figure.baseline))]
    if figure.kind == "tradeoff":
        axes.append(("x", "x_min", figure.logx))
    for which, column, skip in axes:
        values = data[column].to_numpy(dtype=float) if column in data.columns else np.array([np.nan])
        if skip or not len(values) or np.isnan(values).any() or values.min() < 0:
            continue
        if which == "y" and ax.get_ylim()[0] < 0:
            ax.set_ylim(bottom=0)
            cut = True
        elif which == "x" and ax.get_xlim()[0] < 0:
            ax.set_xlim(left=0)
            cut = True
    return cut


def _legend(hue: str, here: pd.DataFrame) -> str:
    label = hue if hue != NONE else "mean"
    if "unfinished" in here.columns and here["unfinished"].sum():
        label += f" ({int(here['unfinished'].sum())} unfinished trial(s))"
    return label


def _series(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], palette: dict) -> None:
    for hue in hues:
        curve = data[data["hue"] == hue].sort_values("time")
        if curve.empty:
            continue
        ax.plot(curve["time"], curve["mean"], color=palette[hue], label=_legend(hue, curve))
        ax.fill_between(curve["time"], curve["lo"], curve["hi"], color=palette[hue], alpha=0.2, linewidth=0)
    ax.set_xlabel(_label("time"))
    ax.set_ylabel(_label(figure.y))


def _final(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], palette: dict) -> None:
    reference = data["x"].isna()
    drawn, lines = data[~reference], data[reference]
    numeric = _numeric(drawn["x"]) if len(drawn) else True
    categories = list(dict.fromkeys(drawn["x"].astype(str))) if not numeric else []
    width = 0.8 / max(len(hues), 1)
    for index, hue in enumerate(hues):
        points = drawn[drawn["hue"] == hue]
        for _, line in lines[lines["hue"] == hue].iterrows():
            ax.axhline(line["mean"], color=palette[hue], linestyle=":", linewidth=1.2,
                       label=f"{_legend(hue, lines[lines['hue'] == hue])} (reference, no grid)")
            ax.axhspan(line["lo"], line["hi"], color=palette[hue], alpha=0.12, linewidth=0)
        if points.empty:
            continue
        if numeric:
            xs = points["x"].to_numpy(dtype=float)
        else:
            xs = np.array([categories.index(str(v)) for v in points["x"]], dtype=float)
            xs += (index - (len(hues) - 1) / 2) * width
        label = _legend(hue, points)
        if figure.kind == "loglog" and np.isfinite(points["slope"].iloc[0]):
            label += f", slope {points['slope'].iloc[0]:.2f}"
        means = points["mean"].to_numpy(dtype=float)
        error = np.vstack([means - points["lo"].to_numpy(dtype=float), points["hi"].to_numpy(dtype=float) - means])
        ax.errorbar(xs, means, yerr=error, color=palette[hue], marker="o", markersize=4, capsize=3,
                    linestyle="-" if numeric else "none", label=label)
    if not numeric:
        ax.set_xticks(range(len(categories)), categories, rotation=30 if len(categories) > 4 else 0,
                      ha="right" if len(categories) > 4 else "center")
    ax.set_xlabel(_label(figure.x))
    ax.set_ylabel(_label(figure.y))


def _tradeoff(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], palette: dict) -> None:
    for hue in hues:
        points = data[data["hue"] == hue]
        if points.empty:
            continue
        xerr = np.vstack([points["x_mean"] - points["x_lo"], points["x_hi"] - points["x_mean"]])
        yerr = np.vstack([points["y_mean"] - points["y_lo"], points["y_hi"] - points["y_mean"]])
        ax.errorbar(points["x_mean"], points["y_mean"], xerr=xerr, yerr=yerr, color=palette[hue], marker="o",
                    markersize=5, capsize=2, linestyle="-" if len(points) > 1 else "none", linewidth=0.8,
                    label=_legend(hue, points))  # a variant's grid points joined in grid order
        if len(data) <= 12:  # beyond that, labels would hide the points: the CSV has them
            for _, point in points.iterrows():
                # the legend names the variant: a point is annotated with what else tells it apart
                text = point["detail"] if figure.hue == "variant" else point["label"]
                if text:
                    ax.annotate(text, (point["x_mean"], point["y_mean"]), textcoords="offset points",
                                xytext=(4, 4), fontsize=7).set_in_layout(False)
    front = data[data["pareto"]].sort_values("x_mean")
    if len(front):
        ax.step(front["x_mean"], front["y_mean"], where="post", color="0.3", linestyle="--", linewidth=1,
                label="Pareto front (lower is better)")
        ax.scatter(front["x_mean"], front["y_mean"], s=90, facecolors="none", edgecolors="0.2", linewidths=1)
    ax.set_xlabel(_label(figure.x))
    ax.set_ylabel(_label(figure.y))


# ---------------------------------------------------------------------- files
def render(canvas: MplFigure, fmt: str) -> bytes:
    """``canvas`` as PNG or SVG bytes (the SVG without a date, so a redraw gives the same bytes)."""
    buffer = io.BytesIO()
    options: dict[str, Any] = {"metadata": {"Date": None}} if fmt == "svg" else {"dpi": 110}
    canvas.savefig(buffer, format=fmt, **options)
    return buffer.getvalue()


def write_figures(folder: Path, study: Study, tables: Mapping[str, pd.DataFrame], trials: int) -> list[Path]:
    """Draw every figure of ``study`` into ``folder/figures``: NAME.csv, NAME.png, NAME.svg."""
    from netsim.plots import style

    written = []
    for figure in study.figures:
        data = figure_data(figure, tables)
        with style():
            canvas = draw(figure, data, study, trials)
            files = {"csv": data.to_csv(index=False, lineterminator="\n").encode(),
                     "png": render(canvas, "png"), "svg": render(canvas, "svg")}
        for ext, content in files.items():
            written.append(write(folder, f"figures/{figure.name}.{ext}", content, where=f"figure {figure.name!r}"))
    return written
