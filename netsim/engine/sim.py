"""One trial: a ``simpy.Environment`` with the network, the bandit, the counters and a protocol.

The simulation runs until ``run.horizon`` (events at times < horizon are processed) or until
the protocol calls :meth:`Simulation.stop`. Regret and communication cost are recorded at
``run.checkpoints + 1`` evenly spaced instants 0, H/C, ..., H, each taken before any other
event of that instant; the last row is always the state at the end of the trial (at H, or at
the instant the protocol stopped it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import simpy

from netsim.bandits import bandits
from netsim.engine.errors import ProtocolError
from netsim.engine.faults import NoFaults
from netsim.engine.metrics import Metrics
from netsim.engine.network import CHECKPOINT, FAULT, TICK, Message, Network
from netsim.engine.registry import protocols
from netsim.engine.scenario import Scenario, build_network
from netsim.engine.streams import Streams

FINISH = CHECKPOINT - 1

#: ``callback(fraction)`` told at every checkpoint how far (simulated time / horizon) the running
#: trial of this process is; set by the runner's progress bar (``netsim.experiment.runner``), None otherwise.
progress_hook: Callable[[float], None] | None = None
WATCH = TICK + 1  # the watchdog looks after everything else of its instant
WALL_CHECK_EVERY = 64  # events between two looks at the wall clock (only with run.wall_budget; an event may be slow)


class Node:
    """What a protocol sees of one node: its id, neighbours, random stream and the send API."""

    __slots__ = ("sim", "id", "_rng")

    def __init__(self, sim: Simulation, node_id: int):
        self.sim = sim
        self.id = node_id
        self._rng: np.random.Generator | None = None

    @property
    def rng(self) -> np.random.Generator:
        """The node's own protocol stream ``("protocol", id)``."""
        if self._rng is None:
            self._rng = self.sim.streams.for_("protocol", self.id)
        return self._rng

    @property
    def is_server(self) -> bool:
        return self.sim.network.is_server(self.id)

    @property
    def neighbors(self) -> list[int]:
        return self.sim.network.neighbors(self.id)

    def send(self, dst: int, kind: str, payload: Any = None, *, size: int = 1) -> None:
        self.sim.network.send(self.id, dst, kind, payload, size=size)

    def broadcast(self, kind: str, payload: Any = None, *, size: int = 1) -> None:
        self.sim.network.broadcast(self.id, kind, payload, size=size)

    def on(self, kind: str, handler: Callable[[Message], None]) -> None:
        self.sim.network.subscribe(kind, handler, node=self.id)

    def every(self, period: float, callback: Callable[[float], None], *, start: float = 0.0) -> simpy.Process:
        return self.sim.every(period, callback, node=self.id, start=start)


@dataclass
class TrialResult:
    """Everything one trial produced, as plain data (picklable for process executors)."""

    row: dict[str, Any]
    agents: dict[str, np.ndarray]
    timeseries: dict[str, np.ndarray]
    wall_s: float
    info: dict[str, Any] = field(default_factory=dict)


