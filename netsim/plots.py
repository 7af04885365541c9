"""Figures of a results folder: regret (mean with min-max band over trials) and communication."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from netsim.results import atomic_write, read_table  # noqa: E402


def _band_plot(series: pd.DataFrame, column: str, ylabel: str, title: str) -> bytes:
    import io

    sns.set_theme(style="whitegrid", context="notebook")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    # errorbar=("pi", 100): the band spans the 0th to 100th percentile, i.e. min to max over trials.
    sns.lineplot(data=series, x="time", y=column, errorbar=("pi", 100), ax=ax, label="mean over trials")
    ax.set_xlabel("time (slots)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", fontsize=8, title="band: min-max", title_fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    plt.close(fig)
    return buffer.getvalue()


def plot_folder(folder: Path, title: str | None = None) -> list[Path]:
    """(Re)draw ``regret.png`` and, when any link was built, ``communication.png`` in ``folder``."""
    series = read_table(folder, "timeseries")
    title = title or folder.name
    written = []
    path = folder / "regret.png"
    atomic_write(path, _band_plot(series, "group_regret", "group pseudo-regret", title))
    written.append(path)
    if series["comm_cost"].max() > 0:
        path = folder / "communication.png"
        atomic_write(path, _band_plot(series, "comm_cost", "communication cost C(t) (li2022 Eq. 2)", title))
        written.append(path)
    return written
