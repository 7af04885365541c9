"""Figures of a results folder: regret (mean with min-max band over trials) and communication.

Figures are drawn on ``matplotlib.figure.Figure`` objects, not through pyplot, so drawing them
neither needs nor changes a matplotlib backend (a notebook's inline plots keep working), and the
seaborn style is applied only inside :func:`png`.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

from netsim.engine import files
from netsim.experiment.results import read_table


@contextmanager
def style() -> Iterator[None]:
    """The house style (seaborn whitegrid, notebook context), for this block only."""
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook"):
        yield


def png(figure: Figure, dpi: int = 120) -> bytes:
    """PNG bytes of ``figure``."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


class ShownFigure(Figure):
    """A figure that a notebook shows as a PNG (``_repr_png_``) even when no matplotlib backend
    is active (pyplot never imported, no ``%matplotlib inline``); :meth:`Results.plot
    <netsim.experiment.resultset.Results.plot>` returns one."""

    def _repr_png_(self) -> bytes:
        return png(self)


def draw(size: tuple[float, float], paint: Callable[[Figure], None], dpi: int = 120) -> bytes:
    """A new figure of ``size`` inches, painted by ``paint`` in the house style, as PNG bytes."""
    with style():
        figure = Figure(figsize=size)
        paint(figure)
        figure.tight_layout()
        return png(figure, dpi)


def _band_plot(series: pd.DataFrame, column: str, ylabel: str, title: str) -> bytes:
    def paint(figure: Figure) -> None:
        ax = figure.subplots()
        # errorbar=("pi", 100): the band spans the 0th to 100th percentile, i.e. min to max over trials.
        sns.lineplot(data=series, x="time", y=column, errorbar=("pi", 100), ax=ax, label="mean over trials")
        ax.set_xlabel("time (slots)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.legend(loc="upper left", fontsize=8, title="band: min-max", title_fontsize=8)

    return draw((6.4, 4.2), paint)


def write_figures(folder: Path, series: pd.DataFrame, title: str) -> list[Path]:
    """Draw ``regret.png`` and, when any link was built, ``communication.png`` of ``series`` into ``folder``."""
    written = []
    written.append(files.write(folder, "regret.png", _band_plot(series, "group_regret", "group pseudo-regret", title)))
    if series["comm_cost"].max() > 0:
        written.append(files.write(folder, "communication.png",
                                   _band_plot(series, "comm_cost", "communication cost C(t) (li2022 Eq. 2)", title)))
    return written


def plot_folder(folder: Path, title: str | None = None) -> list[Path]:
    """(Re)draw the figures of a results folder from its time-series table (see :func:`write_figures`)."""
    return write_figures(folder, read_table(folder, "timeseries"), title or folder.name)
