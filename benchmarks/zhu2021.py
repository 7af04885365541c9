"""Throughput of Gossip_UCB / Fed_UCB at Fig. 2(b) settings (N = 10 path, M = 10), as JSON.

* ``engine``: the bundled scenarios ``zhu2021-fig2b-eps1`` and ``-epsinf`` (and the realistic
  mode) run through :func:`netsim.engine.sim.run_trial`, horizon ``--ticks``;
* ``plain_numpy``: the same per-tick update (Eq. (1), line 6, Eq. (11)/(12), the binary-tree
  counter, the gossip update on one uniform edge) as a bare numpy loop with Gaussian rewards
  drawn directly: no SimPy, no bandit bookkeeping, no link accounting. It is the practical
  limit of the vectorised update in Python.

* ``per_tick``: CPU microseconds per tick of a Fig. 2(a) and a Fig. 2(b) trial (eps = 1, paper
  mode), and the part of it spent in the bandit's pulls (``pull_each``, ``pull_many``) and in the
  binary-tree counter's ``release``, each measured by replaying the trial's own calls (same
  arguments, same order) on a fresh bandit and counter in the same process: no timer inside the trial.

Usage: ``python benchmarks/zhu2021.py [--ticks 5000] [--repeat 2]``; prints one JSON object.
Figures are agent-steps per second (agents x ticks / wall seconds), best of ``--repeat``; the
per-tick figures are CPU time, best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
import tomllib
from pathlib import Path

import networkx as nx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from netsim.engine import scenario as S
from netsim.engine.sim import run_trial
from netsim.engine.streams import trial_sequence
from protocols.privacy.tree import BinaryTreeCounter
from protocols.zhu2021 import gossip, rules


def load(name: str, overrides: list[str]) -> S.Scenario:
    """A bundled scenario of this checkout with ``--set`` overrides; ``KEY=`` (empty value) removes KEY."""
    path = ROOT / "scenarios" / f"{name}.toml"
    document = S.apply_overrides(tomllib.loads(path.read_text()), [o for o in overrides if not o.endswith("=")])
    for text in (o for o in overrides if o.endswith("=")):
        *parents, last = text[:-1].split(".")
        target = document
        for part in parents:
            target = target.get(part, {})
        target.pop(last, None)
    return S.from_dict(document, base_dir=path.parent, path=str(path))


def engine_rate(name: str, ticks: int, overrides: list[str]) -> dict:
    """One trial of bundled scenario ``name`` (with ``overrides``) for ``ticks`` ticks, timed."""
    sc = load(name, [f"run.horizon={ticks}", "run.checkpoints=10", *overrides])
    started = time.perf_counter()
    result = run_trial(sc, trial_sequence(1, 0), 0)
    wall = time.perf_counter() - started
    agents = sc.network["agents"]
    return {"scenario": name, "overrides": overrides, "ticks": ticks, "agents": agents, "wall_s": round(wall, 3),
            "agent_steps_per_s": round(agents * ticks / wall), "mean_agent_regret": result.row["mean_agent_regret"]}


def plain_loop(num_agents: int, num_arms: int, ticks: int, epsilon: float, seed: int = 1) -> dict:
    """Alg. 1 / Alg. 4 on a path graph with numpy only (same decision rule functions)."""
    rng = np.random.default_rng(seed)
    graph = nx.path_graph(num_agents)
    hood = rules.neighbourhoods(graph, num_agents)
    edges = np.array(list(graph.edges()))
    means = rng.uniform(0, 1, (num_agents, num_arms))
    counter = BinaryTreeCounter(epsilon=epsilon, horizon=ticks, shape=(num_agents, num_arms),
                                rng=np.random.default_rng(seed + 1))
    agents = np.arange(num_agents)
    started = time.perf_counter()
    first = means + rng.standard_normal(means.shape)
    n = np.ones((num_agents, num_arms))
    ntilde = n.copy()
    xbar = first.copy()
    theta = xbar.copy()
    regret = 0.0
    gaps = means.mean(axis=0).max() - means.mean(axis=0)
    for t in range(1, ticks):
        lagging = rules.consistency_set(n, ntilde, num_agents)
        ntilde = rules.propagate_max_counts(n, ntilde, rules.neighbour_max(ntilde, hood))
        bonus = rules.confidence_bound(n, t, num_agents, horizon=ticks, epsilon=epsilon)
        arms = rules.select_arms(theta, bonus, lagging, rng)
        rewards = means[agents, arms] + rng.standard_normal(num_agents)
        regret += gaps[arms].sum()
        n[agents, arms] += 1.0
        released = counter.release((agents, arms), t, rewards)
        new_mean = (first[agents, arms] + released) / n[agents, arms]
        change = new_mean - xbar[agents, arms]
        xbar[agents, arms] = new_mean
        u, v = edges[rng.integers(len(edges))]
        gossip.gossip_update(theta, agents * num_arms + arms, change, (u, v))
    wall = time.perf_counter() - started
    return {"agents": num_agents, "arms": num_arms, "ticks": ticks, "epsilon": str(epsilon), "wall_s": round(wall, 3),
            "agent_steps_per_s": round(num_agents * ticks / wall), "mean_agent_regret": regret / num_agents}


def per_tick(name: str, ticks: int, repeat: int) -> dict:
    """CPU us per tick of one paper-mode trial, and of its pulls (pull_each / pull_many) and release calls
    replayed alone."""
    from netsim.engine.sim import Simulation

    sc = load(name, [f"run.horizon={ticks}", "run.checkpoints=10"])
    best_total = best_pull = best_release = math.inf
    for _ in range(repeat):
        sim = Simulation(sc, trial_sequence(1, 0))
        pulls, releases = [], []
        pull_many, pull_each, start = sim.bandit.pull_many, sim.bandit.pull_each, sim.protocol.start

        def record_pull(agents, arms, n=1, pull_many=pull_many, pulls=pulls):
            pulls.append((np.array(agents), np.array(arms)))
            return pull_many(agents, arms, n)

        def record_each(arms, pull_each=pull_each, pulls=pulls):
            pulls.append((None, np.array(arms)))
            return pull_each(arms)

        def record_release(index, t, value=0.0, release=None, releases=releases):
            releases.append((index if isinstance(index, tuple) else np.array(index), t, np.array(value)))
            return release(index, t, value)

        def wired(start=start, sim=sim, record_release=record_release):
            start()
            counter = sim.protocol.counter
            counter.release = lambda i, tick, v=0.0, r=counter.release: record_release(i, tick, v, r)

        sim.bandit.pull_many, sim.bandit.pull_each, sim.protocol.start = record_pull, record_each, wired
        begin = time.process_time()
        sim.run()
        total = time.process_time() - begin
        replay = Simulation(sc, trial_sequence(1, 0))      # a fresh bandit and counter, same instance
        replay.protocol.start()
        begin = time.process_time()
        for agents, arms in pulls:
            replay.bandit.pull_many(agents, arms) if agents is not None else replay.bandit.pull_each(arms)
        pull = time.process_time() - begin
        counter = replay.protocol.counter
        begin = time.process_time()
        for index, t, value in releases:
            counter.release(index, t, value)
        release = time.process_time() - begin
        best_total, best_pull, best_release = min(best_total, total), min(best_pull, pull), min(best_release, release)
    scale = 1e6 / ticks
    return {"scenario": name, "ticks": ticks, "cpu_us_per_tick": round(best_total * scale, 1),
            "pulls_us_per_tick": round(best_pull * scale, 1), "release_us_per_tick": round(best_release * scale, 1),
            "pulls_share": round(best_pull / best_total, 3), "release_share": round(best_release / best_total, 3)}


def best(runs: list[dict]) -> dict:
    return max(runs, key=lambda r: r["agent_steps_per_s"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    out = {
        "benchmark": "zhu2021 Gossip_UCB / Fed_UCB, Fig. 2(b) settings: N = 10 agents on a path, M = 10 arms",
        "python": platform.python_version(), "numpy": np.__version__, "machine": platform.machine(),
        "engine": [
            best([engine_rate("zhu2021-fig2b-eps1", args.ticks, []) for _ in range(args.repeat)]),
            best([engine_rate("zhu2021-fig2b-epsinf", args.ticks, []) for _ in range(args.repeat)]),
            best([engine_rate("zhu2021-fig2b-epsinf", args.ticks, ["protocol.mode=realistic"])
                  for _ in range(args.repeat)]),
        ],
        "plain_numpy": [
            best([plain_loop(10, 10, args.ticks, 1.0) for _ in range(args.repeat)]),
            best([plain_loop(10, 10, args.ticks, math.inf) for _ in range(args.repeat)]),
        ],
    }
    out["per_tick"] = [per_tick(name, args.ticks, args.repeat) for name in ("zhu2021-fig2a-eps1", "zhu2021-fig2b-eps1")]
    out["engine_over_plain"] = {
        "eps1": round(out["engine"][0]["agent_steps_per_s"] / out["plain_numpy"][0]["agent_steps_per_s"], 3),
        "epsinf": round(out["engine"][1]["agent_steps_per_s"] / out["plain_numpy"][1]["agent_steps_per_s"], 3),
    }
    print(json.dumps(out, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
