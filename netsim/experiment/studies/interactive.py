"""The interactive figures of ``report.html``: each study figure as a Plotly figure (plain JSON).

Built from exactly the numbers the static figure plots (:func:`netsim.experiment.studies.figures.figure_data`),
with the same labels, units, colours, markers and oracle marks. Every point's hover shows its mean,
its 95 % interval and n; every curve of one hue shares a legend group, so a click on its legend entry
hides it in every panel; Plotly's own zoom, pan and reset work as usual. The page embeds Plotly's
JavaScript once (the ``plotly`` package ships it), so it works offline.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from netsim.experiment.studies.figures import NONE, _label, _name, order, point_texts, styles
from netsim.experiment.studies.spec import Figure, Study
from netsim.experiment.studies.stats import CONFIDENCE

SYMBOLS = {"o": "circle", "s": "square", "^": "triangle-up", "D": "diamond", "v": "triangle-down", "P": "cross",
           "X": "x", "*": "star"}
DASH = {"-": "solid", "--": "dash", "-.": "dashdot", ":": "dot"}
HOVER = ("<b>%{fullData.name}</b><br>%{meta}: %{x}<br>mean %{y:.4g}<br>" + f"{CONFIDENCE:.0%}" +
         " interval [%{customdata[0]:.4g}, %{customdata[1]:.4g}]<br>n = %{customdata[2]}<extra></extra>")


def plotly_js() -> str:
    """Plotly's JavaScript bundle, as the ``plotly`` package ships it (nothing is fetched)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _plain(value: Any) -> Any:
    """JSON-ready: NaN and infinities become null, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _column(frame: pd.DataFrame, name: str) -> list[Any]:
    return frame[name].tolist()


def spec(figure: Figure, data: pd.DataFrame, study: Study) -> dict[str, Any]:
    """The Plotly figure (``{"data": [...], "layout": {...}}``) of one study figure."""
    facets = (list(figure.metrics) if figure.panels else order(figure.facet, study, data["facet"])) or [NONE]
    hues = order(figure.hue, study, data["hue"]) if figure.hue else [NONE]
    look = styles(figure, study, hues)
    columns = min(3, len(facets))
    rows = -(-len(facets) // columns)
    traces: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"grid": {"rows": rows, "columns": columns, "pattern": "independent"},
                              "height": 380 * rows + 60, "margin": {"t": 40, "b": 60}, "hovermode": "closest",
                              "legend": {"groupclick": "togglegroup"}, "annotations": []}
    seen: set[str] = set()
    for index, facet in enumerate(facets):
        axis = "" if index == 0 else str(index + 1)
        here = data[data["facet"] == facet]
        y = facet if figure.panels else figure.y
        for hue in hues:
            part = here[here["hue"] == hue]
            if part.empty:
                continue
            style = look[hue]
            name = _name(hue, figure) if hue != NONE else "mean"
            base = {"name": name, "legendgroup": hue, "showlegend": hue not in seen, "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}"}
            seen.add(hue)
            line = {"color": style["color"], "dash": DASH.get(style["linestyle"], "solid")}
            marker = {"color": "white" if style["oracle"] else style["color"], "symbol": SYMBOLS[style["marker"]],
                      "size": 8, "line": {"color": style["color"], "width": 1.5}}
            traces += _traces(figure, part, base, line, marker)
        _axes(layout, axis, figure, y, facet, index, columns)
    if len(data) and figure.kind == "tradeoff":
        for index, facet in enumerate(facets):
            front = data[(data["facet"] == facet) & data["pareto"]].sort_values("x_mean")
            if len(front):
                axis = "" if index == 0 else str(index + 1)
                traces.append({"type": "scatter", "mode": "lines", "x": _column(front, "x_mean"),
                               "y": _column(front, "y_mean"), "line": {"shape": "hv", "dash": "dash", "color": "#555"},
                               "name": "Pareto front (lower is better)", "legendgroup": "pareto",
                               "showlegend": index == 0, "hoverinfo": "skip", "xaxis": f"x{axis}", "yaxis": f"y{axis}"})
    return _plain({"data": traces, "layout": layout})


def _traces(figure: Figure, part: pd.DataFrame, base: dict, line: dict, marker: dict) -> list[dict[str, Any]]:
    if figure.kind == "series":
        part = part.sort_values("time")
        custom = part[["lo", "hi", "n"]].to_numpy().tolist()
        band = {**base, "showlegend": False, "hoverinfo": "skip", "line": {"width": 0}, "mode": "lines",
                "type": "scatter", "x": _column(part, "time")}
        return [{**band, "y": _column(part, "hi")},
                {**band, "y": _column(part, "lo"), "fill": "tonexty", "fillcolor": _alpha(line["color"], 0.15)},
                {**base, "type": "scatter", "mode": "lines", "x": _column(part, "time"), "y": _column(part, "mean"),
                 "line": line, "customdata": custom, "meta": _label("time"), "hovertemplate": HOVER}]
    if figure.kind == "tradeoff":
        custom = part[["y_lo", "y_hi", "y_n", "x_lo", "x_hi"]].to_numpy().tolist()
        hover = ("<b>%{fullData.name}</b> %{text}<br>" + _label(figure.y) + ": mean %{y:.4g}, "
                 f"{CONFIDENCE:.0%} interval " + "[%{customdata[0]:.4g}, %{customdata[1]:.4g}]<br>" + _label(figure.x) +
                 ": mean %{x:.4g}, interval [%{customdata[3]:.4g}, %{customdata[4]:.4g}]<br>n = %{customdata[2]}"
                 "<extra></extra>")
        return [{**base, "type": "scatter", "mode": "lines+markers+text" if len(part) <= 12 else "lines+markers",
                 "x": _column(part, "x_mean"), "y": _column(part, "y_mean"), "text": point_texts(part)[0],
                 "textposition": "top right", "textfont": {"size": 10},
                 "error_x": _bars(part, "x_"), "error_y": _bars(part, "y_"), "line": {**line, "width": 1},
                 "marker": marker, "customdata": custom, "hovertemplate": hover}]
    reference = part["x"].isna()
    out = []
    custom = part.loc[~reference, ["lo", "hi", "n"]].to_numpy().tolist()
    drawn = part[~reference]
    if len(drawn):
        xs = drawn["x"].tolist() if pd.api.types.is_numeric_dtype(drawn["x"]) else drawn["x"].astype(str).tolist()
        out.append({**base, "type": "scatter", "mode": "lines+markers", "x": xs, "y": _column(drawn, "mean"),
                    "error_y": _bars(drawn, ""), "line": line, "marker": marker, "customdata": custom,
                    "meta": _label(figure.x), "hovertemplate": HOVER})
    for _, row in part[reference].iterrows():  # a reference off the grid: a dotted line across the panel
        out.append({**base, "name": f"{base['name']} (reference, no grid)", "type": "scatter", "mode": "lines",
                    "x": [part["x"].min(), part["x"].max()] if len(drawn) else [0, 1],
                    "y": [row["mean"], row["mean"]], "line": {**line, "dash": "dot"},
                    "customdata": [[row["lo"], row["hi"], row["n"]]] * 2, "meta": _label(figure.x),
                    "hovertemplate": HOVER})
    return out


def _bars(part: pd.DataFrame, prefix: str) -> dict[str, Any]:
    mean = part[f"{prefix}mean"].to_numpy(dtype=float)
    return {"type": "data", "symmetric": False, "array": (part[f"{prefix}hi"].to_numpy(dtype=float) - mean).tolist(),
            "arrayminus": (mean - part[f"{prefix}lo"].to_numpy(dtype=float)).tolist(), "thickness": 1.2, "width": 3}


def _alpha(colour: str, alpha: float) -> str:
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _axes(layout: dict, axis: str, figure: Figure, y: str, facet: str, index: int, columns: int) -> None:
    xaxis = {"title": {"text": _label(figure.x)}, "type": "log" if figure.logx else "-", "zeroline": False}
    ytitle = _label(y) + (f" minus {figure.baseline} (paired)" if figure.baseline else "")
    yaxis = {"title": {"text": ytitle}, "type": "log" if figure.logy else "-"}
    layout[f"xaxis{axis}"], layout[f"yaxis{axis}"] = xaxis, yaxis
    title = _label(facet) if figure.panels else (f"{_label(figure.facet)} = {facet}" if figure.facet else "")
    if title:
        layout["annotations"].append({"text": title, "showarrow": False, "xref": f"x{axis} domain",
                                      "yref": f"y{axis} domain", "x": 0.5, "y": 1.08, "font": {"size": 12}})


def script(element: str, figure: dict[str, Any]) -> str:
    """The JavaScript that draws ``figure`` into the element of id ``element``."""
    payload = json.dumps(figure, allow_nan=False).replace("</", "<\\/")
    config = json.dumps({"responsive": True, "displaylogo": False, "scrollZoom": False})
    return (f"(function () {{ var f = {payload}; "
            f"Plotly.newPlot({json.dumps(element)}, f.data, f.layout, {config}); }})();")
