"""Throughput of the dubey2020a protocols on the LOCAL (flooding) protocol, and the projected
time of a full ``netsim run dubey2020a-fig1a --jobs 2``.

Runs ONE trial of each requested bundled scenario (default: dubey2020a-fig1a at full size,
200 agents, T = 1000) and prints JSON with, per scenario:

* ``wall_s`` / ``cpu_s``: wall-clock and process CPU time of the trial (the CPU figure is the
  one to extrapolate from on a loaded machine);
* ``records_forwarded_per_s``: record-hops sent (sum of payload sizes) per CPU second;
* ``messages_per_s``: engine messages (one per link per trial) per CPU second;
* ``agent_steps_per_s``: agents x trials per CPU second;
* ``projected_full_run_min``: trials x cpu_s / jobs / 60 for the scenario's ``run.trials``.

Run: ``python benchmarks/dubey2020a.py [scenario ...] [--set KEY=VALUE ...] [--jobs 2]``
"""

from __future__ import annotations

import argparse
import json
import time

from netsim.engine import scenario as S
from netsim.engine.sim import Simulation
from netsim.engine.streams import trial_sequence


def measure(name: str, overrides: list[str], jobs: int) -> dict:
    sc = S.load(name, overrides)
    sim = Simulation(sc, trial_sequence(sc.run["seed"], 0), trial=0)
    wall, cpu = time.perf_counter(), time.process_time()
    result = sim.run()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    row = result.row
    steps = sc.network["agents"] * sc.run["horizon"]
    records = row.get("records_forwarded", 0)
    return {
        "scenario": sc.name,
        "protocol": row["protocol"],
        "agents": sc.network["agents"],
        "horizon": sc.run["horizon"],
        "gamma": row.get("gamma"),
        "group_regret": round(row["group_regret"], 1),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "messages_sent": row["messages_sent"],
        "records_forwarded": records,
        "records_forwarded_per_s": round(records / cpu),
        "messages_per_s": round(row["messages_sent"] / cpu),
        "agent_steps_per_s": round(steps / cpu),
        "trials": sc.run["trials"],
        "jobs": jobs,
        "projected_full_run_min": round(sc.run["trials"] * cpu / jobs / 60, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=["dubey2020a-fig1a"])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    print(json.dumps([measure(name, args.overrides, args.jobs) for name in args.scenarios], indent=2))


if __name__ == "__main__":
    main()
