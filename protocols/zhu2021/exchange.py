"""Delay-robust pairwise gossip for realistic-mode Gossip_UCB / Fed_UCB.

Alg. 1 line 20 averages the two endpoints of the activated link *instantly*:
theta_i, theta_j <- (theta_i + theta_j) / 2. On a network with delays, applying on arrival the
correction (theta_j(s) - theta_i(s)) / 2 computed from values sent at activation time s uses a
stale difference; when several exchanges of one node overlap, their corrections add up and
overshoot, and theta diverges (measured on K3 with a constant delay of 3 ticks: max|theta| 9e79).

This module replaces it with an *atomic pairwise exchange*, the push-pull averaging of Boyd,
Ghosh, Prabhakar & Shah ("Randomized gossip algorithms", IEEE Trans. Inf. Theory 52(6), 2006)
made safe for asynchronous, lossy links the way a deployed protocol would do it: a node opens at
most one exchange at a time, both endpoints apply the *same* pair of values, and every reply
that arrives is applied exactly once, so that no correction is ever lost or doubled.

1. Link (u, v) fires at time s; unless u has an exchange open, it opens exchange number k
   (per-sender sequence numbers, :class:`netsim.sequencing.Sequencer`), freezes a = theta_u(s)
   and sends the request ``zhu2021-theta`` = (k, a) to v.
2. v receives it at r. A request older than the newest one v answered for u is ignored (a
   reordered copy); a repeat of that newest one (a duplicate or a retransmission) gets the same
   answer again and changes nothing. A new request is refused (reply without a value) if v has
   an exchange of its own open; otherwise, with b = theta_v(r), v sets
   theta_v <- theta_v + (a - b) / 2 = (a + b) / 2 and replies (k, b) (``zhu2021-theta-reply``).
3. u receives the reply at r'. The first reply of each of u's exchanges is applied,
   theta_u <- theta_u + (b - a) / 2, whenever it arrives; every other copy is ignored. If k is
   still open, u closes it: while k was open u's theta moved only by its own increments
   X~_u(t) - X~_u(t - 1), so u ends at (a + b) / 2 plus those increments, and both endpoints
   applied one average of one pair (a, b).
4. Timeouts and retransmission: if no reply comes within u's RTO, u resends the same request
   (at most ``RETRIES`` times, doubling the RTO each time), then gives up and closes k. A reply
   arriving after that is still applied (step 3): v has moved, so u must too.

Invariants (tests in ``tests/test_zhu2021_realistic.py``):

* With zero delay, steps 1-3 happen at the instant s and give both endpoints (a + b) / 2 with
  a = theta_u(s), b = theta_v(s): exactly Alg. 1 line 20 applied at s.
* Corrections come in antisymmetric pairs, each applied once, so sum_i theta_i = sum_i X~_i
  (Eq. (9)) holds whenever no reply is in flight, under any delay law, duplication and
  reordering. Only a reply lost on all of its ``1 + RETRIES`` attempts (or a node losing its
  state) breaks it.
* An exchange closed by its reply applies an average of two values, so it cannot leave the
  range of the values being averaged; only a reply applied after u gave up applies a stale
  difference, which takes a delay above about 15 times the smoothed round trip. The tests
  check max_i |theta_i(t)| <= max_i |theta_i(0)| + 2 sum_{tau <= t} max_i |X~_i(tau) - X~_i(tau - 1)|,
  which the stale-difference rule breaks by tens of orders of magnitude.

Timeouts follow RFC 6298 (Jacobson's estimator): each node keeps a smoothed round-trip time and
its variation from the exchanges whose first attempt was answered (Karn's rule),
RTO = srtt + 4 rttvar, never below the clock period; each retransmission doubles it (up to 64
times the initial one). The initial RTO is the protocol key ``exchange_timeout``. A node that
lost its state (crash with ``state = "lost"``) closes its exchange, starts a new incarnation of
its sequence numbers, forgets what it answered and what it awaited, and its RTO starts afresh.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from netsim.network import Message
from netsim.sequencing import Sequencer

REQUEST = "zhu2021-theta"
REPLY = "zhu2021-theta-reply"
RETRIES = 3
BACKOFF_CAP = 64.0
#: what :attr:`PairwiseExchange.counts` counts (``trials.csv`` columns ``exchanges_<name>``)
EXCHANGE_COUNTS = ("started", "completed", "refused", "retransmitted", "abandoned", "late", "ignored")


class PairwiseExchange:
    """The exchange above for ``sim.num_agents`` nodes whose values are rows of width ``width``.

    ``value(i)`` returns node i's current row (read only) and ``move(i, by)`` adds ``by`` to it.
    """

    def __init__(self, sim, *, width: int, value: Callable[[int], np.ndarray],
                 move: Callable[[int, np.ndarray], None], timeout: float, min_timeout: float) -> None:
        n = sim.num_agents
        self.sim, self.width, self.value, self.move = sim, width, value, move
        self.initial_timeout, self.min_timeout = float(timeout), float(min_timeout)
        self.open = np.full(n, -1, dtype=np.int64)     # number of the exchange a node has open (-1: none)
        self.peer = np.zeros(n, dtype=np.int64)
        self.attempts = np.zeros(n, dtype=np.int64)
        self.opened_at = np.zeros(n)
        self.rto = np.full(n, self.initial_timeout)
        self.srtt = np.full(n, np.nan)
        self.rttvar = np.zeros(n)
        self.awaited: dict[tuple[int, int], np.ndarray] = {}       # (u, k) -> a, until k's first reply
        self.answered: dict[tuple[int, int], tuple[int, object]] = {}  # (v, u) -> (k, b or None)
        self.numbers = Sequencer()
        self.counts = dict.fromkeys(EXCHANGE_COUNTS, 0)
        sim.network.subscribe_batch(REQUEST, self._on_request)
        sim.network.subscribe_batch(REPLY, self._on_reply)

    def begin(self, u: int, v: int) -> None:
        """Link (u, v) fired: u opens an exchange with v unless it has one open."""
        if self.open[u] >= 0:
            return
        number = self.numbers.next(u)
        self.awaited[u, number] = self.value(u).copy()
        self.open[u], self.peer[u], self.attempts[u], self.opened_at[u] = number, v, 0, self.sim.now
        self.counts["started"] += 1
        self._send_request(u, number)

    def _send_request(self, u: int, number: int) -> None:
        sim = self.sim
        sim.network.send(u, int(self.peer[u]), REQUEST, (number, self.awaited[u, number]), size=self.width)
        attempt = int(self.attempts[u])
        sim.call_at(sim.now + self.rto[u], lambda: self._timeout(u, number, attempt))

    def _on_request(self, messages: list[Message]) -> None:
        network = self.sim.network
        for msg in messages:
            v, u = msg.dst, msg.src
            number, a = msg.payload
            last = self.answered.get((v, u))
            if last is not None and number <= last[0]:
                if number == last[0]:  # a duplicate or a retransmission: the same answer, applied once
                    network.send(v, u, REPLY, last, size=0 if last[1] is None else self.width)
                else:
                    self.counts["ignored"] += 1
                continue
            if self.open[v] >= 0:
                answer: tuple[int, object] = (number, None)
            else:
                b = self.value(v).copy()
                self.move(v, 0.5 * (a - b))
                answer = (number, b)
            self.answered[v, u] = answer
            network.send(v, u, REPLY, answer, size=0 if answer[1] is None else self.width)

    def _on_reply(self, messages: list[Message]) -> None:
        now = self.sim.now
        for msg in messages:
            u = msg.dst
            number, b = msg.payload
            a = self.awaited.pop((u, number), None)
            if a is None:
                self.counts["ignored"] += 1
                continue
            if b is None:
                self.counts["refused"] += 1
            else:
                self.move(u, 0.5 * (b - a))
                self.counts["completed"] += 1
            if self.open[u] != number:
                self.counts["late"] += 1
                continue
            self.open[u] = -1
            if self.attempts[u] == 0:
                self._sample(u, now - self.opened_at[u])

    def _sample(self, u: int, rtt: float) -> None:
        """RFC 6298 Sec. 2: alpha = 1/8, beta = 1/4, K = 4."""
        if np.isnan(self.srtt[u]):
            self.srtt[u], self.rttvar[u] = rtt, rtt / 2
        else:
            self.rttvar[u] = 0.75 * self.rttvar[u] + 0.25 * abs(self.srtt[u] - rtt)
            self.srtt[u] = 0.875 * self.srtt[u] + 0.125 * rtt
        self.rto[u] = max(self.min_timeout, self.srtt[u] + 4 * self.rttvar[u])

    def _timeout(self, u: int, number: int, attempt: int) -> None:
        if self.open[u] != number or self.attempts[u] != attempt:
            return
        self.rto[u] = min(2 * self.rto[u], BACKOFF_CAP * self.initial_timeout)
        if attempt < RETRIES:
            self.attempts[u] += 1
            self.counts["retransmitted"] += 1
            self._send_request(u, number)
        else:
            self.open[u] = -1
            self.counts["abandoned"] += 1

    def forget(self, node: int) -> None:
        """``node`` lost its state: nothing open, awaited or answered; new incarnation; fresh RTO."""
        self.open[node] = -1
        self.numbers.restart(node)
        for key in [k for k in self.awaited if k[0] == node]:
            del self.awaited[key]
        for key in [k for k in self.answered if k[0] == node]:
            del self.answered[key]
        self.rto[node], self.srtt[node], self.rttvar[node] = self.initial_timeout, np.nan, 0.0
