"""HDP-MAB (li2022 Alg. 5) with sink agents (Alg. 4) and SAC collection inside components.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from netsim import params as P
from netsim.registry import register_protocol
from protocols.li2022.elimination import COMMON_FIELDS, Elimination
from protocols.li2022.gis import Flood
from protocols.li2022.sac import SinkTree, sink_agents
from protocols.li2022.uploads import Uploads


@register_protocol
class HDPMAB(Elimination):
    """Alg. 5 with sink agents (Alg. 4) and SAC collection inside components."""

    name = "hdp-mab"
    description = "hybrid private elimination: sink agents collect, the server aggregates (li2022 Alg. 4-5)"
    servers = 1
    fields: ClassVar[Mapping[str, P.Field]] = {
        **COMMON_FIELDS,
        "sac_routing": P.choice(("flood", "tree"), "flood",
                                doc="SAC inside a component: handshake flood until the sink holds all, or a "
                                    "shortest-path tree to the sink"),
        "global_mean": P.choice(("components", "agents"), "components",
                                doc="server average: over components (Alg. 5 line 14) or weighted by M_q"),
    }

    def setup(self) -> None:
        net = self.sim.network
        self.server = self.sim.num_agents
        self.components = [list(c) for c in net.components]
        self.sinks, self.sink_delays, self.sink_delay = sink_agents(net.agent_graph, self.components)  # Alg. 4
        self.uploads = Uploads(net, "hdp", reliable=self.reliable, timeout=self.timeout, on_complete=self._collected)
        if self.params["sac_routing"] == "flood":
            self.sac = Flood(net, "sac", reliable=self.reliable, timeout=self.timeout, on_group=self._sink_ready)
        else:
            self.sac = SinkTree(net, "sac", graph=net.agent_graph, groups=self.components, sinks=self.sinks,
                                reliable=self.reliable, timeout=self.timeout, on_group=self._sink_ready)

    def communicate(self) -> None:
        self.uploads.begin(self.sinks, self.server)
        self._collected_at_sink = [False] * len(self.components)
        records = self.state.private.copy()
        if isinstance(self.sac, Flood):
            self.sac.begin(records, self.components, self.sinks)
        else:
            self.sac.begin(records)

    def comm_tick(self, now: float) -> None:
        self.sac.tick(now)
        self.uploads.tick(now)

    def _sink_ready(self, q: int) -> None:
        """Lines 9-10: the sink of component q averages its M_q records and uploads the mean."""
        if self._collected_at_sink[q]:
            return
        self._collected_at_sink[q] = True
        sink, members = self.sinks[q], self.components[q]
        if isinstance(self.sac, Flood):
            records = self.sac.received[sink, members]
        else:
            records = self.sac.records_at_sink(q)
        self.uploads.send(sink, records.mean(axis=0))

    def _collected(self, records: dict[int, np.ndarray]) -> None:
        sizes = np.array([len(c) for c in self.components], dtype=float)
        stacked = np.array([records[s] for s in self.sinks])
        if self.params["global_mean"] == "components":
            aggregate = stacked.mean(axis=0)  # line 14
        else:
            aggregate = (sizes[:, None] * stacked).sum(axis=0) / sizes.sum()
        self.finish_round(aggregate)

    def results(self) -> dict[str, float]:
        out = super().results()
        out["sink_t_delay"] = float(self.sink_delay)
        return out
