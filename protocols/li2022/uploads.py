"""Agent -> server uploads of li2022 (CDP-MAB line 11, HDP-MAB line 10), acknowledged on lossy links.

Crashes (``docs/faults.md``): the server learns of an agent's crash as the paper's
synchronisation clock monitors every agent (Sec. V-A.2) and stops waiting for its upload
(:meth:`Uploads.drop`); an upload that still arrives in the round is used. While the server is
down, uploads to it are dropped by the engine and repeated by their senders (reliable mode, on
whenever messages can be lost); the round cannot complete until the server is back. A server
that restarts without its state (``lost``) has forgotten the uploads of the open round: it asks
the expected senders that had already been acknowledged to upload again (``<prefix>-recall``).
Duplicates and late copies: an upload carries its round (``tag``); one of an older round is
ignored, a second copy of a sender's upload in the round is acknowledged again (its sender may
have missed the first acknowledgement) but not counted twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from netsim.network import Message


class Uploads:
    """Agent -> server uploads of one record each, acknowledged and repeated on loss.

    ``begin(senders, server)`` opens a collection epoch; ``send(agent, record)`` uploads (the
    record is any payload). With ``reliable`` the server acknowledges each upload and
    :meth:`tick` repeats uploads not acknowledged within ``timeout``. ``on_complete(records)``
    fires when the server, up, holds a record from every sender it still expects
    (``records``: sender -> record).
    """

    def __init__(self, network, prefix: str, *, reliable: bool, timeout: float, up: np.ndarray,
                 on_complete: Callable[[dict[int, Any]], None]):
        self.network = network
        self.kind, self.ack, self.recall_kind = f"{prefix}-upload", f"{prefix}-ack", f"{prefix}-recall"
        self.reliable = reliable
        self.timeout = timeout
        self.up = up
        self.on_complete = on_complete
        self.tag = 0
        self.retries = 0
        self.active = False
        self.server = -1
        self.expected: set[int] = set()
        self.got: dict[int, Any] = {}
        self._sent: dict[int, Any] = {}
        self._open: dict[int, list] = {}
        network.subscribe(self.kind, self._on_upload)
        network.subscribe(self.ack, self._on_ack)
        network.subscribe(self.recall_kind, self._on_recall)

    def begin(self, senders: Sequence[int], server: int) -> None:
        self.tag += 1
        self.server = server
        self.senders = {int(s) for s in senders}
        self.expected = set(self.senders)
        self.got = {}
        self._sent = {}
        self._open = {}
        self.active = True
        self.complete_at: float | None = None
        self._check()

    def send(self, agent: int, record: Any) -> None:
        self._sent[agent] = record
        self.network.send(agent, self.server, self.kind, (self.tag, record))
        if self.reliable:
            self._open[agent] = [record, self.network.env.now]

    def tick(self, now: float) -> None:
        if not (self.active and self.reliable):
            return
        up = self.up
        for agent, entry in list(self._open.items()):
            if now - entry[1] >= self.timeout and up[agent]:
                self.network.send(agent, self.server, self.kind, (self.tag, entry[0]))
                entry[1] = now
                self.retries += 1

    # ------------------------------------------------------------------ crashes
    def drop(self, agent: int) -> None:
        """The server stops waiting for ``agent`` (it crashed before its upload got through)."""
        if self.active and agent in self.expected and agent not in self.got:
            self.expected.discard(agent)
            self._check()

    def agent_lost(self, agent: int) -> None:
        """``agent`` restarted without its state: it no longer holds the record it was uploading."""
        self._open.pop(agent, None)
        self._sent.pop(agent, None)

    def server_restarted(self, state: str) -> None:
        """The server is back; ``lost``: it recalls the uploads it had received in the open round."""
        if not self.active:
            return
        if state == "lost":
            for agent in sorted(self.got):
                self.network.send(self.server, agent, self.recall_kind, self.tag)
            self.got = {}
        self._check()

    # ------------------------------------------------------------------ handlers
    def _on_upload(self, message: Message) -> None:
        tag, record = message.payload
        if tag != self.tag:
            return
        if self.reliable:
            self.network.send(message.dst, message.src, self.ack, tag)
        if not self.active or message.src in self.got or message.src not in self.senders:
            return
        self.got[message.src] = record
        self._check()

    def _on_ack(self, message: Message) -> None:
        if message.payload == self.tag:
            self._open.pop(message.dst, None)

    def _on_recall(self, message: Message) -> None:
        agent = message.dst
        if message.payload == self.tag and self.active and agent in self._sent:
            self.send(agent, self._sent[agent])

    def _check(self) -> None:
        if self.active and self.up[self.server] and self.expected <= self.got.keys():
            self.active = False
            self.complete_at = self.network.env.now
            self._open.clear()
            self.on_complete(dict(self.got))
