"""Tidy result tables and their files: trials, agents, time series, timings, meta.

Every file is written to a temporary name in the output folder and renamed into place, so a
reader (or an interrupted run) sees either the complete file or none.

``trials.csv`` holds the contract columns in a fixed order, then protocol extras and
per-kind message counts (``sent_<KIND>``) sorted by name. Wall-clock times are kept out of
the CSV tables (they are in ``timings.csv``) so that the same seed gives byte-identical
tables for any number of jobs.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from netsim.engine import files
from netsim.engine.errors import InputError
from netsim.engine.scenario import Scenario
from netsim.engine.sim import TrialResult

if TYPE_CHECKING:
    import pandas as pd
else:
    class _Pandas:
        """pandas (~0.4 CPU s to import), loaded when a table is first built rather than when netsim starts."""

        def __getattr__(self, name: str) -> Any:
            import pandas

            return getattr(pandas, name)

    pd = _Pandas()

TRIAL_COLUMNS = [
    "scenario", "protocol", "trial", "seed", "agents", "horizon", "end_time", "group_regret",
    "mean_agent_regret", "links_agent_agent", "links_server_agent", "comm_cost", "messages_sent",
    "messages_delivered", "messages_dropped", "messages_corrupted", "messages_in_flight", "rounds", "status",
    "failure",
]
AGENT_COLUMNS = ["trial", "agent", "regret", "pulls", "messages_sent", "messages_received", "links"]
SERIES_COLUMNS = ["trial", "time", "group_regret", "mean_agent_regret", "comm_cost"]
FORMATS = ("csv", "parquet")


def trials_table(results: Sequence[TrialResult]) -> pd.DataFrame:
    """One row per trial, contract columns first."""
    frame = pd.DataFrame([r.row for r in results])
    extras = sorted(c for c in frame.columns if c not in TRIAL_COLUMNS)
    for column in extras:
        if column.startswith("sent_"):
            frame[column] = frame[column].fillna(0).astype(np.int64)
    return frame[TRIAL_COLUMNS + extras].sort_values("trial", kind="stable").reset_index(drop=True)


def agents_table(results: Sequence[TrialResult]) -> pd.DataFrame:
    """One row per trial and agent."""
    frames = [pd.DataFrame({"trial": r.row["trial"], **r.agents}) for r in results]
    return pd.concat(frames, ignore_index=True)[AGENT_COLUMNS].sort_values(["trial", "agent"], kind="stable")


def series_table(results: Sequence[TrialResult]) -> pd.DataFrame:
    """Regret and cost at the checkpoints of every trial."""
    frames = [pd.DataFrame({"trial": r.row["trial"], **r.timeseries}) for r in results]
    return pd.concat(frames, ignore_index=True)[SERIES_COLUMNS].sort_values(["trial", "time"], kind="stable")


def timings_table(results: Sequence[TrialResult]) -> pd.DataFrame:
    return pd.DataFrame({"trial": [r.row["trial"] for r in results], "wall_s": [r.wall_s for r in results]})


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to the file ``path`` the user named (a regular file or none, replaced atomically;
    :func:`netsim.engine.files.write` with ``path``'s folder as the output folder)."""
    files.write(path.parent, path.name, data, record=False)


def _table_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    if fmt == "csv":
        return frame.to_csv(index=False, lineterminator="\n").encode()
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for package in ("netsim", "numpy", "scipy", "simpy", "networkx", "pandas", "seaborn"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "unknown"
    return out


def git_revision() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        return done.stdout.strip() or None if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def run_tables(results: Sequence[TrialResult]) -> dict[str, pd.DataFrame]:
    """The tables of a run: ``trials``, ``agents``, ``timeseries`` and ``timings``."""
    return {"trials": trials_table(results), "agents": agents_table(results), "timeseries": series_table(results),
            "timings": timings_table(results)}


def run_meta(scenario: Scenario, results: Sequence[TrialResult], *, started: str = "", finished: str = "",
             argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The ``meta.json`` of a run as plain JSON data (what reading the file back gives)."""
    meta = {
        "scenario": scenario.as_dict(),
        "scenario_file": scenario.path,
        "seed": scenario.run["seed"],
        "trials": len(results),
        "versions": versions(),
        "git_revision": git_revision(),
        "command": list(argv if argv is not None else sys.argv),
        "started": started,
        "finished": finished,
        "instances": [r.info for r in results],
    }
    return json.loads(json.dumps(meta, default=_json_default))


def file_contents(tables: dict[str, pd.DataFrame], meta: dict[str, Any], fmt: str = "csv") -> dict[str, bytes]:
    """File name → bytes: each table as ``NAME.csv`` (or ``.parquet``), and ``meta.json``."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: accepted: {', '.join(FORMATS)}")
    contents = {f"{name}.{fmt}": _table_bytes(frame, fmt) for name, frame in tables.items()}
    contents["meta.json"] = json.dumps(meta, indent=2, default=_json_default).encode()
    return contents


def write_results(
    out: Path, scenario: Scenario, results: Sequence[TrialResult], *, fmt: str = "csv",
    started: str = "", finished: str = "", argv: Sequence[str] | None = None,
) -> dict[str, Path]:
    """Write every result file of a run into ``out`` as one unit; return name → path.

    All files are first rendered to temporary files; they are then renamed into place with
    Ctrl-C held back, so an interruption leaves either the complete new set or the old files
    (:func:`netsim.engine.files.write_together`).
    """
    meta = run_meta(scenario, results, started=started, finished=finished, argv=argv)
    return files.write_together(out, file_contents(run_tables(results), meta, fmt))


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def read_table(folder: Path, name: str) -> pd.DataFrame:
    """Read ``name`` (without extension) from a results folder, CSV or Parquet (a table that does not parse
    is one InputError naming it; a missing one is FileNotFoundError)."""
    import io

    for fmt, reader in (("csv", pd.read_csv), ("parquet", pd.read_parquet)):
        path = folder / f"{name}.{fmt}"
        if path.is_file():
            data = files.read_bytes(path, what="results table")
            try:
                return reader(io.BytesIO(data))
            except (ValueError, OSError) as exc:  # pandas' and pyarrow's parse errors are ValueErrors
                raise InputError(f"results table {str(path)!r} does not parse as {fmt} ({type(exc).__name__}); "
                                 "accepted: a table written by netsim") from None
    raise FileNotFoundError(folder / f"{name}.csv")


def status_line(frame: pd.DataFrame) -> str:
    """``"trials: 3 (2 ok, 1 unfinished: <reason>)"``: how the trials of a trials table ended."""
    counts = frame["status"].value_counts()
    parts = [f"{counts[s]} {s}" for s in ("ok", "unfinished", "failed") if s in counts]
    reasons = sorted(set(frame.loc[frame["status"] != "ok", "failure"]))
    text = f"trials: {len(frame)} ({', '.join(parts)})"
    if reasons:
        shown = "; ".join(reasons[:3]) + (f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")
        text += f"; not ok: {shown}"
    return text


def stamp() -> str:
    """The local time, as ``meta.json`` records ``started`` and ``finished``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


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
