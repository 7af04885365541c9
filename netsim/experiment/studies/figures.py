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

from netsim.engine.files import write
from netsim.experiment.studies.spec import Figure, Study
from netsim.experiment.studies.stats import CONFIDENCE, overlapping, pareto, slope, summarise

NONE = "(all)"  # the label of a figure's single group when it has no hue or no facet
#: Okabe & Ito's colour-blind-safe palette, ordered so that any two of the first four and any two
#: neighbours stay far apart (CIELAB distance >= 25) under normal, deutan, protan and tritan vision
#: (Machado et al. 2009 simulation); yellow, faint on white, comes last. Past eight hues the
#: colours repeat with another marker and line style.
PALETTE = ("#0072B2", "#E69F00", "#56B4E9", "#000000", "#CC79A7", "#D55E00", "#009E73", "#F0E442")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES = ("-", "--", "-.", ":")
ORACLE = " (oracle)"


def _label(column: str) -> str:
    """An axis title: the column's label and unit (netsim.experiment.catalog), never a raw dotted key."""
    from netsim.experiment.catalog import title

    return title(column)


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
        data = _overlaps(summarise(rows, ["_facet", "_hue", "time"], figure.y), ["_facet", "time"], figure)
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
        data["oracle"] = [v in figure.oracles for v in variants]
        data["pareto"] = False
        data["overlaps"] = ""
        for facet in data["_facet"].unique():
            here = (data["_facet"] == facet) & ~data["oracle"]  # an oracle is drawn, never on the front
            data.loc[here, "pareto"] = pareto(data.loc[here, "x_mean"], data.loc[here, "y_mean"])
            panel = data[data["_facet"] == facet]
            on_x = overlapping(list(panel["label"]), panel["x_lo"], panel["x_hi"], panel["x_n"])
            on_y = overlapping(list(panel["label"]), panel["y_lo"], panel["y_hi"], panel["y_n"])
            data.loc[panel.index, "overlaps"] = ["; ".join(a for a in x if a in y) for x, y in zip(on_x, on_y)]
        data = data.merge(_counts(all_rows, by), on=by)
        return data.rename(columns={"_facet": "facet", "_hue": "hue"})
    by = ["_facet", "_hue", figure.x]
    data = summarise(rows, by, figure.y).merge(_counts(all_rows, by), on=by, how="left")
    data[["unfinished", "failed"]] = data[["unfinished", "failed"]].fillna(0).astype(int)
    if _numeric(data[figure.x]):  # ascending x within each curve, curves kept in their order
        data["_order"] = data.groupby(["_facet", "_hue"], sort=False).ngroup()
        data = data.sort_values(["_order", figure.x], kind="stable").drop(columns="_order")
    data = _overlaps(data, ["_facet", figure.x], figure)
    if figure.kind == "loglog":
        data["slope"] = np.nan
        for (facet, hue), group in data.groupby(["_facet", "_hue"], sort=False):
            here = (data["_facet"] == facet) & (data["_hue"] == hue)
            data.loc[here, "slope"] = slope(group[figure.x], group["mean"])
    return data.rename(columns={"_facet": "facet", "_hue": "hue", figure.x: "x"}).reset_index(drop=True)


def _overlaps(data: pd.DataFrame, at: list[str], figure: Figure) -> pd.DataFrame:
    """``data`` with ``overlaps``: the hues whose interval overlaps this row's at the same ``at`` values
    (and ``0`` for a paired difference whose interval holds 0), joined by ``; `` (empty: separated)."""
    data = data.copy()
    data["overlaps"] = ""
    for _, group in data.groupby(at, sort=False, dropna=False):
        hits = overlapping(list(group["_hue"]), group["lo"], group["hi"], group["n"], zero=bool(figure.baseline))
        data.loc[group.index, "overlaps"] = ["; ".join(h) for h in hits]
    return data


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


def _every_hue(figure: Figure, study: Study, hues: Sequence[str]) -> list[str]:
    """Every value the hue column of ``figure`` can take in ``study``, in the study's order."""
    if figure.hue == "variant":
        every = [v.name for v in study.variants]
    elif figure.hue in study.grid:
        every = [_text(v) for v in study.grid[figure.hue]]
    else:
        every = []
    return every + [h for h in hues if h not in every]


