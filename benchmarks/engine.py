"""Engine message throughput against three baselines: SimPy with a process per message, SimPy with a
timeout and a callback per message, and a plain heap loop.

Workload: every agent of a 200-agent random 4-regular graph broadcasts one message to each
neighbour at every tick, for 100 ticks (80,000 messages). The same traffic runs through

* ``engine``: :class:`netsim.engine.network.Network` (batched deliveries, one event per instant,
  link accounting and counters included), and
* ``naive``: one ``env.process`` per message that waits for the delay and calls the handler,
  which is how public research codes typically use SimPy;
* ``callbacks``: SimPy used well without batching: one ``env.timeout`` per message with the
  handler as its callback (no process, no generator), delays drawn in one numpy call per tick;
* ``heapq``: the speed limit of a discrete-event loop in Python: a plain ``heapq`` of
  ``(due, sequence, message)`` tuples, delays drawn in one numpy call per tick, a pop and a
  handler call per message, no counters, no link accounting, no SimPy.

Both with constant unit delays (paper mode: whole ticks are batched) and exponential delays
(realistic mode: nearly every message has its own instant). Prints JSON.

Run: ``python benchmarks/engine.py``
"""

from __future__ import annotations

import functools
import json
import sys
import time

import networkx as nx
import numpy as np
import simpy

from netsim.engine.distributions import Distribution
from netsim.engine.metrics import Metrics
from netsim.engine.network import Network

AGENTS, DEGREE, TICKS, REPEATS = 200, 4, 100, 3


@functools.lru_cache(maxsize=4)
def graph(agents: int = AGENTS, degree: int = DEGREE) -> nx.Graph:
    """The workload's graph (built once: every implementation is timed on message handling only)."""
    return nx.random_regular_graph(degree, agents, seed=1)


def run_engine(delay: Distribution, agents: int = AGENTS, degree: int = DEGREE,
               ticks: int = TICKS) -> tuple[int, float]:
    """Run the workload through :class:`Network`; return (messages received, wall seconds)."""
    g = graph(agents, degree)
    env = simpy.Environment()
    metrics = Metrics(agents, agents, 1.0, 25.0)
    net = Network(env, g, num_agents=agents, components=[list(range(agents))], delay=delay, server_delay=delay,
                  loss=0.0, link_overrides={}, rng=np.random.default_rng(0), metrics=metrics)
    received = [0]

    def handler(message):
        received[0] += 1

    net.subscribe("M", handler)

    def clock():
        for _ in range(ticks):
            for agent in range(agents):
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
                    env.process(deliver((agent, dst, "M", agent), wait))
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
            for (agent, dst), wait in zip(links, delays, strict=True):
                message = (agent, dst, "M", agent)
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
            heapq.heappush(heap, (now + wait, sequence, (agent, dst, "M", agent)))
            sequence += 1
    while heap:
        handler(heapq.heappop(heap)[2])
    return received[0], time.perf_counter() - start


def best_rate(fn, delay) -> dict:
    rates = []
    count = 0
    for _ in range(REPEATS):
        count, seconds = fn(delay)
        rates.append(count / seconds)
    return {"messages": count, "per_second_median": float(np.median(rates)), "per_second_max": float(max(rates))}


def main() -> dict:
    out = {"workload": f"{AGENTS} agents, {DEGREE}-regular, broadcast every tick for {TICKS} ticks"}
    for label, delay in (("constant", Distribution("constant", {"value": 1.0})),
                         ("exponential", Distribution("exponential", {"mean": 1.0}))):
        engine = best_rate(run_engine, delay)
        naive = best_rate(run_naive, delay)
        callbacks = best_rate(run_callbacks, delay)
        plain = best_rate(run_heapq, delay)
        out[label] = {"engine": engine, "naive": naive, "callbacks": callbacks, "heapq": plain,
                      "speedup": engine["per_second_median"] / naive["per_second_median"],
                      "of_callbacks": engine["per_second_median"] / callbacks["per_second_median"],
                      "of_heapq": engine["per_second_median"] / plain["per_second_median"]}
    return out


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=2)
    print()