class Simulation:
    """Build and run one trial of ``scenario`` with the streams of ``seed_sequence``."""

    def __init__(self, scenario: Scenario, seed_sequence: np.random.SeedSequence, *, trial: int = 0):
        self.scenario = scenario
        self.trial = trial
        self.seed_sequence = seed_sequence
        self.streams = Streams(seed_sequence)
        self.env = simpy.Environment()
        run = scenario.run
        self.horizon: float = run["horizon"]
        self.clock_period: float = scenario.clock["period"]
        self.clock_jitter: float = scenario.clock["jitter"]
        self.network: Network = build_network(scenario, self.env, self.streams)
        self.metrics: Metrics = self.network.metrics
        #: the trial's faults (``netsim.engine.faults.Faults``), or a stand-in whose nodes are always up
        self.faults = self.network.faults or NoFaults(self.network.num_nodes)
        self.num_agents = self.network.num_agents
        self.bandit = bandits.get(scenario.bandit["kind"], key="bandit.kind")(
            scenario.bandit, self.num_agents, self.streams
        )
        if self.faults.has_crashes:
            self._guard_pulls()
        self.nodes = [Node(self, i) for i in range(self.network.num_nodes)]
        self.agents = self.nodes[: self.num_agents]
        self.servers = self.nodes[self.num_agents:]
        protocol_cls = protocols.get(scenario.protocol["name"], key="protocol.name")
        params = {k: v for k, v in scenario.protocol.items() if k != "name"}
        self.protocol = protocol_cls(self, params)
        self._finished = self.env.event()
        self._stop_reason = ""
        self._failure = ""
        self._series: dict[str, list[float]] = {"time": [], "group_regret": [], "mean_agent_regret": [],
                                               "comm_cost": []}

    def _guard_pulls(self) -> None:
        """Make a pull for a crashed agent a :class:`ProtocolError` (scenarios with crashes only).

        The check wraps this trial's ``bandit.pull_many`` (``pull`` goes through it), ``bandit.pull_walks``
        (``pull_walk`` goes through it) and ``bandit.pull_each``, so a scenario without crashes pays nothing.
        One exception: while the crash handlers of a node run, pulls for that node are allowed, since they
        settle slots it played before the crash (protocols that draw whole runs of slots lazily as exact-law sums).
        """
        bandit, faults = self.bandit, self.faults
        up = faults.up
        pull_many = bandit.pull_many

        def guarded(agents, arms, n=1):
            agents = np.asarray(agents, dtype=np.int64)
            if len(agents) and not up[agents].all():
                down = sorted(set(agents[~up[agents]].tolist()))
                if down == [faults.settling]:
                    # an on_crash handler settles the pulls the agent made before this instant
                    # (protocols that draw whole runs of slots lazily as exact-law sums)
                    return pull_many(agents, arms, n)
                raise ProtocolError(f"protocol {self.scenario.protocol['name']!r} pulled for crashed agent(s) "
                                    f"{down[:5]} at t = {self.env.now:g}; a crashed node pulls nothing")
            return pull_many(agents, arms, n)

        pull_walks = bandit.pull_walks

        def guarded_walks(agents, arms, steps):
            agents = np.asarray(agents, dtype=np.int64)
            if not up[agents].all():
                down = agents[~up[agents]].tolist()
                if down != [faults.settling]:
                    raise ProtocolError(f"protocol {self.scenario.protocol['name']!r} pulled for crashed agent(s) "
                                        f"{down[:5]} at t = {self.env.now:g}; a crashed node pulls nothing")
            return pull_walks(agents, arms, steps)

        pull_each = bandit.pull_each

        def guarded_each(arms):
            if not up[: len(arms)].all():  # the general path: refused, or a crash handler settling its pulls
                return guarded(np.arange(len(arms)), arms)
            return pull_each(arms)

        bandit.pull_many = guarded
        bandit.pull_walks = guarded_walks  # pull_walk goes through it
        bandit.pull_each = guarded_each

    # ------------------------------------------------------------------ engine API
    @property
    def now(self) -> float:
        return self.env.now

    def every(self, period: float, callback: Callable[[float], None], *, node: int | None = None,
              start: float = 0.0) -> simpy.Process:
        """Call ``callback(now)`` at ``start, start + period, ...`` until the run ends.

        With ``[clock] jitter = j`` and a ``node``, tick k of that node happens at
        ``start + k * period + U[0, j * period)`` drawn from the node's ``("clock", node)``
        stream (drift-free jitter; ticks stay ordered because j < 1).
        """
        if period <= 0:
            raise ProtocolError(f"clock period must be > 0, got {period}")
        env = self.env
        if node is not None and self.faults.has_crashes:
            up, inner = self.faults.up, callback

            def callback(now: float) -> None:  # a crashed node's clock is paused
                if up[node]:
                    inner(now)

        jitter = self.clock_jitter * period if node is not None else 0.0
        rng = self.streams.for_("clock", node) if jitter > 0 else None

        def ticks():
            nominal = start
            offset = rng.uniform(0, jitter) if rng is not None else 0.0
            if nominal + offset > env.now:
                yield env.timeout(nominal + offset - env.now)
            while True:
                callback(env.now)
                nominal += period
                nxt = nominal + (rng.uniform(0, jitter) if rng is not None else 0.0)
                yield env.timeout(nxt - env.now)

        return env.process(ticks())

    def call_at(self, when: float, callback: Callable[[], None], *, priority: int = TICK) -> None:
        """Call ``callback()`` once at time ``when`` (no process; one event)."""
        if when < self.env.now:
            raise ProtocolError(f"call_at({when}) is in the past (now = {self.env.now})")
        event = simpy.events.Event(self.env)
        event._ok, event._value = True, None
        event.callbacks.append(lambda _event: callback())
        self.env.schedule(event, priority, when - self.env.now)

    def stop(self, reason: str = "") -> None:
        """End the trial now (e.g. when a best arm has been identified)."""
        if not self._finished.triggered:
            self._stop_reason = reason
            # Event.succeed() would schedule at NORMAL priority, after ticks already due now.
            self._finished._ok, self._finished._value = True, reason
            self.env.schedule(self._finished, FINISH)

    def fail(self, reason: str) -> None:
        """End the trial now and record it as failed (``status = failed``, ``failure = reason``)."""
        if not self._finished.triggered:
            self._failure = reason
            self.stop(f"failed: {reason}")

    # ------------------------------------------------------------------ running
    def _checkpoint(self, *, final: bool = False) -> None:
        regret = self.bandit.regret
        series = self._series
        if final and series["time"] and series["time"][-1] == self.env.now:
            for values in series.values():  # the end state replaces a checkpoint taken at the same instant
                values.pop()
        series["time"].append(float(self.env.now))
        series["group_regret"].append(float(regret.sum()))
        series["mean_agent_regret"].append(float(regret.mean()))
        series["comm_cost"].append(float(self.metrics.comm_cost))
        if progress_hook is not None and not final:
            progress_hook(min(1.0, self.env.now / self.horizon) if self.horizon > 0 else 1.0)

    def _schedule_checkpoints(self) -> None:
        count = self.scenario.run["checkpoints"]
        times = [self.horizon * k / count for k in range(count)]
        for when in times:
            self.call_at(when, self._checkpoint, priority=CHECKPOINT)
        finish = simpy.events.Event(self.env)
        finish._ok, finish._value = True, None
        # the end comes before the horizon's deliveries: what is due at the horizon stays in flight
        finish.callbacks.append(lambda _event: (self.network._before_deliveries(), self.stop("horizon")))
        self.env.schedule(finish, FINISH, self.horizon)

    def _schedule_watchdog(self, period: float) -> None:
        """Fail the trial when ``period`` of simulated time passes without a pull or a delivery."""
        metrics, bandit = self.metrics, self.bandit
        last = [-1]

        def progress() -> int:
            self.network.settle()  # the counters of held flights (netsim.engine.held)
            return int(bandit.pulls.sum()) + metrics.total("delivered")

        def look() -> None:
            now = progress()
            if now == last[0]:
                self.fail(f"watchdog: no pull and no delivery for {period:g} time units "
                          f"(t = {self.env.now:g})")
                return
            last[0] = now
            if self.env.now + period < self.horizon:
                self.call_at(self.env.now + period, look, priority=WATCH)

        self.call_at(0.0, look, priority=WATCH)

    def _run_until_finished(self, budget: float) -> None:
        """``env.run`` with a look at the wall clock every few thousand events."""
        env, finished = self.env, self._finished
        deadline = time.perf_counter() + budget
        step = env.step
        while not finished.processed:
            for _ in range(WALL_CHECK_EVERY):
                if finished.processed:
                    return
                step()
            if time.perf_counter() > deadline:
                self._failure = f"wall-clock budget of {budget:g} s exceeded (t = {env.now:g})"
                self._stop_reason = f"failed: {self._failure}"
                return

    def run(self) -> TrialResult:
        """Run the trial to its end and collect the results."""
        started = time.perf_counter()
        self._schedule_checkpoints()
        if self.faults.active:
            self.faults.start(lambda when, fn: self.call_at(when, fn, priority=FAULT), self.horizon)
        run = self.scenario.run
        watchdog, budget = run.get("watchdog", 0.0), run.get("wall_budget", 0.0)
        if 0 < watchdog < math.inf:
            self._schedule_watchdog(watchdog)
        self.protocol.start()
        if self.network.adversary is not None:
            missing = sorted(set(self.protocol.corruptible) - self.network._corruptors.keys())
            if missing:
                raise ProtocolError(f"protocol {self.scenario.protocol['name']!r} declares {missing} corruptible but "
                                    "gave no rule for them in start(); accepted: network.corruptible(kind, rule)")
        if 0 < budget < math.inf:
            self._run_until_finished(budget)
        else:
            self.env.run(until=self._finished)
        self._checkpoint(final=True)
        wall = time.perf_counter() - started
        return self._result(wall)

    def agent_links_built(self, slots: int) -> None:
        """Book every agent-agent link as built in each of ``slots`` further slots: what ``slots`` ticks of
        ``network.activate_agent_links()`` book in slots where nothing else uses a link (lockstep drivers)."""
        self.metrics.edges_built(np.unique(self.network.agent_edge), slots)


    def _result(self, wall: float) -> TrialResult:
        self.network.settle()  # the counters of held flights (netsim.engine.held)
        m = self.metrics
        unfinished = None if self._failure else self.protocol.unfinished()
        regret = self.bandit.regret
        row: dict[str, Any] = {
            "scenario": self.scenario.name,
            "protocol": self.scenario.protocol["name"],
            "trial": self.trial,
            "seed": self.scenario.run["seed"],
            "agents": self.num_agents,
            "horizon": self.horizon,
            "end_time": float(self.env.now),
            "group_regret": float(regret.sum()),
            "mean_agent_regret": float(regret.mean()),
            "links_agent_agent": m.links_agent_agent,
            "links_server_agent": m.links_server_agent,
            "comm_cost": float(m.comm_cost),
            "messages_sent": m.total("sent"),
            "messages_delivered": m.total("delivered"),
            "messages_dropped": m.total("dropped"),
            "messages_corrupted": m.total("corrupted"),
            "messages_in_flight": self.network.in_flight,
            "rounds": m.rounds,
            "status": "failed" if self._failure else ("unfinished" if unfinished else "ok"),
            # never empty: an empty CSV cell reads back as NaN
            "failure": self._failure or unfinished or "none",
        }
        for kind in sorted(m.messages):
            row[f"sent_{kind}"] = m.messages[kind].sent
        row.update(m.extras)
        row.update(self.protocol.results())
        n = self.num_agents
        agents = {
            "agent": np.arange(n),
            "regret": regret.copy(),
            "pulls": self.bandit.pulls.copy(),
            "messages_sent": m.node_sent[:n].copy(),
            "messages_received": m.node_received[:n].copy(),
            "links": m.node_links[:n].copy(),
        }
        series = {k: np.array(v) for k, v in self._series.items()}
        info = {"bandit": self.bandit.summary(), "stop_reason": self._stop_reason}
        return TrialResult(row, agents, series, wall, info)


