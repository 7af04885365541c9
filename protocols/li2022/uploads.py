"""Agent -> server uploads of li2022 (CDP-MAB line 11, HDP-MAB line 10), acknowledged on lossy links.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from netsim.network import Message


class Uploads:
    """Agent -> server uploads of one record each, acknowledged and repeated on loss.

    ``begin(senders, server)`` opens a collection epoch; ``send(agent, record)`` uploads. With
    ``reliable`` the server acknowledges each upload and :meth:`tick` repeats uploads not
    acknowledged within ``timeout``. ``on_complete(records)`` fires when the server holds a
    record from every sender (``records``: sender -> vector).
    """

    def __init__(self, network, prefix: str, *, reliable: bool, timeout: float,
                 on_complete: Callable[[dict[int, np.ndarray]], None]):
        self.network = network
        self.kind, self.ack = f"{prefix}-upload", f"{prefix}-ack"
        self.reliable = reliable
        self.timeout = timeout
        self.on_complete = on_complete
        self.tag = 0
        self.retries = 0
        self.active = False
        network.subscribe(self.kind, self._on_upload)
        network.subscribe(self.ack, self._on_ack)

    def begin(self, senders: Sequence[int], server: int) -> None:
        self.tag += 1
        self.server = server
        self.expected = {int(s) for s in senders}
        self.got: dict[int, np.ndarray] = {}
        self._open: dict[int, list] = {}
        self.active = True
        self.complete_at: float | None = None
        if not self.expected:
            self._finish()

    def send(self, agent: int, record: np.ndarray) -> None:
        self.network.send(agent, self.server, self.kind, (self.tag, record))
        if self.reliable:
            self._open[agent] = [record, self.network.env.now]

    def tick(self, now: float) -> None:
        if not (self.active and self.reliable):
            return
        for agent, entry in list(self._open.items()):
            if now - entry[1] >= self.timeout:
                self.network.send(agent, self.server, self.kind, (self.tag, entry[0]))
                entry[1] = now
                self.retries += 1

    def _on_upload(self, message: Message) -> None:
        tag, record = message.payload
        if tag != self.tag:
            return
        if self.reliable:
            self.network.send(message.dst, message.src, self.ack, tag)
        if not self.active or message.src in self.got:
            return
        self.got[message.src] = record
        if len(self.got) == len(self.expected):
            self._finish()

    def _on_ack(self, message: Message) -> None:
        if message.payload == self.tag:
            self._open.pop(message.dst, None)

    def _finish(self) -> None:
        self.active = False
        self.complete_at = self.network.env.now
        self._open.clear()
        self.on_complete(dict(self.got))
