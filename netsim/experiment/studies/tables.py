"""The tidy tables of a study: ``study.csv`` (one row per unit), ``study_agents.csv``,
``study_timeseries.csv`` (the summary is :meth:`netsim.Results.summary`).

Every table starts with ``study``, ``variant``, one column per parameter (grid keys, then the
scenario keys the figures use) and ``point`` (the index of the variant-and-grid-point), followed
by the run tables' own columns (``scenario``, ``protocol``, ``trial``, ... in ``study.csv``).
Rows are in plan order: variant, grid point, trial. Parameter columns are named by their dotted
scenario keys, as in the study file (``network.agents``); :class:`netsim.Results` names them for
pandas (``network_agents``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from netsim.engine.sim import TrialResult
from netsim.experiment import results as R
from netsim.experiment.studies.plan import StudyPlan
from netsim.experiment.sweeps.tables import cell

#: the headline metrics of the summary (with any figure metric added)
HEADLINE = ("group_regret", "comm_cost", "messages_sent")


def _cell(value: Any) -> Any:
    """A parameter's table cell (empty, i.e. NaN, for a variant that does not run on the grid)."""
    return float("nan") if value is None else cell(value)


def front(plan: StudyPlan) -> list[str]:
    """The leading columns of every study table."""
    return ["study", "variant", *plan.study.parameters(), "point"]


def tables(plan: StudyPlan, results: Mapping[str, TrialResult]) -> dict[str, pd.DataFrame]:
    """``study``, ``study_agents`` and ``study_timeseries`` in their file layout."""
    units = plan.units()
    keys = plan.study.parameters()
    out = {}
    for name, build in (("study", R.trials_table), ("study_agents", R.agents_table),
                        ("study_timeseries", R.series_table)):
        frames = []
        for unit in units:
            frame = build([results[unit.id]]).reset_index(drop=True)
            lead = {"study": plan.study.name, "variant": unit.point.variant,
                    **{key: _cell(unit.point.params[key]) for key in keys}, "point": unit.point.index}
            frames.append(pd.concat([pd.DataFrame({k: [v] * len(frame) for k, v in lead.items()}), frame], axis=1))
        combined = pd.concat(frames, ignore_index=True)
        if name == "study":
            fixed = front(plan) + list(R.TRIAL_COLUMNS)
            extras = sorted(c for c in combined.columns if c not in fixed)
            for column in extras:
                if column.startswith("sent_"):
                    combined[column] = combined[column].fillna(0).astype(np.int64)
            combined = combined[fixed + extras]
        out[name] = combined.reset_index(drop=True)
    return out


def report_table(summary: pd.DataFrame) -> pd.DataFrame:
    """:meth:`netsim.Results.summary` as ``report.html`` shows it: one row per variant and grid point
    with ``variant``, the parameters by their dotted keys, ``protocol``, ``trials``, ``unfinished``,
    ``failed``, then per metric its mean, ``METRIC ±`` (the half-width of the 95 % interval) and,
    where some trial that did not fail had no value, ``METRIC n``."""
    params = summary.attrs.get("params", {})
    metrics = list(dict.fromkeys(summary["metric"]))
    rows = []
    for start in range(0, len(summary), len(metrics)):  # the summary lists every metric of a point in turn
        block = summary.iloc[start:start + len(metrics)]
        first = block.iloc[0]
        row = {"variant": first["variant"], **{key: first[column] for column, key in params.items()},
               **{c: first[c] for c in ("protocol", "trials", "unfinished", "failed")}}
        for _, line in block.iterrows():
            row[line["metric"]] = line["mean"]
            row[f"{line['metric']} ±"] = (line["hi"] - line["lo"]) / 2
            row[f"{line['metric']} n"] = line["n"]
        rows.append(row)
    table = pd.DataFrame(rows)
    for metric in metrics:  # an n column is shown only where some trial had no value
        column = f"{metric} n"
        if (table[column] == table["trials"] - table["failed"]).all():
            table = table.drop(columns=column)
    return table
