"""Helpers for testing a protocol: one trial in one call, and a spy on its messages.

>>> from netsim.experiment.testing import run_trial
>>> trial = run_trial({
...     "bandit": {"kind": "bernoulli", "arms": 3, "means": [0.9, 0.5, 0.1]},
...     "network": {"topology": "ring", "agents": 4},
...     "protocol": {"name": "ucb1"},
...     "run": {"horizon": 50},
... })
>>> trial.row["protocol"], len(trial.spy.sent())
('ucb1', 0)

:func:`run_trial` runs trial ``i`` exactly as ``netsim run`` runs it (same seed sequence), with
a :class:`MessageSpy` attached, and returns the finished :class:`~netsim.engine.sim.Simulation` (its
protocol object, bandit and counters can be inspected), its result row, and the spy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netsim.engine import scenario as S
from netsim.engine.network import Message
from netsim.engine.sim import Simulation, TrialResult
from netsim.engine.streams import trial_sequence
from netsim.experiment.runner import with_run_options

EVENTS = ("send", "deliver", "drop", "corrupt")


@dataclass(frozen=True, slots=True)
class SpiedEvent:
    """One thing that happened to a message, at simulated time ``time``.

    ``event`` is ``send`` (the message left, its delay drawn: ``message.due_at`` is when it
    arrives), ``deliver`` (handed to its handler, at ``due_at``), ``drop`` (lost on its link, or
    arriving at a crashed node) or ``corrupt`` (its payload rewritten by the adversary).
    """

    event: str
    time: float
    message: Message


class MessageSpy:
    """Records every send, delivery, drop and corruption of a trial's messages.

    Attach it to a simulation before it runs (:func:`run_trial` does): it is the network's
    tracer, so runs without a spy pay nothing for it.

    Parameters
    ----------
    kinds:
        Record only these message kinds (default: every kind).
    """

    def __init__(self, kinds: Iterable[str] | None = None):
        self.kinds = None if kinds is None else frozenset(kinds)
        self.events: list[SpiedEvent] = []
        self._env: Any = None

    def attach(self, sim: Simulation) -> MessageSpy:
        """Make this spy the tracer of ``sim``'s network; returns the spy."""
        self._env = sim.env
        sim.network.tracer = self
        return self

    def __call__(self, event: str, message: Message) -> None:
        if self.kinds is None or message.kind in self.kinds:
            self.events.append(SpiedEvent(event, float(self._env.now), message))

    def messages(self, event: str, kind: str | None = None) -> list[Message]:
        """The messages of every ``event`` (one of :data:`EVENTS`), of ``kind`` if given, in order."""
        if event not in EVENTS:
            raise ValueError(f"event {event!r}: accepted: {', '.join(EVENTS)}")
        return [e.message for e in self.events if e.event == event and (kind is None or e.message.kind == kind)]

    def sent(self, kind: str | None = None) -> list[Message]:
        """Messages that left their sender (lost ones excepted: see :meth:`dropped`)."""
        return self.messages("send", kind)

    def delivered(self, kind: str | None = None) -> list[Message]:
        """Messages handed to a handler, in delivery order."""
        return self.messages("deliver", kind)

    def dropped(self, kind: str | None = None) -> list[Message]:
        """Messages lost on their link or arriving at a crashed node."""
        return self.messages("drop", kind)

    def corrupted(self, kind: str | None = None) -> list[Message]:
        """Messages whose payload the adversary rewrote (as they were delivered)."""
        return self.messages("corrupt", kind)

    def frame(self):
        """Every event as a pandas DataFrame: ``event, time, kind, src, dst, sent_at, due_at, size, payload``."""
        import pandas as pd

        columns = ["event", "time", *Message._fields]
        rows = [(e.event, e.time, *e.message) for e in self.events]
        return pd.DataFrame(rows, columns=columns)[["event", "time", "kind", "src", "dst", "sent_at", "due_at",
                                                   "size", "payload"]]


@dataclass
class Trial:
    """A finished trial: the simulation, its result and the messages the spy saw."""

    sim: Simulation
    result: TrialResult
    spy: MessageSpy

    @property
    def row(self) -> dict[str, Any]:
        """The trial's row of the trials table (``group_regret``, ``messages_sent``, protocol extras...)."""
        return self.result.row

    @property
    def protocol(self) -> Any:
        """The protocol object, after the run (its state can be inspected)."""
        return self.sim.protocol


def run_trial(scenario: S.Scenario | Mapping[str, Any] | str | Path | None, *, set: S.Overrides | None = None,
              seed: int | None = None, trial: int = 0, kinds: Iterable[str] | None = None) -> Trial:
    """Run one trial of a scenario with a :class:`MessageSpy` attached.

    Parameters
    ----------
    scenario:
        A :class:`~netsim.engine.scenario.Scenario`, a bundled name or file, or a scenario as a nested
        dict (the TOML document: ``bandit``, ``network``, ``protocol`` and ``run`` tables).
    set:
        Overrides (``{"protocol.epsilon": 0.5}`` or ``["protocol.epsilon=0.5"]``).
    seed:
        Root seed (default: the scenario's ``run.seed``).
    trial:
        Which trial: the result is that of trial ``trial`` of ``netsim run`` with the same seed.
    kinds:
        Message kinds the spy records (default: all).

    Returns
    -------
    Trial
        ``sim``, ``result`` (``row``, ``agents``, ``timeseries``), ``spy``.
    """
    if isinstance(scenario, Mapping):
        scenario = S.from_dict({"name": "test", **scenario})
    prepared = with_run_options(S.load(scenario, set), seed=seed)
    sim = Simulation(prepared, trial_sequence(prepared.run["seed"], trial), trial=trial)
    spy = MessageSpy(kinds).attach(sim)
    return Trial(sim, sim.run(), spy)