def colours(figure: Figure, study: Study, hues: Sequence[str]) -> dict[str, Any]:
    """One colour per hue value, the same in every figure of the study (by the study's order)."""
    return {hue: PALETTE[i % len(PALETTE)] for i, hue in enumerate(_every_hue(figure, study, hues))}


def styles(figure: Figure, study: Study, hues: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Colour, marker and line style per hue value: past the palette's eight colours, a repeated
    colour comes with another marker and line style, so no two curves look alike; an oracle is dashed."""
    out = {}
    for i, hue in enumerate(_every_hue(figure, study, hues)):
        turn = i // len(PALETTE)
        oracle = hue in figure.oracles
        out[hue] = {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[(i + turn) % len(MARKERS)],
                    "linestyle": "--" if oracle else DASHES[turn % len(DASHES)], "oracle": oracle}
    return out


def _name(hue: str, figure: Figure) -> str:
    return hue + (ORACLE if hue in figure.oracles else "")


def draw(figure: Figure, data: pd.DataFrame, study: Study, trials: int, scale: str = "") -> MplFigure:
    """The matplotlib figure of ``figure`` from its :func:`figure_data` (one panel per facet).

    Every axis and legend title is a label with its unit (:func:`netsim.experiment.catalog.title`); legends
    sit outside the panels, so no point or curve is under one; a point whose 95 % interval overlaps
    another curve's at the same x is drawn hollow, and the subtitle states the trials per point,
    what is not separated, and the figure's note for ``scale`` (a study's ``note`` table)."""
    facets = (list(figure.metrics) if figure.panels else order(figure.facet, study, data["facet"])) or [NONE]
    hues = order(figure.hue, study, data["hue"]) if figure.hue else [NONE]
    look = styles(figure, study, hues)
    columns = min(3, len(facets))
    rows = -(-len(facets) // columns)
    canvas = MplFigure(figsize=(5.6 * columns + 2.2, 4.0 * rows + 0.9), layout="constrained")
    axes = np.atleast_1d(canvas.subplots(rows, columns, squeeze=False)).ravel()
    painter = {"series": _series, "final": _final, "loglog": _final, "tradeoff": _tradeoff}[figure.kind]
    cut = False
    for ax, facet in zip(axes, facets):
        here = data[data["facet"] == facet]
        painter(ax, replace(figure, y=facet) if figure.panels else figure, here, hues, look)
        if figure.panels:
            ax.set_title(_label(facet), fontsize=10)
        elif figure.facet:
            ax.set_title(f"{_label(figure.facet)} = {facet}", fontsize=10)
        if figure.baseline:
            ax.axhline(0.0, color="0.4", linewidth=0.8)
            ax.set_ylabel(f"{ax.get_ylabel()}\nminus {figure.baseline} (paired)")
        if figure.logy:
            ax.set_yscale("log")
        if figure.logx:
            ax.set_xscale("log")
        cut |= _floor_at_zero(ax, figure, here)
        if len(hues) > 1 or figure.kind in ("tradeoff", "loglog"):
            title = _label(figure.hue) if figure.hue and figure.hue != "variant" else None
            meaning = point_texts(here)[1] if figure.kind == "tradeoff" else ""
            if meaning:
                title = (f"{title}\n" if title else "") + f"point labels: {meaning}"
            ax.legend(fontsize=8, title=title, title_fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                      borderaxespad=0.0, frameon=False)
    for ax in axes[len(facets):]:
        ax.set_visible(False)
    title = figure.title or study.title or study.name
    counts = data["y_n" if figure.kind == "tradeoff" else "n"].dropna()
    n = f"{int(counts.min())}" if len(counts) and counts.min() == counts.max() else (
        f"{int(counts.min())} to {int(counts.max())}" if len(counts) else str(trials))
    note = f"mean and {CONFIDENCE:.0%} Student-t interval; n = {n} trials per point (of {trials})"
    if "unfinished" in data.columns:  # counted once: in the first panel (the others repeat the trials)
        unfinished = int(data.loc[data["facet"] == facets[0], "unfinished"].sum())
        if unfinished:
            note += f"; {unfinished} trial(s) unfinished at the horizon"
    if cut:
        note += "; intervals cut at 0 where no trial value is negative"
    lines = [title, note]
    if any(h in figure.oracles for h in hues):
        lines.append("(oracle): a reference no real network reaches (e.g. rewards pooled at once, without delay or "
                     "loss)" + ("; kept off the Pareto front" if figure.kind == "tradeoff" else ""))
    apart = not_separated(figure, data)
    if apart:
        lines.append(apart)
        if len(counts) and 2 <= counts.min() <= 5:  # the one-line reason few trials give
            from netsim.experiment.studies.stats import t_quantile

            low = int(counts.min())
            lines.append(f"with n = {low} the 95 % interval is mean ± {t_quantile(low - 1):.1f} standard errors: "
                         "more trials (--trials, --scale paper) or a paired difference (baseline) may separate them")
    if scale and figure.notes.get(scale):
        lines.append(f"{scale} scale: {figure.notes[scale]}")
    width = 80 * columns + 30  # characters that fit above the panels
    canvas.suptitle("\n".join(line for text in lines for line in textwrap.wrap(text, width)), fontsize=9)
    if figure.kind == "tradeoff":  # placed once the layout is final (the labels stay out of it)
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        FigureCanvasAgg(canvas)
        canvas.draw_without_rendering()
        canvas.set_layout_engine("none")
        for ax, facet in zip(axes, facets):
            here = data[data["facet"] == facet]
            label_points(ax, here.assign(_text=point_texts(here)[0]))
    return canvas


def not_separated(figure: Figure, data: pd.DataFrame) -> str:
    """One line on what the figure cannot tell apart (empty when every comparison is separated)."""
    if figure.kind == "tradeoff":
        texts = point_texts(data)[0]
        shown = {label: f"{hue} ({text})" if text else hue
                 for label, hue, text in zip(data["label"], data["hue"], texts)}  # no dotted key on a figure
        pairs = {tuple(sorted((shown[row["label"]], shown.get(other, other)))) for _, row in data.iterrows()
                 for other in str(row["overlaps"]).split("; ") if other}
        if not pairs:
            return ""
        return (f"hollow: intervals overlap on both axes ({len(pairs)} pair(s) of points not separated, "
                "e.g. " + " ~ ".join(next(iter(sorted(pairs)))) + ")")
    last = data if figure.kind != "series" else data[data["time"] == data["time"].max()]
    pairs = {tuple(sorted((row["hue"], other))) for _, row in last.iterrows()
             for other in str(row["overlaps"]).split("; ") if other and other != "0"}
    zero = sorted({row["hue"] for _, row in last.iterrows() if "0" in str(row["overlaps"]).split("; ")})
    if not pairs and not zero:
        return ""
    where = "at the horizon" if figure.kind == "series" else "at the same x"
    parts = []
    if pairs:
        shown = ", ".join(" ~ ".join(p) for p in sorted(pairs)[:4]) + (", ..." if len(pairs) > 4 else "")
        parts.append(f"intervals overlap {where} (not separated): {shown}")
    if zero:
        parts.append(f"interval holds 0 (not told apart from {figure.baseline}): {', '.join(zero)}")
    return "; ".join(parts) + ("; hollow markers" if figure.kind != "series" else "")


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


def _legend(hue: str, here: pd.DataFrame, figure: Figure) -> str:
    label = _name(hue, figure) if hue != NONE else "mean"
    if "unfinished" in here.columns and here["unfinished"].sum():
        label += f" ({int(here['unfinished'].sum())} unfinished trial(s))"
    return label


def _hollow(row: pd.Series) -> bool:
    return bool(str(row.get("overlaps", "")))


def _points(ax: Any, xs: np.ndarray, ys: np.ndarray, hollow: Sequence[bool], style: dict, size: float) -> None:
    """The hollow markers (white inside) over the points whose interval overlaps another's, never clipped."""
    keep = np.asarray(hollow, dtype=bool)
    if keep.any():
        ax.scatter(np.asarray(xs)[keep], np.asarray(ys)[keep], s=size, marker=style["marker"], facecolors="white",
                   edgecolors=style["color"], linewidths=1.2, zorder=4, clip_on=False)


