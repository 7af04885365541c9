"""Benchmark of centralized FedUCB: agent-steps per second for d = 10, K = 100, M = 10.

Runs one trial of each configuration (Sec. 4.4 gapped contexts, Bernoulli rewards, zero server
delay) and prints JSON: agent-steps/s = M * T / wall time of the trial (engine, environment,
UCB, Sherman-Morrison updates, messages and privatizer included), plus rounds and regret.

OpenBLAS threads are pinned to 1 (before numpy is imported): the batched matrix products of
the UCB are small, and on a shared 2-core machine a multi-threaded OpenBLAS made them up to 100x
slower (measured: (10, 256, 64) @ (10, 64, 64) in 160 ms with default threads, 1.5 ms with one).

Usage: python benchmarks/feducb.py [--horizon T]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netsim.engine import scenario as S  # noqa: E402
from netsim.engine.sim import run_trial  # noqa: E402
from netsim.engine.streams import trial_sequence  # noqa: E402

DOC = {
    "name": "bench-feducb",
    "bandit": {"kind": "linear", "dimension": 10, "arms": 100, "contexts": "gapped", "noise": "bernoulli"},
    "network": {"topology": "complete", "agents": 10, "servers": 1, "delay": {"model": "constant", "value": 0.0}},
    "protocol": {"name": "feducb", "epsilon": 1000.0, "communication": "mlogt", "beta_scale": 0.1},
    "run": {"horizon": 2000, "trials": 1, "seed": 1, "checkpoints": 10},
}


def measure(horizon: int, overrides: list[str]) -> dict:
    doc = S.apply_overrides({k: (dict(v) if isinstance(v, dict) else v) for k, v in DOC.items()},
                            [f"run.horizon={horizon}", *overrides])
    sc = S.from_dict(doc)
    started = time.perf_counter()
    row = run_trial(sc, trial_sequence(1, 0), 0).row
    wall = time.perf_counter() - started
    m = sc.network["agents"]
    return {"set": overrides, "agents": m, "trials": horizon, "wall_s": round(wall, 3),
            "agent_steps_per_s": round(m * horizon / wall, 1), "rounds": row["rounds"],
            "mean_agent_regret": round(row["mean_agent_regret"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizon", type=int, default=2000)
    args = parser.parse_args()
    configs = [["protocol.communication=\"mlogt\""], ["protocol.communication=\"mt\""],
               ["protocol.communication=\"mt\"", "protocol.epsilon=inf"]]
    results = [measure(args.horizon, c) for c in configs]
    print(json.dumps({"benchmark": "feducb", "d": 10, "K": 100, "M": 10, "results": results}, indent=2))


if __name__ == "__main__":
    main()
