"""CSV-backed bandit: rewards resampled from observed (agent, arm, reward) rows.

The file has a header with the columns named by ``agent_column``, ``arm_column`` and
``reward_column``. Agent and arm labels are sorted and numbered from 0. A pull of arm k by
agent i returns a reward drawn uniformly (with replacement) from the rows of (i, k); the true
means are the empirical means of those rows, and regret is measured against their average
over agents (heterogeneous setting). A pull of n > 1 draws n - 1 further row indices from the
agent's reward stream.
"""

from __future__ import annotations

import csv
import functools
import io
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from netsim.bandits.base import BanditEnvironment, bandits
from netsim.engine import files
from netsim.engine import params as P
from netsim.engine.errors import InputError
from netsim.engine.streams import Streams


def read_table(path: Path, agent_column: str, arm_column: str, reward_column: str) -> tuple[list, list, dict]:
    """Rows of the CSV grouped by (agent label, arm label) → array of rewards (read once per file version).

    Every problem is one :class:`~netsim.engine.errors.InputError` naming the file, the line and the column, never
    quoting the file's contents (``file`` may name any file the user can read).
    """
    info = os.stat(path) if os.path.isfile(path) else None
    stamp = (info.st_mtime_ns, info.st_size) if info else None
    return _read_table(str(path), stamp, agent_column, arm_column, reward_column)


@functools.lru_cache(maxsize=4)
def _read_table(path: str, stamp: tuple[int, int] | None, agent_column: str, arm_column: str,
                reward_column: str) -> tuple[list, list, dict]:
    text = files.read_text(path, what="data file", key="bandit.file")
    name = P.bounded_repr(Path(path).name)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, [])
        columns = [agent_column, arm_column, reward_column]
        missing = [c for c in columns if c not in header]
        if missing:
            raise InputError(f"data file {name} has no column(s) {missing} in its header line; accepted: a CSV "
                             "file whose first line names bandit.agent_column, arm_column and reward_column",
                             key="bandit.file")
        at = [header.index(c) for c in columns]
        groups: dict[tuple[str, str], list[float]] = {}
        for row in reader:
            if not row:
                continue
            line = reader.line_num
            if len(row) != len(header):
                raise InputError(f"line {line} of data file {name} has {len(row)} field(s), its header "
                                 f"{len(header)}; accepted: one field per header column", key="bandit.file")
            agent, arm, value = (row[i] for i in at)
            try:
                reward = float(value)
            except ValueError:
                reward = math.nan
            if not math.isfinite(reward):
                raise InputError(f"line {line} of data file {name}: column {reward_column!r} is not a finite number; "
                                 "accepted: a finite number in every row", key="bandit.file")
            groups.setdefault((agent, arm), []).append(reward)
    except csv.Error:
        raise InputError(f"line {reader.line_num} of data file {name} is not CSV (a NUL byte, an unclosed quote "
                         "or a field over 128 kB); accepted: a CSV file", key="bandit.file") from None
    if not groups:
        raise InputError(f"data file {name} has no data rows; accepted: a CSV file with a row per observation",
                         key="bandit.file")
    agents = sorted({a for a, _ in groups})
    arms = sorted({k for _, k in groups})
    return agents, arms, {key: np.array(v) for key, v in groups.items()}


@bandits.register("csv")
class TabularBandit(BanditEnvironment):
    """Rewards bootstrapped from a table of observations, one group per (agent, arm)."""

    kind = "csv"
    description = "rewards resampled from a CSV of (agent, arm, reward) rows"
    fields = {
        "file": P.text(doc="CSV path, relative to the scenario file", label="data file"),
        "agent_column": P.text("agent", doc="column naming the agent", label="agent column"),
        "arm_column": P.text("arm", doc="column naming the arm", label="arm column"),
        "reward_column": P.text("reward", doc="column holding the reward", label="reward column"),
    }

    @classmethod
    def check_agents(cls, options: Mapping[str, Any], num_agents: int, source: str | None = None) -> None:
        """Read and check the whole file now, before any trial (``netsim show`` too): it must parse, hold
        finite rewards, ``num_agents`` agents and rows for every (agent, arm) pair."""
        try:
            agents, arms, groups = cls._load(options, num_agents)
            if len(agents) != num_agents:
                raise InputError(f"data file {P.bounded_repr(Path(options['file']).name)} has {len(agents)} agent(s) "
                                 f"but network.agents = {num_agents}; accepted: network.agents = {len(agents)}",
                                 key="network.agents")
            empty = [(i, k) for i, a in enumerate(agents) for k, b in enumerate(arms) if (a, b) not in groups]
            if empty:
                raise InputError(f"data file {P.bounded_repr(Path(options['file']).name)} has no row for agent "
                                 f"number {empty[0][0]} and arm number {empty[0][1]} (labels in sorted order); "
                                 "accepted: rows for every (agent, arm) pair", key="bandit.file")
        except InputError as exc:
            raise exc.located(source) if source else exc from None

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        super().__init__(options, num_agents, streams)
        agents, arms, groups = self._load(options, num_agents)
        self.agent_labels, self.arm_labels = agents, arms
        self._samples = [[groups[(a, k)] for k in arms] for a in agents]
        self.local_means = np.array([[s.mean() for s in row] for row in self._samples])
        # the same rows laid end to end, for single pulls drawn as one array operation
        groups_in_order = [s for row in self._samples for s in row]
        self._lengths = np.array([len(s) for s in groups_in_order], dtype=np.int64).reshape(len(agents), len(arms))
        self._starts = np.cumsum(self._lengths).reshape(self._lengths.shape) - self._lengths
        self._rows = np.concatenate(groups_in_order) if groups_in_order else np.zeros(0)

    @classmethod
    def _load(cls, options: Mapping[str, Any], num_agents: int) -> tuple[list, list, dict]:
        """(agent labels, arm labels, {(agent, arm): rewards}); subclasses read other layouts."""
        return read_table(Path(options["file"]), options["agent_column"], options["arm_column"],
                          options["reward_column"])

    def _rewards(self, agents, arms, n, u):
        if len(agents) and not np.count_nonzero(n != 1):  # one row each, at quantile u: no Python loop
            lengths = self._lengths[agents, arms]
            return self._rows[self._starts[agents, arms] + np.minimum((u * lengths).astype(np.int64), lengths - 1)]
        out = np.zeros(len(agents))
        for j, (agent, arm, count) in enumerate(zip(agents, arms, n, strict=False)):
            rows = self._samples[agent][arm]
            if count == 0:
                continue
            first = rows[min(int(u[j] * len(rows)), len(rows) - 1)]
            more = rows[self._generators[agent].integers(len(rows), size=count - 1)].sum() if count > 1 else 0.0
            out[j] = first + more
        return out

    def summary(self) -> dict[str, Any]:
        return {**super().summary(), "agent_labels": self.agent_labels, "arm_labels": self.arm_labels}
