"""Engine message throughput against three baselines: SimPy with a process per message, SimPy with a
timeout and a callback per message, and a plain heap loop.

Workload: every agent of a 200-agent random 4-regular graph broadcasts one message to each
neighbour at every tick, for 100 ticks (80,000 messages). The same traffic runs through

* ``engine``: :class:`netsim.engine.network.Network` (batched deliveries, one event per instant,
  link accounting and counters included), one ``broadcast`` call per agent and tick;
* ``engine-many``: the same network and traffic, each tick's 200 broadcasts sent with one
  ``broadcast_each`` call (every agent a sender at one instant, as a synchronous round sends);
* ``naive``: one ``env.process`` per message that waits for the delay and calls the handler,
  which is how public research codes typically use SimPy;
* ``callbacks``: SimPy used well without batching: one ``env.timeout`` per message with the
  handler as its callback (no process, no generator), delays drawn in one numpy call per tick;
* ``heapq``: the speed limit of a discrete-event loop in Python: a plain ``heapq`` of
  ``(due, sequence, message)`` tuples, delays drawn in one numpy call per tick, a pop and a
  handler call per message, no counters, no link accounting, no SimPy.

Every implementation hands its handler the same facts per message: kind, source, destination,
payload, send time, due time and size (the fields of :class:`netsim.engine.messages.Message`;
the baselines as a plain tuple, which is cheaper to build than the engine's NamedTuple).

Both with constant unit delays (paper mode: whole ticks are batched) and exponential delays
(realistic mode: nearly every message has its own instant).

Measurement (:func:`interleaved`): CPU time on a shared machine drifts by tens of percent within
a minute, so the implementations run in rounds, one run of each per round, in an order rotated
from round to round (A B C D, B C D A, ...); a ratio is computed per round from the CPU times of
that round and reported as the median over the rounds, with the rounds' range beside it. The
median of paired ratios, rather than the ratio of two minima (timeit's rule for one
implementation), because each round compares runs made seconds apart under the same load, and
the median discards a round in which a burst hit one member of the pair. Prints JSON.

Run: ``python benchmarks/engine.py``
"""

from __future__ import annotations

import functools
import gc
import json
import sys
import time

import networkx as nx
import numpy as np
import simpy

from netsim.engine.distributions import Distribution
from netsim.engine.metrics import Metrics
from netsim.engine.network import Network

AGENTS, DEGREE, TICKS, ROUNDS = 200, 4, 100, 9


@functools.lru_cache(maxsize=4)
def graph(agents: int = AGENTS, degree: int = DEGREE) -> nx.Graph:
    """The workload's graph (built once: every implementation is timed on message handling only)."""
    return nx.random_regular_graph(degree, agents, seed=1)


def run_engine(delay: Distribution, agents: int = AGENTS, degree: int = DEGREE,
               ticks: int = TICKS, *, many: bool = False) -> tuple[int, float]:
    """Run the workload through :class:`Network`; return (messages received, wall seconds).

    ``many``: a tick's broadcasts as one :meth:`Network.broadcast_each` call instead of one
    :meth:`Network.broadcast` per agent (the same messages, draws and delivery order).
    """
    g = graph(agents, degree)
    env = simpy.Environment()
    metrics = Metrics(agents, agents, 1.0, 25.0)
    net = Network(env, g, num_agents=agents, components=[list(range(agents))], delay=delay, server_delay=delay,
                  loss=0.0, link_overrides={}, rng=np.random.default_rng(0), metrics=metrics)
    received = [0]

    def handler(message):
        received[0] += 1

    net.subscribe("M", handler)

    senders = list(range(agents))

    def clock():
        for _ in range(ticks):
            if many:
                net.broadcast_each(senders, "M", senders)
            else:
                for agent in senders:
                    net.broadcast(agent, "M", agent)
            yield env.timeout(1.0)

    env.process(clock())
    start = time.perf_counter()
    env.run()
    return received[0], time.perf_counter() - start


def run_naive(delay: Distribution, agents: int = AGENTS, degree: int = DEGREE, ticks: int = TICKS) -> tuple[int, float]:
    """Run the workload with one SimPy process per message; return (messages received, wall seconds)."""
    g = graph(agents, degree)
    neighbors = [sorted(g.neighbors(n)) for n in range(agents)]
    env = simpy.Environment()
    rng = np.random.default_rng(0)
    received = [0]

    def handler(message):
        received[0] += 1

    def deliver(message, wait):
        yield env.timeout(wait)
        handler(message)

    def clock():
        for _ in range(ticks):
            for agent in range(agents):
                for dst in neighbors[agent]:
                    wait = delay.args["value"] if delay.is_constant else float(delay.sample(rng))
                    now = env.now
                    env.process(deliver(("M", agent, dst, agent, now, now + wait, 1), wait))
            yield env.timeout(1.0)

    env.process(clock())
    start = time.perf_counter()
    env.run()
    return received[0], time.perf_counter() - start