def _errorbar(ax: Any, xs: Any, ys: Any, style: dict, **options: Any) -> None:
    """Points with their intervals; the markers (filled, white for an oracle) are never clipped, so a
    point on an axis is drawn whole."""
    face = "white" if style["oracle"] else style["color"]
    bars = ax.errorbar(xs, ys, color=style["color"], marker=style["marker"], markersize=6, markerfacecolor=face,
                       **options)
    bars.lines[0].set_clip_on(False)
    bars.lines[0].set_zorder(3)


def _series(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], look: dict) -> None:
    for hue in hues:
        curve = data[data["hue"] == hue].sort_values("time")
        if curve.empty:
            continue
        style = look[hue]
        ax.plot(curve["time"], curve["mean"], color=style["color"], linestyle=style["linestyle"],
                label=_legend(hue, curve, figure))
        ax.fill_between(curve["time"], curve["lo"], curve["hi"], color=style["color"], alpha=0.15, linewidth=0)
        end = curve.iloc[-1:]
        _points(ax, end["time"].to_numpy(), end["mean"].to_numpy(), [_hollow(end.iloc[0])], style, 28)
    ax.set_xlabel(_label("time"))
    ax.set_ylabel(_label(figure.y))


def _final(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], look: dict) -> None:
    reference = data["x"].isna()
    drawn, lines = data[~reference], data[reference]
    numeric = _numeric(drawn["x"]) if len(drawn) else True
    categories = list(dict.fromkeys(drawn["x"].astype(str))) if not numeric else []
    width = 0.8 / max(len(hues), 1)
    for index, hue in enumerate(hues):
        style = look[hue]
        points = drawn[drawn["hue"] == hue]
        for _, line in lines[lines["hue"] == hue].iterrows():
            ax.axhline(line["mean"], color=style["color"], linestyle=":", linewidth=1.2,
                       label=f"{_legend(hue, lines[lines['hue'] == hue], figure)} (reference, no grid)")
            ax.axhspan(line["lo"], line["hi"], color=style["color"], alpha=0.12, linewidth=0)
        if points.empty:
            continue
        if numeric:
            xs = points["x"].to_numpy(dtype=float)
        else:
            xs = np.array([categories.index(str(v)) for v in points["x"]], dtype=float)
            xs += (index - (len(hues) - 1) / 2) * width
        label = _legend(hue, points, figure)
        if figure.kind == "loglog" and np.isfinite(points["slope"].iloc[0]):
            label += f", slope {points['slope'].iloc[0]:.2f}"
        means = points["mean"].to_numpy(dtype=float)
        error = np.vstack([means - points["lo"].to_numpy(dtype=float), points["hi"].to_numpy(dtype=float) - means])
        _errorbar(ax, xs, means, style, yerr=error, capsize=3, linestyle=style["linestyle"] if numeric else "none",
                  label=label)
        _points(ax, xs, means, [_hollow(r) for _, r in points.iterrows()], style, 30)
    if not numeric:
        ax.set_xticks(range(len(categories)), categories, rotation=30 if len(categories) > 4 else 0,
                      ha="right" if len(categories) > 4 else "center")
    ax.set_xlabel(_label(figure.x))
    ax.set_ylabel(_label(figure.y))


