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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from netsim import params as P
from netsim.bandits.base import BanditEnvironment
from netsim.errors import InputError
from netsim.registry import bandits
from netsim.streams import Streams


def read_table(path: Path, agent_column: str, arm_column: str, reward_column: str) -> tuple[list, list, dict]:
    """Rows of the CSV grouped by (agent label, arm label) → array of rewards."""
    if not path.is_file():
        raise InputError(f"data file {str(path)!r} not found; accepted: an existing CSV file", key="bandit.file")
    groups: dict[tuple[str, str], list[float]] = {}
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        missing = {agent_column, arm_column, reward_column} - set(reader.fieldnames or [])
        if missing:
            raise InputError(f"{path.name} lacks column(s) {sorted(missing)}; found {reader.fieldnames}",
                             key="bandit.file")
        for line, row in enumerate(reader, 2):
            try:
                reward = float(row[reward_column])
            except ValueError:
                raise InputError(f"line {line} of {path.name}: reward {row[reward_column]!r} is not a number",
                                 key="bandit.file") from None
            groups.setdefault((row[agent_column], row[arm_column]), []).append(reward)
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
    def check(cls, options: Mapping[str, Any], source: str | None = None) -> None:
        if not Path(options["file"]).is_file():
            raise InputError(f"data file {options['file']!r} not found; accepted: an existing CSV file",
                             source=source, key="bandit.file")

    def __init__(self, options: Mapping[str, Any], num_agents: int, streams: Streams):
        super().__init__(options, num_agents, streams)
        agents, arms, groups = self._load(options, num_agents)
        if len(agents) != num_agents:
            raise InputError(f"{options['file']} has {len(agents)} agents but network.agents = {num_agents}",
                             key="network.agents")
        self.agent_labels, self.arm_labels = agents, arms
        self._samples = [[groups.get((a, k), np.zeros(0)) for k in arms] for a in agents]
        empty = [(a, k) for a in agents for k in arms if (a, k) not in groups]
        if empty:
            raise InputError(f"no rows for agent {empty[0][0]!r}, arm {empty[0][1]!r}; every pair needs data",
                             key="bandit.file")
        self.local_means = np.array([[s.mean() for s in row] for row in self._samples])

    def _load(self, options: Mapping[str, Any], num_agents: int) -> tuple[list, list, dict]:
        """(agent labels, arm labels, {(agent, arm): rewards}); subclasses read other layouts."""
        return read_table(Path(options["file"]), options["agent_column"], options["arm_column"],
                          options["reward_column"])

    def _rewards(self, agents, arms, n, u):
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
