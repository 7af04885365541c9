"""Agent -> server uploads of li2022 (CDP-MAB line 11, HDP-MAB line 10); on lossy links the server recalls
the uploads it misses on RFC 6298 timers.

Paper mode (no message can be lost): every selected agent sends its record once; the round completes
when the server holds all of them.

Reliable mode (loss, link outages or crashes, ``docs/protocols/li2022.md``). The server is the one
that waits, and it knows for which uploads and since when: the synchronisation clock of the paper
starts the round (CDP-MAB: every selected agent uploads at the round's start) or sees a sink's
collection end (HDP-MAB: the sink uploads then), for free, as it announces I^(r) (decision 4). So
the *server* runs the retransmission timer, one per (server, agent) pair
(:class:`netsim.comm.exchanges.Exchanges`): the moment the upload is due is an implicit first request;
if the upload has not arrived one RTO later, the server sends a recall (``<prefix>-recall``,
numbered) and backs off; the agent answers every recall with its upload, which echoes the recall's
number (the upload sent by itself echoes 0). Each upload that arrives measures the round trip of
the request it answers, and ends the wait. Uploads are never acknowledged: the end of the round,
which the synchronisation signal announces to everyone, is what tells an agent its upload arrived.
A message lost costs one recall and one upload; an acknowledgement per upload would cost one more
server-agent link per upload (c1) whenever the link delay exceeds a slot.

Crashes (``docs/faults.md``): the server learns of an agent's crash as the paper's synchronisation
clock monitors every agent (Sec. V-A.2) and stops waiting for its upload (:meth:`Uploads.drop`); an
upload that still arrives in the round is used. Uploads sent while the server is down are dropped by
the engine; the down server's timers wait and it recalls what it misses once it is back (so an
outage costs a recall and an upload per missing record, whatever its length). A server that restarts
without its state (``lost``) has forgotten the uploads of the open round: it recalls at once every
sender it had heard from. Duplicates and late copies: an upload carries its round (``tag``); one of
an older round is ignored, a second copy of a sender's upload in the round is not counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netsim.comm import Exchanges, Lie, Message, RetransmitTimer, rewriting


class Uploads:
    """Agent -> server uploads of one record each, recalled by the server on loss.

    ``begin(senders, server)`` opens a collection epoch; ``send(agent, record)`` uploads (the
    record is any payload). With a ``timer`` (reliable mode) the server recalls an upload that has
    not arrived one RTO after it was due (module docstring). ``on_complete(records)`` fires when
    the server, up, holds a record from every sender it still expects (``records``: sender -> record).
    """

    def __init__(self, sim: Any, prefix: str, *, timer: RetransmitTimer | None, up: np.ndarray,
                 on_complete: Callable[[dict[int, Any]], None]):
        self.network = network = sim.network
        self.kind, self.recall_kind = f"{prefix}-upload", f"{prefix}-recall"
        self.reliable = timer is not None
        self.recalls = Exchanges(sim, timer, self._repeat, up=up) if timer is not None else None
        self.up = up
        self.on_complete = on_complete
        self.tag = 0
        self.active = False
        self.server = -1
        self.senders: set[int] = set()
        self.expected: set[int] = set()
        self.got: dict[int, Any] = {}
        self._sent: dict[int, Any] = {}
        self._due: dict[int, int] = {}  # agent -> number of the implicit request of its upload
        network.subscribe_batch(self.kind, self._on_uploads)
        network.subscribe_batch(self.recall_kind, self._on_recalls)

    @property
    def retries(self) -> int:
        """Recalls sent because an upload was overdue."""
        return self.recalls.repeats if self.recalls is not None else 0

    def begin(self, senders: Sequence[int], server: int) -> None:
        self.tag += 1
        self.server = server
        self.senders = {int(s) for s in senders}
        self.expected = set(self.senders)
        self.got = {}
        self._sent = {}
        self._due = {}
        if self.recalls is not None:
            self.recalls.clear()
        self.active = True
        self.complete_at: float | None = None
        self._check()

    def send(self, agent: int, record: Any) -> None:
        """``agent`` uploads ``record`` now (its upload is due now: the server's wait starts)."""
        self._sent[agent] = record
        self.network.send(agent, self.server, self.kind, (self.tag, 0, record))
        if self.recalls is not None and self.active:
            self._due[agent] = self.recalls.transmit(self.server, agent)

    # ------------------------------------------------------------------ crashes
    def drop(self, agent: int) -> None:
        """The server stops waiting for ``agent`` (it crashed before its upload got through)."""
        if self.active and agent in self.expected and agent not in self.got:
            self.expected.discard(agent)
            if self.recalls is not None:
                self.recalls.close(self.server, agent)
            self._check()

    def agent_lost(self, agent: int) -> None:
        """``agent`` restarted without its state: it no longer holds the record it was uploading."""
        self._sent.pop(agent, None)

    def server_restarted(self, state: str) -> None:
        """The server is back; ``lost``: it recalls the uploads it had received in the open round."""
        if not self.active:
            return
        if state == "lost":
            for agent in sorted(self.got):
                self._recall(agent)
            self.got = {}
        self._check()

    # ------------------------------------------------------------------ recalls
    def _recall(self, agent: int) -> None:
        number = self.recalls.transmit(self.server, agent)
        self.network.send(self.server, agent, self.recall_kind, (self.tag, number))

    def _repeat(self, server: int, agent: int) -> bool:
        if not self.active or agent in self.got or agent not in self.expected:
            return False
        self._recall(agent)
        return True

    # ------------------------------------------------------------------ handlers
    def _on_uploads(self, messages: list[Message]) -> None:
        for message in messages:
            tag, answers, record = message.payload
            if tag != self.tag:
                continue
            agent = message.src
            if self.recalls is not None:
                self.recalls.answered(self.server, agent, answers or self._due.get(agent), done=True)
            if not self.active or agent in self.got or agent not in self.senders:
                continue
            self.got[agent] = record
            self._check()

    def _on_recalls(self, messages: list[Message]) -> None:
        for message in messages:
            tag, number = message.payload
            agent = message.dst
            if tag == self.tag and self.active and agent in self._sent:
                self.network.send(agent, self.server, self.kind, (tag, number, self._sent[agent]))

    def _check(self) -> None:
        if self.active and self.up[self.server] and self.expected <= self.got.keys():
            self.active = False
            self.complete_at = self.network.env.now
            if self.recalls is not None:
                self.recalls.clear()
            self.on_complete(dict(self.got))


def _lie_about_mean(payload: tuple, lie: Lie) -> tuple:
    """An upload ``(tag, answers, (mean, ...))``: the lie applies to the mean (ybar_i for CDP-MAB, the
    component's pooled mean for HDP-MAB, both released by the uploader); the counts stay (the schedule
    S(r) makes them known to every agent in the paper)."""
    tag, answers, record = payload
    if record[0] is None:  # an HDP sink that holds no record with samples uploads no mean
        return payload
    return tag, answers, (lie(record[0]), *record[1:])


#: the corruption rule of uploads (``network.corruptible``)
lie_about_record = rewriting(_lie_about_mean)
