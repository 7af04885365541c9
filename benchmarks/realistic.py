"""Realistic mode against paper mode of the same trial, in the same run (issue 25).

Each case runs one trial of a bundled scenario twice, alternately, in this process: as bundled
(paper mode: unit hops, or the scenario's constant delays) and with sampled per-hop delays (the
overrides listed), same seed, same trial; the figure is the median over the repeats of the ratio of
their CPU seconds within a repeat (each pair ran under the same load). A profile of one realistic
trial (cProfile) gives the share of its time spent in the engine's delivery modules
(``netsim/engine/network.py``, ``delivery.py``, ``held.py``, ``messages.py``, ``metrics.py``), the
part of the cost that is the engine's rather than the protocol's. The 10,000-agent case runs as
whole ``netsim run`` processes (child processes: their own CPU seconds and peak memory): paper mode,
realistic mode with numba's cache of the compiled flooding loops in place (written by the cases
above and by an untimed two-step run of the same case, whose batches of more than 32,768 messages
take kernels the smaller cases never call), and realistic mode with an empty cache
(``NUMBA_CACHE_DIR`` a fresh folder: the compile counted, as a first run after install pays it).

Run: ``python -m benchmarks.realistic [--quick]`` (prints JSON)
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time

from benchmarks import process
from netsim.engine import scenario as S
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence

EXPONENTIAL = 'network.delay={model="exponential",mean=1.0}'
ENGINE = ("netsim/engine/network.py", "netsim/engine/delivery.py", "netsim/engine/held.py",
          "netsim/engine/messages.py", "netsim/engine/metrics.py")

#: label -> (scenario, overrides of both modes, overrides of the realistic mode, target ratio or None)
CASES = {
    "dubey2020a-fig1a, M = 200, T = 1000, exponential delays mean 1":
        ("dubey2020a-fig1a", [], [EXPONENTIAL], 3.0),
    "gossip-ucb, 1,000-agent ring, T = 1000, exponential delays mean 1":
        ("scale-gossip-ucb-ring-10k", ["network.agents=1000"], ["protocol.mode='realistic'", EXPONENTIAL], 3.0),
    "ddp-mab, 1,000 agents, T = 1e5, exponential delays mean 0.25":
        ("scale-ddp-mab-1k", [], ['network.delay={model="exponential",mean=0.25}'], None),
}
QUICK = ["run.horizon=20", "run.checkpoints=2"]
BIG = ("scale-dubey2020a-private-10k", [EXPONENTIAL])  # realistic dubey2020a-private, M = 10,000
BIG_LIMITS = (60.0, 4096.0)                            # CPU s, MiB (issue 25)
CAP_CPU_S = 1800.0                                     # a longer run is stopped and reported as such


def trial_cpu(name: str, overrides: list[str]) -> tuple[float, dict]:
    """CPU seconds of one trial (trial 0) of ``name`` with ``overrides``, and its trials.csv row."""
    sc = S.load(name, overrides)
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0), trial=0)
    cpu = time.process_time()
    row = sim.run().row
    return time.process_time() - cpu, row


def engine_share(name: str, overrides: list[str]) -> float:
    """Share of one trial's profiled time spent in the engine's delivery modules."""
    sc = S.load(name, overrides)
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0), trial=0)
    profile = cProfile.Profile()
    profile.runcall(sim.run)
    stats = pstats.Stats(profile).stats
    total = sum(v[2] for v in stats.values())
    engine = sum(v[2] for (path, _, _), v in stats.items() if path.replace("\\", "/").endswith(ENGINE))
    return round(engine / total, 3) if total else 0.0


def measure(quick: bool = False, repeats: int = 5) -> dict:
    cases = {}
    for label, (name, both, realistic, target) in CASES.items():
        both = both + (QUICK if quick else [])
        paper, real = [], []
        for _ in range(1 if quick else repeats):
            cpu, paper_row = trial_cpu(name, both)
            paper.append(cpu)
            cpu, real_row = trial_cpu(name, both + realistic)
            real.append(cpu)
        pairs = [r / p for p, r in zip(paper, real, strict=True)]
        cases[label] = {"scenario": name, "overrides": both, "realistic": realistic, "paper_cpu_s": paper,
                        "realistic_cpu_s": real, "ratio": round(statistics.median(pairs), 2),
                        "ratio_range": [round(min(pairs), 2), round(max(pairs), 2)], "target": target,
                        "messages_paper": paper_row["messages_sent"], "messages_realistic": real_row["messages_sent"],
                        "engine_share_realistic": engine_share(name, both + realistic)}
    big = {}
    name, realistic = BIG
    overrides = (["network.agents=1000", "network.p=0.02002"] + QUICK) if quick else []
    for mode, extra in (("paper", []), ("realistic", realistic), ("realistic, empty compile cache", realistic)):
        with tempfile.TemporaryDirectory() as cache:
            before = os.environ.get("NUMBA_CACHE_DIR")
            if mode.endswith("cache"):
                os.environ["NUMBA_CACHE_DIR"] = cache  # the child compiles afresh
            try:
                if mode == "realistic":  # untimed: caches the kernels of batches too large for the cases above
                    process.run(name, overrides + extra + ["run.horizon=2"], cpu_limit=CAP_CPU_S)
                big[mode] = process.run(name, overrides + extra, cpu_limit=CAP_CPU_S)
            except RuntimeError as exc:
                big[mode] = {"error": str(exc)}
            finally:
                if before is None:
                    os.environ.pop("NUMBA_CACHE_DIR", None)
                else:
                    os.environ["NUMBA_CACHE_DIR"] = before
    return {"cases": cases, "big": {"scenario": name, "overrides": overrides, "realistic": realistic, **big}}


if __name__ == "__main__":
    print(json.dumps(measure("--quick" in sys.argv), indent=2))