def _spread_x(ax: Any, figure: Figure, data: pd.DataFrame) -> None:
    """A trade-off whose costs span more than two decades with a point at 0 (a protocol that never
    sends) gets a symmetric-log x axis: linear up to the smallest positive cost, logarithmic above,
    so that neither the free point nor the costly ones crowd the others."""
    xs = data["x_mean"].to_numpy(dtype=float)
    positive = xs[xs > 0]
    if figure.logx or not len(positive) or not (xs == 0).any() or positive.max() / positive.min() < 100:
        return
    ax.set_xscale("symlog", linthresh=10 ** np.floor(np.log10(positive.min())), linscale=0.5)


def point_texts(data: pd.DataFrame) -> tuple[list[str], str]:
    """The short text written next to each trade-off point (the values of the parameters that tell a
    variant's points apart, ``detail``), and what those values are (their labels and units)."""
    keys: list[str] = []
    texts = []
    for detail in data["detail"].fillna("").astype(str):
        pairs = [part.split("=", 1) for part in detail.split(", ") if "=" in part]
        keys += [k for k, _ in pairs if k not in keys]
        texts.append(", ".join(v for _, v in pairs))
    return texts, ", ".join(_label(k) for k in keys)


def _tradeoff(ax: Any, figure: Figure, data: pd.DataFrame, hues: list[str], look: dict) -> None:
    for hue in hues:
        points = data[data["hue"] == hue]
        if points.empty:
            continue
        style = look[hue]
        xerr = np.vstack([points["x_mean"] - points["x_lo"], points["x_hi"] - points["x_mean"]])
        yerr = np.vstack([points["y_mean"] - points["y_lo"], points["y_hi"] - points["y_mean"]])
        _errorbar(ax, points["x_mean"], points["y_mean"], style, xerr=xerr, yerr=yerr, capsize=2, linewidth=0.8,
                  linestyle=style["linestyle"] if len(points) > 1 else "none",
                  label=_legend(hue, points, figure))  # a variant's grid points joined in grid order
        _points(ax, points["x_mean"].to_numpy(), points["y_mean"].to_numpy(),
                [_hollow(r) for _, r in points.iterrows()], style, 36)
    _spread_x(ax, figure, data)
    front = data[data["pareto"]].sort_values("x_mean")
    if len(front):
        ax.step(front["x_mean"], front["y_mean"], where="post", color="0.3", linestyle="--", linewidth=1,
                label="Pareto front (lower is better)")
        ax.scatter(front["x_mean"], front["y_mean"], s=110, facecolors="none", edgecolors="0.2", linewidths=1,
                   zorder=5, clip_on=False)
    ax.set_xlabel(_label(figure.x))
    ax.set_ylabel(_label(figure.y))


