"""A study's figures: the data each one plots (:func:`figure_data`), drawn by :func:`draw`.

Each figure is written three times into ``OUT/figures/``: ``NAME.csv`` (exactly the numbers it
plots: one row per curve point, bar or trade-off point, with its mean, 95 % interval and counts),
``NAME.png`` and ``NAME.svg``. Tests read the CSV and the matplotlib axes, not the pixels.

What a figure pools: rows that differ only in columns the figure does not name (not ``x``,
``hue`` or ``facet``) are pooled into one mean. Failed trials are left out (and counted).
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

from netsim import results as R
from netsim.studies.spec import Figure, Study
from netsim.studies.stats import CONFIDENCE, pareto, slope, summarise

LABELS = {"group_regret": "group pseudo-regret", "mean_agent_regret": "per-agent pseudo-regret",
          "comm_cost": "communication cost C(t) (li2022 Eq. 2)", "messages_sent": "messages sent",
          "sample_complexity": "sample complexity (rounds)", "time": "time (slots)"}
NONE = "(all)"  # the label of a figure's single group when it has no hue or no facet


def _label(column: str) -> str:
    return LABELS.get(column, column)


def _numeric(values: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)


def _selected(figure: Figure, frame: pd.DataFrame, failed: set[tuple[int, int]]) -> pd.DataFrame:
    """The rows a figure draws: its variants, without failed trials; hue and facet as columns."""
    rows = frame[frame["variant"].isin(figure.variants)] if figure.variants else frame
    if failed:
        keep = [(p, t) not in failed for p, t in zip(rows["point"], rows["trial"])]
        rows = rows[keep]
    rows = rows.assign(_hue=rows[figure.hue].astype(str) if figure.hue else NONE,
                       _facet=rows[figure.facet].astype(str) if figure.facet else NONE)
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
    failed = set(zip(trials.loc[trials["status"] == "failed", "point"], trials.loc[trials["status"] == "failed",
                                                                                 "trial"]))
    if figure.kind == "series":
        rows = _selected(figure, tables["study_timeseries"], failed)
        data = summarise(rows, ["_facet", "_hue", "time"], figure.y)
        return data.rename(columns={"_facet": "facet", "_hue": "hue"})
    all_rows = _selected(figure, trials, set())
    rows = all_rows[all_rows["status"] != "failed"]
    if figure.kind == "tradeoff":
        by = ["_facet", "_hue", "point"]
        xs = summarise(rows, by, figure.x, "x_")
        ys = summarise(rows, by, figure.y, "y_")
        data = xs.merge(ys, on=by)
        points = all_rows.drop_duplicates("point").set_index("point")
        data.insert(3, "label", [_point_label(points, p) for p in data["point"]])
        data["pareto"] = False
        for facet in data["_facet"].unique():
            here = data["_facet"] == facet
            data.loc[here, "pareto"] = pareto(data.loc[here, "x_mean"], data.loc[here, "y_mean"])
        data = data.merge(_counts(all_rows, by), on=by)
        return data.rename(columns={"_facet": "facet", "_hue": "hue"})
    by = ["_facet", "_hue", figure.x]
    data = summarise(rows, by, figure.y).merge(_counts(all_rows, by), on=by, how="left")
    data[["unfinished", "failed"]] = data[["unfinished", "failed"]].fillna(0).astype(int)
    if _numeric(data[figure.x]):
        data = data.sort_values(["_facet", "_hue", figure.x], kind="stable")
    if figure.kind == "loglog":
        data["slope"] = np.nan
        for (facet, hue), group in data.groupby(["_facet", "_hue"], sort=False):
            here = (data["_facet"] == facet) & (data["_hue"] == hue)
            data.loc[here, "slope"] = slope(group[figure.x], group["mean"])
    return data.rename(columns={"_facet": "facet", "_hue": "hue", figure.x: "x"}).reset_index(drop=True)


def _point_label(points: pd.DataFrame, point: int) -> str:
    """A trade-off point's label: its variant, and the parameters that vary between that variant's points."""
    columns = list(points.columns)
    params = columns[columns.index("variant") + 1: columns.index("point")] if "point" in columns else \
        columns[columns.index("variant") + 1: columns.index("scenario")]
    row = points.loc[point]
    same = points[points["variant"] == row["variant"]]
    varying = [f"{key}={row[key]}" for key in params if same[key].nunique() > 1]
    return f"{row['variant']} ({', '.join(varying)})" if varying else str(row["variant"])


# ---------------------------------------------------------------------- drawing
def draw(figure: Figure, data: pd.DataFrame, study: Study, trials: int) -> MplFigure:
    """The matplotlib figure of ``figure`` from its :func:`figure_data` (one panel per facet)."""
    import seaborn as sns

    facets = list(dict.fromkeys(data["facet"])) or [NONE]
    hues = list(dict.fromkeys(data["hue"])) or [NONE]
    colours = dict(zip(hues, sns.color_palette("colorblind", max(len(hues), 1))))
    columns = min(3, len(facets))
    rows = -(-len(facets) // columns)
    canvas = MplFigure(figsize=(5.4 * columns, 4.0 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(canvas.subplots(rows, columns, squeeze=False)).ravel()
    for ax, facet in zip(axes, facets):
        here = data[data["facet"] == facet]
        painter = {"series": _series, "final": _final, "loglog": _final, "tradeoff": _tradeoff}[figure.kind]
        painter(ax, replace(figure, y=facet) if figure.panels else figure, here, hues, colours)
        if figure.panels:
            ax.set_title(_label(facet), fontsize=10)
        elif figure.facet:
            ax.set_title(f"{figure.facet} = {facet}", fontsize=10)
        if figure.logy:
            ax.set_yscale("log")
        if figure.logx:
            ax.set_xscale("log")
        if len(hues) > 1 or figure.kind in ("tradeoff", "loglog"):
            ax.legend(fontsize=8, title=figure.hue if figure.hue and figure.hue != "variant" else None,
                      title_fontsize=8)
    for ax in axes[len(facets):]:
        ax.set_visible(False)
    title = figure.title or study.title or study.name
    canvas.suptitle(f"{title}\nmean and {CONFIDENCE:.0%} Student-t interval over {trials} trial(s)", fontsize=10)
    return canvas


def _legend(hue: str, here: pd.DataFrame) -> str:
    label = hue if hue != NONE else "mean"
    if "unfinished" in here.columns and here["unfinished"].sum():
        label += f" ({int(here['unfinished'].sum())} unfinished trial(s))"
    return label


def _series(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], colours: dict) -> None:
    for hue in hues:
        curve = data[data["hue"] == hue].sort_values("time")
        if curve.empty:
            continue
        ax.plot(curve["time"], curve["mean"], color=colours[hue], label=_legend(hue, curve))
        ax.fill_between(curve["time"], curve["lo"], curve["hi"], color=colours[hue], alpha=0.2, linewidth=0)
    ax.set_xlabel(_label("time"))
    ax.set_ylabel(_label(figure.y))


def _final(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], colours: dict) -> None:
    numeric = _numeric(data["x"]) if len(data) else True
    categories = list(dict.fromkeys(data["x"].astype(str))) if not numeric else []
    width = 0.8 / max(len(hues), 1)
    for index, hue in enumerate(hues):
        points = data[data["hue"] == hue]
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
        ax.errorbar(xs, means, yerr=error, color=colours[hue], marker="o", markersize=4, capsize=3,
                    linestyle="-" if numeric else "none", label=label)
    if not numeric:
        ax.set_xticks(range(len(categories)), categories, rotation=30 if len(categories) > 4 else 0,
                      ha="right" if len(categories) > 4 else "center")
    ax.set_xlabel(_label(figure.x))
    ax.set_ylabel(_label(figure.y))


def _tradeoff(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], colours: dict) -> None:
    for hue in hues:
        points = data[data["hue"] == hue]
        if points.empty:
            continue
        xerr = np.vstack([points["x_mean"] - points["x_lo"], points["x_hi"] - points["x_mean"]])
        yerr = np.vstack([points["y_mean"] - points["y_lo"], points["y_hi"] - points["y_mean"]])
        ax.errorbar(points["x_mean"], points["y_mean"], xerr=xerr, yerr=yerr, color=colours[hue], marker="o",
                    markersize=5, capsize=2, linestyle="none", label=_legend(hue, points))
        if len(data) <= 12:  # beyond that, labels would hide the points: the CSV has them
            for _, point in points.iterrows():
                ax.annotate(point["label"], (point["x_mean"], point["y_mean"]), textcoords="offset points",
                            xytext=(4, 4), fontsize=7)
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

    out = folder / "figures"
    written = []
    for figure in study.figures:
        data = figure_data(figure, tables)
        with style():
            canvas = draw(figure, data, study, trials)
            files = {"csv": data.to_csv(index=False, lineterminator="\n").encode(),
                     "png": render(canvas, "png"), "svg": render(canvas, "svg")}
        for ext, content in files.items():
            path = out / f"{figure.name}.{ext}"
            R.atomic_write(path, content)
            written.append(path)
    return written
