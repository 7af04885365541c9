"""The combined tables of a sweep (``sweep.csv``, ``sweep_agents.csv``, ``sweep_timeseries.csv``),
and its ``meta.json`` (its summary is :meth:`netsim.Results.summary`).

The tables are rebuilt from the store once every unit is there, so a table never holds a
partial row or a unit twice: the per-run tables with one column per grid key and a ``point``
index in front.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from netsim.engine import files
from netsim.engine.sim import TrialResult
from netsim.experiment import results as R
from netsim.experiment.sweeps.execute import Outcome
from netsim.experiment.sweeps.grid import toml_value
from netsim.experiment.sweeps.plan import Plan
from netsim.experiment.sweeps.store import plain_default


def cell(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else toml_value(value)


def tables(plan_: Plan, results: Mapping[str, TrialResult]) -> dict[str, pd.DataFrame]:
    """``sweep``, ``sweep_agents`` and ``sweep_timeseries``: grid columns, ``point``, then the run tables."""
    keys = plan_.keys
    units = plan_.units()
    ordered = [results[u.id] for u in units]
    out = {}
    for name, build in (("sweep", R.trials_table), ("sweep_agents", R.agents_table),
                        ("sweep_timeseries", R.series_table)):
        frames = []
        for unit, result in zip(units, ordered):
            frame = build([result]).reset_index(drop=True)
            front = pd.DataFrame({key: [cell(unit.point.assignments[key])] * len(frame) for key in keys})
            front["point"] = unit.point.index
            frames.append(pd.concat([front, frame], axis=1))
        combined = pd.concat(frames, ignore_index=True)
        if name == "sweep":
            fixed = keys + ["point"] + [c for c in R.TRIAL_COLUMNS]
            extras = sorted(c for c in combined.columns if c not in fixed)
            for column in extras:
                if column.startswith("sent_"):
                    combined[column] = combined[column].fillna(0).astype(np.int64)
            combined = combined[fixed + extras]
        out[name] = combined.reset_index(drop=True)
    return out


def write_tables(out: Path, frames: Mapping[str, pd.DataFrame]) -> list[Path]:
    written = []
    for name, frame in frames.items():
        written.append(files.write(out, f"{name}.csv", frame.to_csv(index=False, lineterminator="\n").encode()))
    return written


def meta(plan_: Plan, outcome: Outcome, *, argv: Sequence[str], started: str, finished: str,
         executor: str) -> dict[str, Any]:
    """The ``meta.json`` of a sweep as plain JSON data (what reading the file back gives)."""
    data = {
        "sweep": plan_.describe(),
        "points": [{"point": p.index, **{k: v for k, v in p.assignments.items()}, "seed_key": list(p.key)}
                   for p in plan_.points],
        "units": outcome.total, "units_reused": outcome.reused, "units_run": outcome.ran,
        "executor": executor, "versions": R.versions(), "git_revision": R.git_revision(),
        "command": list(argv), "started": started, "finished": finished,
    }
    return json.loads(json.dumps(data, default=plain_default))