def run_trial(scenario: Scenario, seed_sequence: np.random.SeedSequence, trial: int) -> TrialResult:
    """Build and run one trial (the unit of work executors ship around)."""
    return Simulation(scenario, seed_sequence, trial=trial).run()


# ---------------------------------------------------------------------- several trials in lockstep
def lockstep_key(scenario: Scenario) -> Any:
    """What trials of ``scenario`` must share to run in lockstep with each other (None: each runs alone).

    The protocol class decides (``Protocol.lockstep_key``; None by default); trials with a watchdog or
    a wall-clock budget always run alone, and so do trials whose built network has faults or an
    adversary (:func:`run_trials` looks), as their events are not the protocol's.
    """
    run = scenario.run
    if 0 < run.get("watchdog", 0.0) < math.inf or 0 < run.get("wall_budget", 0.0) < math.inf:
        return None
    protocol_cls = protocols.get(scenario.protocol["name"], key="protocol.name")
    key = getattr(protocol_cls, "lockstep_key", lambda _scenario: None)(scenario)
    return None if key is None else (scenario.protocol["name"], key)


def run_lockstep(sims: list[Simulation]) -> list[TrialResult]:
    """Run trials whose protocol steps them together (``Protocol.lockstep``), one result per trial.

    Each trial keeps its own streams, bandit, network books, checkpoints and results; only the
    protocol's work is shared: ``advance(when)`` (returned by the protocol class's ``lockstep``) does
    every trial's work at times before ``when`` and leaves each trial's books (bandit, metrics) as
    its own events up to then would have. The engine then takes each trial's checkpoints and end at
    ``when`` from its own event queue, as :meth:`Simulation.run` does.
    """
    started = time.perf_counter()
    for sim in sims:
        sim._schedule_checkpoints()
    advance = type(sims[0].protocol).lockstep([sim.protocol for sim in sims])
    while True:
        pending = [sim for sim in sims if not sim._finished.processed]
        if not pending:
            break
        when = min(sim.env.peek() for sim in pending)
        advance(when)
        for sim in pending:
            while not sim._finished.processed and sim.env.peek() == when:
                sim.env.step()
    wall = (time.perf_counter() - started) / len(sims)
    results = []
    for sim in sims:
        sim._checkpoint(final=True)
        results.append(sim._result(wall))
    return results