def label_points(ax: Any, data: pd.DataFrame) -> None:
    """Write each point's text beside it, at the first place around it (eight directions, at five
    distances) that covers no other text and no point, in display coordinates; where none is free,
    at the place covering least. Every label is kept."""
    if not data["_text"].astype(bool).any():
        return
    renderer = ax.figure.canvas.get_renderer()
    centres = ax.transData.transform(data[["x_mean", "y_mean"]].to_numpy(dtype=float))
    taken = [(x - 5, y - 5, x + 5, y + 5) for x, y in centres]
    around = [(5, 4), (5, -11), (-5, 4), (-5, -11), (0, 9), (0, -16), (10, -3), (-10, -3)]
    offsets = [(dx * k, dy * k) for k in (1.0, 2.2, 3.6, 5.0, 6.5) for dx, dy in around]
    for (x, y), text in zip(centres, data["_text"]):
        if not text:
            continue
        best, cost = None, np.inf
        for dx, dy in offsets:
            box = _box(ax, text, x + dx, y + dy, dx, renderer)
            covered = sum(_area(box, other) for other in taken)
            if covered < cost:
                best, cost = (dx, dy, box), covered
            if covered == 0:
                break
        dx, dy, box = best
        taken.append(box)
        ax.annotate(text, ax.transData.inverted().transform((x + dx, y + dy)), fontsize=7, color="0.15",
                    ha="left" if dx >= 0 else "right", va="bottom", annotation_clip=False).set_in_layout(False)


def _area(a: tuple, b: tuple) -> float:
    """The area two boxes share."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _box(ax: Any, text: str, x: float, y: float, dx: float, renderer: Any) -> tuple[float, float, float, float]:
    probe = ax.text(0, 0, text, fontsize=7, transform=None)
    extent = probe.get_window_extent(renderer)
    probe.remove()
    w, h = extent.width, extent.height
    left = x if dx >= 0 else x - w
    return (left, y, left + w, y + h)


# ---------------------------------------------------------------------- files
def render(canvas: MplFigure, fmt: str) -> bytes:
    """``canvas`` as PNG or SVG bytes (the SVG without a date, so a redraw gives the same bytes)."""
    buffer = io.BytesIO()
    import matplotlib

    options: dict[str, Any] = {"metadata": {"Date": None}} if fmt == "svg" else {"dpi": 110}
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # SVG text stays text: searchable, editable for a paper
        canvas.savefig(buffer, format=fmt, **options)
    return buffer.getvalue()


def write_figures(folder: Path, study: Study, tables: Mapping[str, pd.DataFrame], trials: int,
                  scale: str = "") -> list[Path]:
    """Draw every figure of ``study`` into ``folder/figures``: NAME.csv, NAME.png, NAME.svg."""
    from netsim.experiment.plots import style

    written = []
    for figure in study.figures:
        data = figure_data(figure, tables)
        with style():
            canvas = draw(figure, data, study, trials, scale)
            files = {"csv": data.to_csv(index=False, lineterminator="\n").encode(),
                     "png": render(canvas, "png"), "svg": render(canvas, "svg")}
        for ext, content in files.items():
            written.append(write(folder, f"figures/{figure.name}.{ext}", content, where=f"figure {figure.name!r}"))
    return written
