"""The figures of a sweep: one faceted figure per grid key."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netsim.engine import files
from netsim.experiment.sweeps.grid import toml_value
from netsim.experiment.sweeps.tables import cell


def _label(value: Any) -> str:
    if isinstance(value, np.generic):  # a cell read back by pandas
        value = value.item()
    return value if isinstance(value, str) else toml_value(value)


def _safe(key: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in key)


def plot_folder(folder: Path) -> list[Path]:
    """Redraw the figures of a folder written by ``netsim sweep`` (its meta.json and sweep_timeseries)."""
    from netsim.experiment.results import read_meta, read_table

    meta = read_meta(folder)
    keys = list(meta["sweep"]["grid"])
    points = [{key: point[key] for key in keys} for point in meta["points"]]
    series = read_table(folder, "sweep_timeseries")
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

    from netsim.experiment.plots import png, style

    frame = series.copy()
    labels = {}
    for key in keys:
        frame[key] = [_label(v) for v in frame[key]]
        labels[key] = list(dict.fromkeys(_label(cell(p[key])) for p in points))
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
            written.append(files.write(out, f"{stem}_by_{_safe(key)}.png", data))
    return written