def lockstep_scope(scenario: Scenario) -> str:
    """``"trials"`` or ``"seed"``: which trials with equal :func:`lockstep_key` may share a group (the protocol's
    ``lockstep_scope``; ``"seed"``: only the units of one seed sequence)."""
    return getattr(protocols.get(scenario.protocol["name"], key="protocol.name"), "lockstep_scope", "trials")


def run_trials(units: list[tuple[Scenario, np.random.SeedSequence, int]]) -> list[TrialResult]:
    """Run ``(scenario, seed sequence, trial)`` units, in lockstep where several share a non-None
    :func:`lockstep_key` (each such set together, every other unit alone); the results, in the order of
    ``units``, are those of :func:`run_trial` on each unit."""
    together: dict[Any, list[int]] = {}
    for index, (scenario, _, _) in enumerate(units):
        together.setdefault(lockstep_key(scenario) if len(units) > 1 else None, []).append(index)
    results: list[TrialResult | None] = [None] * len(units)
    for key, members in together.items():
        if key is None or len(members) < 2:
            done = [run_trial(*units[i]) for i in members]
        else:
            sims = [Simulation(units[i][0], units[i][1], trial=units[i][2]) for i in members]
            if any(sim.faults.active or sim.network.adversary is not None for sim in sims):
                done = [sim.run() for sim in sims]
            else:
                done = run_lockstep(sims)
        for i, result in zip(members, done, strict=True):
            results[i] = result
    return results
