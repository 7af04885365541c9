"""Benchmark of the li2022 family: simulated slots per second on bundled scenarios (JSON on stdout).

Usage: ``python benchmarks/li2022.py [--repeat N] [--all]``. By default it times one trial of
``li2022-fig10-ring`` (the headline figure: DDP-MAB with GIS on a 50-agent ring, T = 1e5 slots)
and a few other heavy settings; ``--all`` times every bundled ``li2022-*`` scenario once.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from netsim import scenario as S
from netsim.sim import run_trial
from netsim.streams import trial_sequence

DEFAULT = ["li2022-fig10-ring", "li2022-fig10-ring-lossy", "li2022-fig10-complete", "li2022-fig11-case3",
           "li2022-fig12-ddp", "li2022-fig4-eps1"]


def time_scenario(name: str, repeat: int) -> dict:
    sc = S.load(name)
    walls = []
    row = {}
    for _ in range(repeat):
        started = time.perf_counter()
        result = run_trial(sc, trial_sequence(sc.run["seed"], 0), 0)
        walls.append(time.perf_counter() - started)
        row = result.row
    wall = min(walls)
    slots = row["end_time"] / sc.clock["period"]
    return {
        "scenario": name,
        "protocol": row["protocol"],
        "agents": row["agents"],
        "slots": slots,
        "wall_s": round(wall, 4),
        "slots_per_s": round(slots / wall, 1),
        "agent_slots_per_s": round(slots * row["agents"] / wall, 1),
        "messages": row["messages_sent"],
        "messages_per_s": round(row["messages_sent"] / wall, 1),
        "rounds": row["rounds_completed"],
        "t_delay_mean": row["t_delay_mean"],
        "group_regret": round(row["group_regret"], 2),
        "comm_cost": row["comm_cost"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per scenario (the fastest is reported)")
    parser.add_argument("--all", action="store_true", help="time every bundled li2022 scenario")
    args = parser.parse_args(argv)
    names = sorted(n for n in S.bundled() if n.startswith("li2022-")) if args.all else DEFAULT
    results = [time_scenario(name, args.repeat) for name in names]
    out = {
        "benchmark": "li2022",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "headline": next(r for r in results if r["scenario"] == "li2022-fig10-ring") if "li2022-fig10-ring" in names
        else None,
        "scenarios": results,
    }
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
