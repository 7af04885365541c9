"""Cost of one trial, whole process, against the number of agents, and the three scale settings of issue 16.

* dubey2020a-private on Erdos-Renyi graphs of mean degree 20, gamma = 2, T = 100, for
  M = 100 ... 10,000 (``scale-dubey2020a-private-10k`` with ``network.agents`` and ``network.p``
  set; target at M = 10,000: <= 60 CPU s and <= 4 GB);
* gossip-ucb on a 10,000-agent ring, T = 1,000 (``scale-gossip-ucb-ring-10k``; target <= 60 CPU s);
* ddp-mab on 1,000 agents, mean degree 10, T = 1e5 (``scale-ddp-mab-1k``; target <= 60 CPU s and
  <= 1 GB).

Each point is one ``netsim run`` in a child process (:mod:`benchmarks.process`): CPU seconds
(user + system) and peak resident memory of the whole process. A setting that does not finish
within 120 CPU seconds (or 8 GiB of address space) is stopped and reported as such.

Run: ``python -m benchmarks.scale [--quick]`` (prints JSON)
"""

from __future__ import annotations

import json
import sys

from benchmarks import process

AGENTS = [100, 300, 1000, 3000, 10000]
LIMIT_CPU_S, LIMIT_MIB = 120.0, 8192.0  # a setting that needs more is stopped and reported
SETTINGS = {
    "gossip-ucb, 10,000-agent ring, T = 1,000": ("scale-gossip-ucb-ring-10k", [], 60.0, None),
    "ddp-mab, 1,000 agents, mean degree 10, T = 1e5": ("scale-ddp-mab-1k", [], 60.0, 1024.0),
}


def dubey_point(agents: int) -> dict:
    p = min(1.0, 20.0 / (agents - 1))
    return process.run("scale-dubey2020a-private-10k", [f"network.agents={agents}", f"network.p={p:.6g}"])


def measure(quick: bool = False) -> dict:
    agents = [100, 300] if quick else AGENTS
    curve = []
    for m in agents:
        point = dubey_point(m)
        curve.append({"agents": m, **point})
    settings = {}
    for label, (scenario, overrides, cpu_limit, mem_limit) in SETTINGS.items():
        if quick:
            overrides = overrides + ["run.horizon=20", "network.agents=50"]
        try:
            point = process.run(scenario, overrides, cpu_limit=LIMIT_CPU_S, memory_limit_mib=LIMIT_MIB)
            settings[label] = {"scenario": scenario, **point, "cpu_target_s": cpu_limit, "memory_target_mib": mem_limit}
        except RuntimeError as exc:
            settings[label] = {"scenario": scenario, "error": str(exc), "cpu_target_s": cpu_limit,
                               "memory_target_mib": mem_limit}
    return {"dubey2020a-private": curve, "settings": settings}


if __name__ == "__main__":
    print(json.dumps(measure("--quick" in sys.argv), indent=2))
