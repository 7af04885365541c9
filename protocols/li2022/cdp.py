"""CDP-MAB (li2022 Alg. 1 with the communication constraints p and R of Sec. IV-B).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from netsim.comm import params as P
from netsim.comm import register_protocol
from protocols.li2022.elimination import COMMON_FIELDS, Elimination
from protocols.li2022.uploads import Uploads, lie_about_record


@register_protocol
class CDPMAB(Elimination):
    """Alg. 1 with the communication constraints of Sec. IV-B."""

    name = "cdp-mab"
    description = "centralized private elimination with a server (li2022 Alg. 1, p and R of Sec. IV-B)"
    servers = 1
    agent_links = False
    requires_connected = False
    corruptible = ("cdp-upload",)  # an upload carries ybar_i (and n_i)
    fields: ClassVar[Mapping[str, P.Field]] = {
        **COMMON_FIELDS,
        "participation": P.real(1.0, low=0.0, high=1.0, low_open=True,
                                doc="participation rate p: N = ceil(pM) random agents upload per round (Sec. IV-B)",
                                label="participation rate p", unit=""),
    }

    def participants(self) -> int:
        return max(1, math.ceil(self.params["participation"] * self.sim.num_agents - 1e-9))

    def setup(self) -> None:
        self.server = self.sim.num_agents
        self.server_rng = self.sim.streams.for_("protocol", self.server)
        self.uploads = Uploads(self.sim, "cdp", timer=self.timer, up=self.up, on_complete=self._collected)
        if self.sim.network.adversary is not None:
            self.sim.network.corruptible(self.uploads.kind, lie_about_record)

    def communicate(self) -> None:
        n = self.participants()
        if n < self.num_agents:
            senders = np.sort(self.server_rng.choice(self.num_agents, n, replace=False))
        else:
            senders = self.agents
        up = self.up
        senders = [int(a) for a in senders if up[a]]  # a crashed agent is not waited for (Faults)
        self.uploads.begin(senders, self.server)
        for agent in senders:  # line 11: ybar_i with its sample count n_i
            self.uploads.send(agent, (self.state.private[agent].copy(), int(self.state.counts[agent])))

    def agent_crashed(self, agent: int) -> None:
        self.uploads.drop(agent)

    def agent_restarted(self, agent: int, state: str) -> None:
        if state == "lost":
            self.uploads.agent_lost(agent)

    def server_restarted(self, state: str) -> None:
        self.uploads.server_restarted(state)

    def retransmissions(self) -> int:
        return self.uploads.retries

    def _collected(self, records: dict[int, tuple[np.ndarray, int]]) -> None:
        agents = sorted(records)
        self.finish_pooled(np.array([records[a][0] for a in agents]),
                           np.array([records[a][1] for a in agents], dtype=np.int64))  # line 12
