"""DDP-MAB (li2022 Alg. 3) with the GIS protocol (Alg. 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from netsim.comm import InputError, register_protocol, rewriting
from netsim.comm import params as P
from protocols.li2022.elimination import COMMON_FIELDS, Elimination
from protocols.li2022.gis import Flood


@register_protocol
class DDPMAB(Elimination):
    """Alg. 3 with the GIS protocol (Alg. 2)."""

    name = "ddp-mab"
    relays = True  # GIS floods every agent's record: agents forward records others created
    description = "decentralized private elimination with GIS ADV/REQ/DATA flooding (li2022 Alg. 2-3)"
    servers = 0
    corruptible = ("gis-data",)  # a DATA carries records (ybar_j, n_j)
    fields: ClassVar[Mapping[str, P.Field]] = dict(COMMON_FIELDS)

    @classmethod
    def check(cls, scenario) -> None:
        super().check(scenario)
        comps = scenario.network["components"]
        if (comps if isinstance(comps, int) else len(comps)) != 1:
            raise InputError("DDP-MAB needs one connected agent graph; accepted: network.components = 1",
                             key="network.components")

    def setup(self) -> None:
        self.flood = Flood(self.sim, "gis", timer=self.timer, up=self.up, on_complete=self._synchronised)
        if self.sim.network.adversary is not None:
            self.sim.network.corruptible(self.flood.data_kind, rewriting(self.flood.rewrite_data))

    def communicate(self) -> None:
        self.flood.begin(self.state.private.copy(), self.state.counts.copy(), self.up_agents(),
                         [list(range(self.num_agents))])

    def comm_tick(self, now: float) -> None:
        self.flood.tick(now)

    def agent_crashed(self, agent: int) -> None:
        self.flood.crashed(agent)

    def agent_restarted(self, agent: int, state: str) -> None:
        self.flood.restarted(agent, state)

    def retransmissions(self) -> int:
        return self.flood.handshake.retries

    def _synchronised(self) -> None:
        """Line 9 at every survivor, over the records every survivor holds (all M without crashes), each
        with its own copies of them: the shared table, unless a corrupted DATA reached it (then
        every agent aggregates what it holds and eliminates by itself, line 10)."""
        common = self.flood.common()
        if not self.flood.forged_anywhere:
            self.finish_pooled(self.flood.table[common], self.flood.counts[common])
            return
        self.finish_agents({i: self.flood.view(i, common) for i in np.flatnonzero(self.flood.survivor).tolist()})