def run_callbacks(delay: Distribution, agents: int = AGENTS, degree: int = DEGREE,
                  ticks: int = TICKS) -> tuple[int, float]:
    """Deliver the same messages with one SimPy timeout and callback per message (no process per message)."""
    g = graph(agents, degree)
    neighbors = [sorted(g.neighbors(n)) for n in range(agents)]
    links = [(agent, dst) for agent in range(agents) for dst in neighbors[agent]]
    env = simpy.Environment()
    rng = np.random.default_rng(0)
    received = [0]

    def handler(message):
        received[0] += 1

    def clock():
        for _ in range(ticks):
            delays = delay.sample(rng, len(links)).tolist()
            now = env.now
            for (agent, dst), wait in zip(links, delays, strict=True):
                message = ("M", agent, dst, agent, now, now + wait, 1)
                env.timeout(wait).callbacks.append(lambda _event, message=message: handler(message))
            yield env.timeout(1.0)

    env.process(clock())
    start = time.perf_counter()
    env.run()
    return received[0], time.perf_counter() - start


def run_heapq(delay: Distribution, agents: int = AGENTS, degree: int = DEGREE, ticks: int = TICKS) -> tuple[int, float]:
    """Deliver the same messages with a plain heapq loop; return (messages received, wall seconds)."""
    import heapq

    g = graph(agents, degree)
    neighbors = [sorted(g.neighbors(n)) for n in range(agents)]
    links = [(agent, dst) for agent in range(agents) for dst in neighbors[agent]]
    rng = np.random.default_rng(0)
    received = [0]

    def handler(message):
        received[0] += 1

    start = time.perf_counter()
    heap: list = []
    sequence = 0
    for tick in range(ticks):
        now = float(tick)
        while heap and heap[0][0] < now:  # deliver everything due before this tick
            handler(heapq.heappop(heap)[2])
        delays = delay.sample(rng, len(links)).tolist()
        for (agent, dst), wait in zip(links, delays, strict=True):
            due = now + wait
            heapq.heappush(heap, (due, sequence, ("M", agent, dst, agent, now, due, 1)))
            sequence += 1
    while heap:
        handler(heapq.heappop(heap)[2])
    return received[0], time.perf_counter() - start


IMPLEMENTATIONS = {"engine": run_engine, "engine-many": functools.partial(run_engine, many=True), "naive": run_naive,
                   "callbacks": run_callbacks, "heapq": run_heapq}


def interleaved(delay: Distribution, rounds: int = ROUNDS, agents: int = AGENTS, degree: int = DEGREE,
                ticks: int = TICKS, names: tuple[str, ...] = tuple(IMPLEMENTATIONS)) -> dict:
    """Run every implementation once per round, in an order rotated per round (module docstring).

    Returns ``{"messages": {name: count}, "cpu_s": {name: [one per round]}, "wall_s": {...},
    "order": [[names in round 0's order], ...]}``; an untimed warm-up run of each comes first.
    """
    for name in names:
        IMPLEMENTATIONS[name](delay, agents, degree, 1)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    wall: dict[str, list[float]] = {name: [] for name in names}
    messages: dict[str, int] = {}
    order = []
    for r in range(rounds):
        turn = names[r % len(names):] + names[:r % len(names)]
        order.append(list(turn))
        for name in turn:
            gc.collect()
            w, c = time.perf_counter(), time.process_time()
            messages[name], _ = IMPLEMENTATIONS[name](delay, agents, degree, ticks)
            cpu[name].append(max(time.process_time() - c, 1e-9))
            wall[name].append(time.perf_counter() - w)
    return {"messages": messages, "cpu_s": cpu, "wall_s": wall, "order": order}


def paired_ratios(run: dict, name: str, baseline: str) -> list[float]:
    """Per round, the baseline's CPU time over ``name``'s: the rate of ``name`` over the baseline's."""
    return [b / a for a, b in zip(run["cpu_s"][name], run["cpu_s"][baseline], strict=True)]


def main() -> dict:
    out: dict = {"workload": f"{AGENTS} agents, {DEGREE}-regular, broadcast every tick for {TICKS} ticks",
                 "rounds": ROUNDS}
    for label, delay in (("constant", Distribution("constant", {"value": 1.0})),
                         ("exponential", Distribution("exponential", {"mean": 1.0}))):
        run = interleaved(delay)
        out[label] = {"messages": run["messages"], "cpu_s": run["cpu_s"]}
        for engine in ("engine", "engine-many"):
            for baseline in ("naive", "callbacks", "heapq"):
                ratios = paired_ratios(run, engine, baseline)
                out[label][f"{engine}/{baseline}"] = {"median": float(np.median(ratios)), "min": min(ratios),
                                                      "max": max(ratios)}
    return out


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=2)
    print()
