"""HDP-MAB (li2022 Alg. 5) with sink agents (Alg. 4) and SAC collection inside components.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

import numpy as np

from netsim.comm import params as P
from netsim.comm import register_protocol, rewriting
from protocols.li2022.elimination import COMMON_FIELDS, Elimination
from protocols.li2022.epochs import pooled_mean
from protocols.li2022.gis import Flood
from protocols.li2022.sac import SinkTree, sink_agents
from protocols.li2022.uploads import Uploads, lie_about_record


@register_protocol
class HDPMAB(Elimination):
    """Alg. 5 with sink agents (Alg. 4) and SAC collection inside components."""

    name = "hdp-mab"
    relays = True  # SAC tree hops forward the records of the agents below
    columns = {**Elimination.columns,
               "sink_t_delay": P.column("sink collection time", "slots",
                                        doc="mean slots the sinks took to collect their component")}
    description = "hybrid private elimination: sink agents collect, the server aggregates (li2022 Alg. 4-5)"
    servers = 1
    corruptible = ("hdp-upload", "sac-data", "sac-hop")  # a component mean; records inside a component
    fields: ClassVar[Mapping[str, P.Field]] = {
        **COMMON_FIELDS,
        "sac_routing": P.choice(("flood", "tree"), "flood",
                                doc="SAC inside a component: handshake flood until the sink holds all, or a "
                                    "shortest-path tree to the sink", label="SAC routing"),
        "global_mean": P.choice(("components", "agents"), "components",
                                doc="server average: over components (Alg. 5 line 14) or weighted by M_q",
                                label="server average"),
    }

    def setup(self) -> None:
        net = self.sim.network
        self.server = self.sim.num_agents
        self.components = [list(c) for c in net.components]
        self.sinks, self.sink_delays, self.sink_delay = sink_agents(net.agent_graph, self.components)  # Alg. 4
        self._sink_of = {s: q for q, s in enumerate(self.sinks)}
        self.uploads = Uploads(self.sim, "hdp", timer=self.timer, up=self.up, on_complete=self._collected)
        if self.params["sac_routing"] == "flood":
            self.sac = Flood(self.sim, "sac", timer=self.timer, up=self.up, on_group=self._sink_ready)
        else:
            self.sac = SinkTree(self.sim, "sac", graph=net.agent_graph, groups=self.components, sinks=self.sinks,
                                timer=self.timer, up=self.up, on_group=self._sink_ready)
        # the kinds of this run: the uploads, and the records of the chosen SAC routing
        self.corruptible = (self.uploads.kind, "sac-data" if isinstance(self.sac, Flood) else "sac-hop")
        if net.adversary is not None:
            net.corruptible(self.uploads.kind, lie_about_record)
            if isinstance(self.sac, Flood):
                net.corruptible(self.sac.data_kind, rewriting(self.sac.rewrite_data))
            else:
                self.sac.corruptible(rewriting(SinkTree.rewrite_hop))

    def communicate(self) -> None:
        participants = self.up_agents()
        self.uploads.begin([s for s in self.sinks if participants[s]], self.server)  # a down sink: no upload
        self._collected_at_sink = [False] * len(self.components)
        self._records = self.state.private.copy()
        self._counts = self.state.counts.copy()
        if isinstance(self.sac, Flood):
            self.sac.begin(self._records, self._counts, participants, self.components, self.sinks)
        else:
            self.sac.begin(self._records, participants)

    def comm_tick(self, now: float) -> None:
        self.sac.tick(now)

    def retransmissions(self) -> int:
        return self.uploads.retries + (self.sac.handshake.retries if isinstance(self.sac, Flood) else self.sac.retries)

    def agent_crashed(self, agent: int) -> None:
        self.sac.crashed(agent)
        if agent in self._sink_of:
            self.uploads.drop(agent)

    def agent_restarted(self, agent: int, state: str) -> None:
        self.sac.restarted(agent, state)
        if state == "lost":
            self.uploads.agent_lost(agent)

    def server_restarted(self, state: str) -> None:
        self.uploads.server_restarted(state)

    def _sink_ready(self, q: int) -> None:
        """Lines 9-10: the sink of component q averages the records it holds and uploads the mean."""
        if self._collected_at_sink[q]:
            return
        self._collected_at_sink[q] = True
        sink, members = self.sinks[q], self.components[q]
        if isinstance(self.sac, Flood):
            keys = self.sac.held(sink, members)
            values = self.sac.view(sink, keys)[0]  # the sink's copies (forged ones if a liar reached it)
        else:
            keys, values = self.sac.records_at_sink(q)
        counts = self._counts[keys]
        keep = counts > 0
        if keep.any():  # the component's pooled mean, its total samples and number of records
            record = (pooled_mean(values[keep], counts[keep]), int(counts[keep].sum()), int(keep.sum()))
        else:
            record = (None, 0, 0)
        self.uploads.send(sink, record)

    def _collected(self, records: dict[int, tuple]) -> None:
        """Lines 14-15 at the server over the components whose sink uploaded records."""
        got = [records[s] for s in self.sinks if s in records and records[s][1] > 0]
        if not got:
            self.finish_round(None, total=0, records=0)
            return
        stacked = np.array([g[0] for g in got])
        if self.params["global_mean"] == "components":
            aggregate = stacked.mean(axis=0)  # line 14
        else:  # weighted by the records of each component (M_q without crashes)
            sizes = np.array([g[2] for g in got], dtype=float)
            aggregate = (sizes[:, None] * stacked).sum(axis=0) / sizes.sum()
        self.finish_round(aggregate, total=sum(g[1] for g in got), records=sum(g[2] for g in got))

    def results(self) -> dict[str, float]:
        out = super().results()
        out["sink_t_delay"] = float(self.sink_delay)
        return out
